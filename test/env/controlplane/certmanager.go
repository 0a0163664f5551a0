package controlplane

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
)

// CertManagerDir is where `make tools` put cert-manager's controllers and CRDs: the version
// hack/cert-manager/go.mod (under the repository root) requires, under bin/cert-manager,
// or $SANDGATE_CERT_MANAGER_DIR. It is an error when the controllers there are not that
// version.
func CertManagerDir(root string) (string, error) {
	gomod, err := os.ReadFile(filepath.Join(root, "hack", "cert-manager", "go.mod"))
	if err != nil {
		return "", err
	}
	m := regexp.MustCompile(`(?m)^\s*github\.com/cert-manager/cert-manager\s+(v\S+)`).FindSubmatch(gomod)
	if m == nil {
		return "", fmt.Errorf("hack/cert-manager/go.mod requires no github.com/cert-manager/cert-manager")
	}
	version := string(m[1])
	dir := os.Getenv("SANDGATE_CERT_MANAGER_DIR")
	if dir == "" {
		dir = filepath.Join(root, "bin", "cert-manager", version)
	}
	out, err := exec.Command(filepath.Join(dir, "cert-manager-controllers"), "--version").Output()
	if err != nil || !bytes.HasPrefix(out, []byte("cert-manager "+version+" ")) {
		return "", fmt.Errorf("cert-manager controllers %s not found in %s (%v, %q): run `make tools`", version, dir, err, out)
	}
	return dir, nil
}
