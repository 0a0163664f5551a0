//go:build integration

package certmanager_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/sandgate-dev/sandgate/test/controlplane"
)

// kubeconfigFor writes a kubeconfig of user (in groups) into the cluster's directory.
func kubeconfigFor(t *testing.T, c *controlplane.Cluster, user string, groups ...string) string {
	t.Helper()
	cfg, err := c.UserConfig(user, groups...)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(c.Dir, regexp.MustCompile(`[^a-zA-Z0-9-]+`).ReplaceAllString(user, "_")+".kubeconfig")
	if err := writeKubeconfig(path, cfg); err != nil {
		t.Fatal(err)
	}
	return path
}

func writeKubeconfig(path string, cfg *rest.Config) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["local"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["user"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData}
	kc.Contexts["local"] = &clientcmdapi.Context{Cluster: "local", AuthInfo: "user"}
	kc.CurrentContext = "local"
	return clientcmd.WriteToFile(*kc, path)
}

// certManagerDir is where `make tools` put cert-manager's controllers and CRDs: the version
// test/tools/cert-manager/go.mod requires, under bin/cert-manager (or $SANDGATE_CERT_MANAGER_DIR).
func certManagerDir(t *testing.T, root string) string {
	t.Helper()
	gomod, err := os.ReadFile(filepath.Join(root, "test", "tools", "cert-manager", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\s*github\.com/cert-manager/cert-manager\s+(v\S+)`).FindSubmatch(gomod)
	if m == nil {
		t.Fatal("test/tools/cert-manager/go.mod requires no github.com/cert-manager/cert-manager")
	}
	version := string(m[1])
	dir := os.Getenv("SANDGATE_CERT_MANAGER_DIR")
	if dir == "" {
		dir = filepath.Join(root, "bin", "cert-manager", version)
	}
	out, err := exec.Command(filepath.Join(dir, "cert-manager-controllers"), "--version").Output()
	if err != nil || !bytes.HasPrefix(out, []byte("cert-manager "+version+" ")) {
		t.Fatalf("cert-manager controllers %s not found in %s (%v, %q): run `make tools`", version, dir, err, out)
	}
	return dir
}

// buildSandgate builds cmd/sandgate into a temporary directory.
func buildSandgate(t *testing.T, root string) string {
	t.Helper()
	start := time.Now()
	bin := filepath.Join(t.TempDir(), "sandgate")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/sandgate")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/sandgate: %v\n%s", err, out)
	}
	t.Logf("built sandgate in %s", time.Since(start).Round(time.Millisecond))
	return bin
}
