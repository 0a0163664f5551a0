//go:build integration

package certmanager_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// projectionInterval is how often the projection rereads the Secret. The kubelet resyncs a
// pod's volumes about once a minute; faster here, since the test waits on it.
const projectionInterval = 100 * time.Millisecond

// projectSecret keeps dir in sync with Secret namespace/name until the test ends, the way the
// kubelet maintains a Secret volume: each version of the data goes into a new hidden directory,
// the ..data symlink is switched to it in one rename, and each key is a symlink key →
// ..data/key. A reader of dir/<key> sees the old files or the new ones, never a mix — and a
// watcher of dir sees the rename of ..data, not a write of tls.crt.
func projectSecret(t *testing.T, cs kubernetes.Interface, namespace, name, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		lastErr error
	)
	wg.Go(func() {
		version := ""
		for {
			secret, err := cs.CoreV1().Secrets(namespace).Get(ctx, name, metav1.GetOptions{})
			switch {
			case ctx.Err() != nil:
				return
			case err != nil:
				// Not there yet, or a transient failure: the kubelet retries too.
			case secret.ResourceVersion != version:
				if err := writeAtomically(dir, secret.Data); err != nil {
					mu.Lock()
					lastErr = fmt.Errorf("projecting Secret %s/%s into %s: %w", namespace, name, dir, err)
					mu.Unlock()
					return
				}
				version = secret.ResourceVersion
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(projectionInterval):
			}
		}
	})
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		if lastErr != nil {
			t.Error(lastErr)
		}
	})
}

const (
	dataLink    = "..data"
	dataLinkTmp = "..data_tmp"
)

// writeAtomically makes files the content of dir, as described at projectSecret.
func writeAtomically(dir string, files map[string][]byte) error {
	version, err := os.MkdirTemp(dir, time.Now().UTC().Format("..2006_01_02_15_04_05."))
	if err != nil {
		return err
	}
	if err := os.Chmod(version, 0o755); err != nil {
		return err
	}
	for key, data := range files {
		if strings.Contains(key, "/") || strings.HasPrefix(key, "..") {
			return fmt.Errorf("secret key %q is not a file name", key)
		}
		if err := os.WriteFile(filepath.Join(version, key), data, 0o644); err != nil {
			return err
		}
	}
	old, err := os.Readlink(filepath.Join(dir, dataLink))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	tmp := filepath.Join(dir, dataLinkTmp)
	if err := os.Remove(tmp); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if err := os.Symlink(filepath.Base(version), tmp); err != nil {
		return err
	}
	if err := os.Rename(tmp, filepath.Join(dir, dataLink)); err != nil {
		return err
	}
	// The key links: new keys get one, keys gone lose theirs.
	for _, key := range slices.Sorted(maps.Keys(files)) {
		link := filepath.Join(dir, key)
		if _, err := os.Lstat(link); errors.Is(err, os.ErrNotExist) {
			if err := os.Symlink(filepath.Join(dataLink, key), link); err != nil {
				return err
			}
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if _, ok := files[e.Name()]; !ok && !strings.HasPrefix(e.Name(), "..") && e.Type()&os.ModeSymlink != 0 {
			if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
				return err
			}
		}
	}
	if old != "" {
		return os.RemoveAll(filepath.Join(dir, old))
	}
	return nil
}
