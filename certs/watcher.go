// Package certs gives the webhook server its serving certificate: Watcher serves whatever
// tls.crt and tls.key are in a directory and picks up new ones without a restart (cert-manager
// renews the Secret, the kubelet swaps the mounted files); SelfSigned makes a throwaway CA and
// serving certificate for local runs and tests, never for production.
package certs

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
)

// File names in the certificate directory, as cert-manager's Secrets and the webhook server
// name them.
const (
	CertFile = "tls.crt"
	KeyFile  = "tls.key"
	CAFile   = "ca.crt"
)

// DefaultPollInterval is how often Watcher rereads the files besides reacting to file events:
// events can be missed (a directory replaced wholesale, a file system without inotify).
const DefaultPollInterval = 10 * time.Second

// Watcher serves the certificate in Dir and reloads it when the files change. It never fails
// for a missing or half-written pair: it keeps serving the last good one (none at first) and
// retries on the next change; Checker tells readiness whether one is loaded.
type Watcher struct {
	dir          string
	pollInterval time.Duration

	mu      sync.RWMutex
	cert    *tls.Certificate
	certPEM []byte
	keyPEM  []byte
	lastErr error
	loads   int
}

// NewWatcher returns a watcher of dir with the default poll interval. It reads the files once
// at once (a missing pair is not an error here: see Checker); Start keeps them current.
func NewWatcher(dir string) *Watcher {
	w := &Watcher{dir: dir, pollInterval: DefaultPollInterval}
	_ = w.Reload()
	return w
}

// WithPollInterval sets how often the files are reread without an event.
func (w *Watcher) WithPollInterval(d time.Duration) *Watcher {
	w.pollInterval = d
	return w
}

// Dir is the watched directory.
func (w *Watcher) Dir() string { return w.dir }

// Reload reads the files now. It returns an error when they cannot be read or do not form a
// valid pair; the certificate served so far stays in place then.
func (w *Watcher) Reload() error {
	certPEM, err := os.ReadFile(filepath.Join(w.dir, CertFile))
	if err == nil {
		var keyPEM []byte
		keyPEM, err = os.ReadFile(filepath.Join(w.dir, KeyFile))
		if err == nil {
			err = w.load(certPEM, keyPEM)
		}
	}
	w.mu.Lock()
	w.lastErr = err
	w.mu.Unlock()
	if err != nil {
		return fmt.Errorf("loading the serving certificate from %s: %w", w.dir, err)
	}
	return nil
}

func (w *Watcher) load(certPEM, keyPEM []byte) error {
	w.mu.RLock()
	same := bytes.Equal(certPEM, w.certPEM) && bytes.Equal(keyPEM, w.keyPEM)
	w.mu.RUnlock()
	if same {
		return nil
	}
	// The two files are replaced one after the other: a new certificate next to the old key
	// fails here and the next event (the key's) loads the pair.
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return err
	}
	if pair.Leaf == nil {
		if pair.Leaf, err = x509.ParseCertificate(pair.Certificate[0]); err != nil {
			return err
		}
	}
	w.mu.Lock()
	w.cert, w.certPEM, w.keyPEM = &pair, certPEM, keyPEM
	w.loads++
	w.mu.Unlock()
	return nil
}

// GetCertificate is the tls.Config callback: the current certificate.
func (w *Watcher) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	w.mu.RLock()
	defer w.mu.RUnlock()
	if w.cert == nil {
		return nil, fmt.Errorf("no serving certificate loaded from %s yet: %w", w.dir, w.lastErr)
	}
	return w.cert, nil
}

// Current returns the certificate served now, nil before the first load.
func (w *Watcher) Current() *x509.Certificate {
	w.mu.RLock()
	defer w.mu.RUnlock()
	if w.cert == nil {
		return nil
	}
	return w.cert.Leaf
}

// Loads counts the certificates loaded so far (the first one and every change).
func (w *Watcher) Loads() int {
	w.mu.RLock()
	defer w.mu.RUnlock()
	return w.loads
}

// TLSOpt sets the watcher as the certificate source of a tls.Config: give it to
// webhook.Options.TLSOpts and the server uses it instead of its own file loading.
func (w *Watcher) TLSOpt(cfg *tls.Config) {
	cfg.GetCertificate = w.GetCertificate
}

// Checker fails until a certificate is loaded: a manager is not ready to admit requests
// before it can answer a TLS handshake.
func (w *Watcher) Checker() healthz.Checker {
	return func(*http.Request) error {
		w.mu.RLock()
		defer w.mu.RUnlock()
		if w.cert == nil {
			return fmt.Errorf("no serving certificate loaded from %s: %w", w.dir, w.lastErr)
		}
		return nil
	}
}

// Start watches the directory until ctx ends: it reloads on every file event in it and every
// poll interval. It is a manager Runnable that runs on every replica (not only the leader):
// every replica serves webhooks.
func (w *Watcher) Start(ctx context.Context) error {
	log := ctrl.LoggerFrom(ctx).WithName("certs").WithValues("dir", w.dir)
	fsw, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("creating a file watcher: %w", err)
	}
	defer fsw.Close()
	// Watch the directory, not the files: the kubelet updates a mounted Secret by swapping a
	// symlink, and editors and cert tools replace files by rename; both leave a watch on the
	// old file dangling. A directory that does not exist yet is polled until it does.
	watching := fsw.Add(w.dir) == nil
	ticker := time.NewTicker(w.pollInterval)
	defer ticker.Stop()
	reload := func(why string) {
		before := w.Loads()
		if err := w.Reload(); err != nil {
			log.V(1).Info("serving certificate not reloaded", "trigger", why, "error", err.Error())
			return
		}
		if w.Loads() != before {
			cur := w.Current()
			log.Info("serving certificate loaded", "trigger", why, "serial", cur.SerialNumber.String(), "notAfter", cur.NotAfter)
		}
	}
	reload("start")
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-fsw.Events:
			if !ok {
				return errors.New("file watcher closed")
			}
			reload(ev.Op.String() + " " + filepath.Base(ev.Name))
		case err, ok := <-fsw.Errors:
			if !ok {
				return errors.New("file watcher closed")
			}
			log.Error(err, "watching the certificate directory; polling continues")
		case <-ticker.C:
			if !watching {
				watching = fsw.Add(w.dir) == nil
			}
			reload("poll")
		}
	}
}

// NeedLeaderElection is false: every replica serves webhooks, so every replica reloads.
func (w *Watcher) NeedLeaderElection() bool { return false }
