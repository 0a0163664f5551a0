package operator

import (
	"crypto/tls"

	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// metricsServerOptions configures the metrics endpoint. With SecureMetrics it serves HTTPS and
// answers only requests whose bearer token the API server authenticates (TokenReview) and
// whose user may get the non-resource URL /metrics (SubjectAccessReview): config/rbac's
// metrics-reader ClusterRole grants that, metrics-auth-role lets the manager ask. The
// certificate is one controller-runtime makes in memory at start: scrapers authenticate
// themselves and encrypt, they do not verify the server (as with kube-controller-manager).
// Without SecureMetrics it serves plain HTTP to anyone who can reach the port.
func metricsServerOptions(opts Options) metricsserver.Options {
	o := metricsserver.Options{BindAddress: opts.MetricsBindAddress, ExtraHandlers: pprofHandlers(opts)}
	if !opts.SecureMetrics {
		return o
	}
	o.SecureServing = true
	o.FilterProvider = filters.WithAuthenticationAndAuthorization
	// HTTP/1.1 only: scrapers need nothing more, and HTTP/2's stream handling has been the
	// way into denial-of-service bugs (CVE-2023-44487, CVE-2023-39325) on endpoints that any
	// client may reach before authenticating.
	o.TLSOpts = []func(*tls.Config){func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} }}
	return o
}
