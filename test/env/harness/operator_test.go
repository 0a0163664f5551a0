package harness

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestExpand(t *testing.T) {
	ep := endpoints{
		kubeconfig: "/tmp/k", webhookHost: "127.0.0.1", webhookCertDir: "/tmp/certs",
		webhookPort: 9443, metricsPort: 8080, probePort: 8081,
	}
	cases := []struct {
		name    string
		command string
		want    string
	}{
		{
			name:    "default command gets every endpoint",
			command: operatorBuild{binary: "/bin/sandgate", webhookHost: true, selfSignedCerts: true}.command(false),
			want: "/bin/sandgate --kubeconfig=/tmp/k --extensions --leader-elect=false " +
				"--metrics-bind-address=127.0.0.1:8080 --health-probe-bind-address=127.0.0.1:8081 " +
				"--webhook-port=9443 --webhook-cert-dir=/tmp/certs --webhook-host=127.0.0.1",
		},
		{
			name:    "without --webhook-host for builds that lack it",
			command: operatorBuild{binary: "op", selfSignedCerts: true}.command(false),
			want: "op --kubeconfig=/tmp/k --extensions --leader-elect=false " +
				"--metrics-bind-address=127.0.0.1:8080 --health-probe-bind-address=127.0.0.1:8081 " +
				"--webhook-port=9443 --webhook-cert-dir=/tmp/certs",
		},
		{
			name:    "the operator's own self-signed certificate",
			command: operatorBuild{binary: "op", webhookHost: true, selfSignedCerts: true}.command(true),
			want: "op --kubeconfig=/tmp/k --extensions --leader-elect=false " +
				"--metrics-bind-address=127.0.0.1:8080 --health-probe-bind-address=127.0.0.1:8081 " +
				"--webhook-port=9443 --webhook-cert-dir=/tmp/certs --webhook-host=127.0.0.1 --self-signed-certs",
		},
		{
			name:    "another implementation with its own flag names",
			command: "other-controller --kubeconfig {{kubeconfig}} --metrics-addr=:{{metrics-port}} --cert-dir={{webhook-cert-dir}}",
			want:    "other-controller --kubeconfig /tmp/k --metrics-addr=:8080 --cert-dir=/tmp/certs",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, expand(tc.command, ep)); diff != "" {
				t.Errorf("expand mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// Builds not made again for keepBuilds are removed; newer ones and other files stay.
func TestPruneBuildsRemovesOnlyStaleBuilds(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	for name, age := range map[string]time.Duration{
		"sandgate-stale": keepBuilds + time.Hour,
		"sandgate-fresh": time.Hour,
		"other":          keepBuilds + time.Hour,
	} {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, nil, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(path, now.Add(-age), now.Add(-age)); err != nil {
			t.Fatal(err)
		}
	}
	pruneBuilds(dir, now)
	for name, want := range map[string]bool{"sandgate-stale": false, "sandgate-fresh": true, "other": true} {
		_, err := os.Stat(filepath.Join(dir, name))
		if got := err == nil; got != want {
			t.Errorf("%s kept = %v, want %v", name, got, want)
		}
	}
}
