package main

import (
	"crypto/tls"
	"fmt"
	"net"
	"path/filepath"
	"time"

	"github.com/go-logr/logr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/sandgate-dev/sandgate/certs"
	"github.com/sandgate-dev/sandgate/reconcilers/indexes"
	"github.com/sandgate-dev/sandgate/webhooks"
)

// selfSignedValidity is how long a --self-signed-certs certificate lasts: a local run's.
const selfSignedValidity = 7 * 24 * time.Hour

// webhookServer returns the admission webhook server and the watcher of its certificate
// files. With --self-signed-certs it first writes a throwaway certificate into the directory.
func webhookServer(opts options, log logr.Logger) (webhook.Server, *certs.Watcher, error) {
	if opts.selfSignedCerts {
		if err := writeSelfSigned(opts, log); err != nil {
			return nil, nil, err
		}
	}
	watcher := certs.NewWatcher(opts.webhookCertDir)
	return webhook.NewServer(webhook.Options{
		Host:    opts.webhookHost,
		Port:    opts.webhookPort,
		CertDir: opts.webhookCertDir,
		TLSOpts: []func(*tls.Config){watcher.TLSOpt},
	}), watcher, nil
}

// writeSelfSigned puts a certificate for localhost, 127.0.0.1 and --webhook-host, signed by a
// CA that exists only in this process, into the certificate directory; ca.crt next to it is
// what a local webhook configuration's caBundle needs.
func writeSelfSigned(opts options, log logr.Logger) error {
	dnsNames := []string{"localhost"}
	ips := []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
	if h := opts.webhookHost; h != "" {
		if ip := net.ParseIP(h); ip != nil {
			ips = append(ips, ip)
		} else {
			dnsNames = append(dnsNames, h)
		}
	}
	bundle, err := certs.SelfSigned(dnsNames, ips, selfSignedValidity)
	if err != nil {
		return fmt.Errorf("making self-signed webhook certificates: %w", err)
	}
	if err := bundle.Write(opts.webhookCertDir); err != nil {
		return fmt.Errorf("writing self-signed webhook certificates: %w", err)
	}
	log.Info("serving a self-signed webhook certificate: for local runs only, never in production",
		"dir", opts.webhookCertDir, "caBundle", filepath.Join(opts.webhookCertDir, certs.CAFile), "validFor", selfSignedValidity)
	return nil
}

// setupWebhooks registers the webhooks, keeps the certificate current, and makes readiness
// wait for both the webhook server and a loaded certificate: a replica that cannot admit
// requests must not receive them.
func setupWebhooks(mgr ctrl.Manager, opts options, watcher *certs.Watcher) error {
	if err := mgr.Add(watcher); err != nil {
		return fmt.Errorf("adding the certificate watcher: %w", err)
	}
	wopts := webhooks.Options{OperatorUser: opts.operatorUser, PlatformGroups: opts.platformGroups}
	if opts.extensions {
		wopts.ClaimUIDIndex = indexes.SandboxClaimUID // registered with the claim controller
	}
	if err := webhooks.Setup(mgr, wopts); err != nil {
		return fmt.Errorf("setting up webhooks: %w", err)
	}
	if err := mgr.AddReadyzCheck("webhook-server", mgr.GetWebhookServer().StartedChecker()); err != nil {
		return fmt.Errorf("adding the webhook server readiness check: %w", err)
	}
	if err := mgr.AddReadyzCheck("serving-certificate", watcher.Checker()); err != nil {
		return fmt.Errorf("adding the certificate readiness check: %w", err)
	}
	return nil
}
