package load

// The overload scenario's client: a claim refused at admission with 429 is a refusal the run
// counts, not one it waits out. client-go retries a 429 that carries Retry-After by itself, up
// to ten times inside one Create, so a refused claim would look like a slow create and the
// offered rate would fall to what the cluster accepts; openClient hides the header from
// client-go (the hint stays in the Status's retryAfterSeconds, which the run records).

import (
	"errors"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"
)

// openClient is cfg for an open run (SustainedConfig.Open): Retry-After is removed from 429
// responses so that client-go returns them at once; cfg itself otherwise.
func openClient(cfg *rest.Config, open bool) *rest.Config {
	if !open {
		return cfg
	}
	c := rest.CopyConfig(cfg)
	inner := c.WrapTransport
	c.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		if inner != nil {
			rt = inner(rt)
		}
		return noRetryAfter{rt}
	}
	return c
}

// noRetryAfter strips Retry-After from 429 responses.
type noRetryAfter struct{ next http.RoundTripper }

func (t noRetryAfter) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if err == nil && resp.StatusCode == http.StatusTooManyRequests {
		resp.Header.Del("Retry-After")
	}
	return resp, err
}

// refused reports whether err is a 429 refusal and the retry delay it suggests, in seconds
// (0 without one).
func refused(err error) (retryAfter int32, ok bool) {
	var status apierrors.APIStatus
	if err == nil || !errors.As(err, &status) || !apierrors.IsTooManyRequests(err) {
		return 0, false
	}
	if d := status.Status().Details; d != nil {
		return d.RetryAfterSeconds, true
	}
	return 0, true
}
