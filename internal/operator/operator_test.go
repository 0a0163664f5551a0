package operator

import (
	"context"
	"strings"
	"testing"

	"k8s.io/client-go/rest"
)

func TestDefaultOptionsAreValid(t *testing.T) {
	d := DefaultOptions()
	if err := d.Validate(); err != nil {
		t.Fatalf("DefaultOptions: %v", err)
	}
	if d.SandboxWorkers != 10 || d.ClaimWorkers != 64 || d.WarmPoolWorkers != 4 {
		t.Errorf("workers = %d/%d/%d, want the production 10/64/4", d.SandboxWorkers, d.ClaimWorkers, d.WarmPoolWorkers)
	}
}

func TestZeroOptionsRejected(t *testing.T) {
	_, err := New(context.Background(), &rest.Config{Host: "https://127.0.0.1:1"}, Options{})
	if err == nil {
		t.Fatal("New accepted the zero Options")
	}
	for _, want := range []string{"SandboxWorkers", "WebhookPort", "ClusterDomain", "QPS"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %s", err, want)
		}
	}
}
