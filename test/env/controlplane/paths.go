package controlplane

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
)

const (
	// modulePath is the module this package belongs to; used to recognise the repository root.
	modulePath = "github.com/sandgate-dev/sandgate"

	// KubernetesVersion is the version of the control-plane binaries `make tools` builds
	// into bin/k8s/<version> under the repository root.
	KubernetesVersion = "v1.37.1"
)

// RepoRoot returns the root directory of the sandgate repository: located from this source
// file, so it works from any package's test directory and from `go run`, and else (binaries
// built with -trimpath) from the working directory upwards.
func RepoRoot() (string, error) {
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		root := filepath.Dir(filepath.Dir(filepath.Dir(filepath.Dir(file)))) // test/env/controlplane/paths.go
		if isRepoRoot(root) {
			return root, nil
		}
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("get working directory: %w", err)
	}
	for {
		if isRepoRoot(dir) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("locate the %s repository root: no go.mod of that module above %s", modulePath, dir)
		}
		dir = parent
	}
}

// isRepoRoot reports whether dir holds the go.mod of this module.
func isRepoRoot(dir string) bool {
	f, err := os.Open(filepath.Join(dir, "go.mod"))
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if line := strings.TrimSpace(sc.Text()); strings.HasPrefix(line, "module ") {
			return strings.TrimSpace(strings.TrimPrefix(line, "module ")) == modulePath
		}
	}
	return false
}

// defaultBinaryDir returns $KUBEBUILDER_ASSETS, else <repo root>/bin/k8s/<KubernetesVersion>.
func defaultBinaryDir() (string, error) {
	if dir := os.Getenv("KUBEBUILDER_ASSETS"); dir != "" {
		return dir, nil
	}
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, "bin", "k8s", KubernetesVersion), nil
}

// defaultCRDDirectoryPaths returns <repo root>/config/crd/bases.
func defaultCRDDirectoryPaths() ([]string, error) {
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	return []string{filepath.Join(root, "config", "crd", "bases")}, nil
}

// defaultWebhookPaths returns <repo root>/config/webhook: the generated webhook configurations,
// which envtest rewrites to call the local webhook server with its own CA.
func defaultWebhookPaths() ([]string, error) {
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	return []string{filepath.Join(root, "config", "webhook")}, nil
}

// checkBinaries fails with a hint to run `make tools` when a binary the options need is
// missing from dir.
func checkBinaries(dir string, opts Options) error {
	names := []string{"etcd", "kube-apiserver", "kubectl"}
	if !opts.NoScheduler {
		names = append(names, "kube-scheduler")
	}
	if !opts.NoControllerManager {
		names = append(names, "kube-controller-manager")
	}
	if !opts.NoKwok {
		names = append(names, "kwok")
	}
	var missing []string
	for _, name := range names {
		info, err := os.Stat(filepath.Join(dir, name))
		switch {
		case errors.Is(err, os.ErrNotExist):
			missing = append(missing, name)
		case err != nil:
			return fmt.Errorf("check control-plane binary %s: %w", name, err)
		case info.IsDir() || info.Mode()&0o111 == 0:
			missing = append(missing, name+" (not executable)")
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("control-plane binaries missing in %s: %s; run `make tools` in the repository root to build them (or set KUBEBUILDER_ASSETS to a directory that has them)",
			dir, strings.Join(missing, ", "))
	}
	return nil
}
