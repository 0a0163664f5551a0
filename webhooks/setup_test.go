package webhooks

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"sigs.k8s.io/yaml"
)

// The webhook configurations name v1beta1 only; a v1alpha1 request reaches them converted
// because their matchPolicy is Equivalent (the API server's default when unset). Exact would
// let every v1alpha1 write skip stamping, the binding guard and validation.
func TestWebhookConfigurationsAdmitEveryServedVersion(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "config", "webhook", "manifests.yaml"))
	if err != nil {
		t.Fatalf("reading the generated webhook configurations (run `make manifests`): %v", err)
	}
	seen := 0
	for _, doc := range strings.Split(string(raw), "\n---\n") {
		var cfg struct {
			Kind     string                                    `json:"kind"`
			Webhooks []admissionregistrationv1.MutatingWebhook `json:"webhooks"`
		}
		if err := yaml.Unmarshal([]byte(doc), &cfg); err != nil {
			t.Fatalf("decoding a webhook configuration: %v", err)
		}
		for _, w := range cfg.Webhooks {
			seen++
			if p := w.MatchPolicy; p != nil && *p != admissionregistrationv1.Equivalent {
				t.Errorf("%s %s: matchPolicy %s, want Equivalent (or unset)", cfg.Kind, w.Name, *p)
			}
		}
	}
	if seen == 0 {
		t.Fatal("no webhooks found in config/webhook/manifests.yaml")
	}
}
