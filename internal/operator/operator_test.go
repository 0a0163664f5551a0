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

func TestWarmPoolSettingsChecked(t *testing.T) {
	o := DefaultOptions()
	o.WarmPool = WarmPoolSettings{ReadinessGracePeriod: 0, UnschedulableRecheckInterval: -1, MaxBatchSize: 0, MaxRefillRate: -1, ReplenishDelay: -1}
	o.QPS = -1 // no client-side limit: valid
	err := o.Validate()
	if err == nil {
		t.Fatal("Validate accepted bad warm pool settings")
	}
	for _, want := range []string{"WarmPool.ReadinessGracePeriod", "WarmPool.UnschedulableRecheckInterval", "WarmPool.MaxBatchSize", "WarmPool.MaxRefillRate", "WarmPool.ReplenishDelay"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %s", err, want)
		}
	}
	if strings.Contains(err.Error(), "QPS") {
		t.Errorf("negative QPS refused: %v", err)
	}
}
