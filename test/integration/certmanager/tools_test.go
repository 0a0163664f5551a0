//go:build integration

package certmanager_test

import (
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/sandgate-dev/sandgate/test/env/controlplane"
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
