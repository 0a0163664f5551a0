package load

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
)

// A 429 counts as a refusal with its hint; any other error is not one.
func TestRefused(t *testing.T) {
	shed := &apierrors.StatusError{ErrStatus: metav1.Status{Code: http.StatusTooManyRequests, Reason: metav1.StatusReasonTooManyRequests,
		Details: &metav1.StatusDetails{RetryAfterSeconds: 5}}}
	for name, tc := range map[string]struct {
		err      error
		wantOK   bool
		wantHint int32
	}{
		"none":                {},
		"a shed, wrapped":     {err: fmt.Errorf("creating: %w", shed), wantOK: true, wantHint: 5},
		"a policy's, no hint": {err: apierrors.NewTooManyRequests("at the limit", 0), wantOK: true},
		"invalid":             {err: apierrors.NewInvalid(schema.GroupKind{Kind: "SandboxClaim"}, "c", nil)},
		"not an API error":    {err: errors.New("connection refused")},
	} {
		hint, ok := refused(tc.err)
		if ok != tc.wantOK || hint != tc.wantHint {
			t.Errorf("%s: refused = %d, %t; want %d, %t", name, hint, ok, tc.wantHint, tc.wantOK)
		}
	}
}

// An open run's client sees a 429 at once: the Retry-After header that would make client-go
// retry inside the call is gone; a closed run's client is the configuration given.
func TestOpenClientHidesRetryAfter(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Retry-After", "5")
		w.WriteHeader(http.StatusTooManyRequests)
	}))
	defer srv.Close()
	cfg := &rest.Config{Host: srv.URL}
	if got := openClient(cfg, false); got != cfg {
		t.Error("a closed run's configuration was changed")
	}
	rt, err := rest.TransportFor(openClient(cfg, true))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := rt.RoundTrip(httptest.NewRequest(http.MethodPost, srv.URL, nil))
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "" {
		t.Errorf("response %d with Retry-After %q; want 429 without it", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
}
