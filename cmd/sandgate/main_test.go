package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The built binary prints its version and exits with --version, before it needs a cluster.
func TestVersionFlagPrintsAndExits(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := filepath.Join(t.TempDir(), "sandgate")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		t.Fatalf("building: %v", err)
	}
	out, err := exec.Command(bin, "--version").CombinedOutput()
	if err != nil {
		t.Fatalf("--version: %v\n%s", err, out)
	}
	if !strings.HasPrefix(string(out), "sandgate, version ") {
		t.Errorf("--version printed %q", out)
	}
	// A bad value stops the binary before it looks for a cluster, naming the flag.
	out, err = exec.Command(bin, "--sandbox-warm-pool-max-batch-size=0", "--kubeconfig=/nonexistent").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "--sandbox-warm-pool-max-batch-size") {
		t.Errorf("bad value: err %v, output %q; want a refusal naming the flag", err, out)
	}
}
