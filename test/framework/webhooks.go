package framework

import (
	"testing"

	"github.com/sandgate-dev/sandgate/internal/operator"
)

// envtestWebhookServer points the operator's webhook server at the host, port and certificate
// directory envtest configured the webhook configurations for; the certificate is served
// through certs.Watcher, as in production.
func (c *Cluster) envtestWebhookServer(t testing.TB, o *operator.Options) {
	t.Helper()
	w := c.Env.WebhookInstallOptions
	if w.LocalServingPort == 0 || len(w.MutatingWebhooks)+len(w.ValidatingWebhooks) == 0 {
		t.Fatalf("ManagerOptions.Webhooks needs a cluster started with controlplane.Options.Webhooks")
	}
	o.WebhookHost, o.WebhookPort, o.WebhookCertDir = w.LocalServingHost, w.LocalServingPort, w.LocalServingCertDir
}
