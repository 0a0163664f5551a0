package operator

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"path/filepath"
	"time"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	tenancyv1alpha1 "github.com/sandgate-dev/sandgate/api/tenancy/v1alpha1"
	"github.com/sandgate-dev/sandgate/certs"
	"github.com/sandgate-dev/sandgate/internal/fairshare"
	"github.com/sandgate-dev/sandgate/webhooks"
)

// selfSignedValidity is how long a SelfSignedCerts certificate lasts: a local run's.
const selfSignedValidity = 7 * 24 * time.Hour

// webhookServer returns the admission webhook server and the watcher of its certificate
// files. With SelfSignedCerts it first writes a throwaway certificate into the directory.
func webhookServer(opts Options, log logr.Logger) (webhook.Server, *certs.Watcher, error) {
	if opts.SelfSignedCerts {
		if err := writeSelfSigned(opts, log); err != nil {
			return nil, nil, err
		}
	}
	watcher := certs.NewWatcher(opts.WebhookCertDir)
	return webhook.NewServer(webhook.Options{
		Host:    opts.WebhookHost,
		Port:    opts.WebhookPort,
		CertDir: opts.WebhookCertDir,
		TLSOpts: []func(*tls.Config){watcher.TLSOpt},
	}), watcher, nil
}

// writeSelfSigned puts a certificate for localhost, 127.0.0.1, ::1 and WebhookHost, signed by
// a CA that exists only in this process, into the certificate directory; ca.crt next to it is
// what a local webhook configuration's caBundle needs.
func writeSelfSigned(opts Options, log logr.Logger) error {
	dnsNames := []string{"localhost"}
	ips := []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
	if h := opts.WebhookHost; h != "" {
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
	if err := bundle.Write(opts.WebhookCertDir); err != nil {
		return fmt.Errorf("writing self-signed webhook certificates: %w", err)
	}
	log.Info("serving a self-signed webhook certificate: for local runs only, never in production",
		"dir", opts.WebhookCertDir, "caBundle", filepath.Join(opts.WebhookCertDir, certs.CAFile), "validFor", selfSignedValidity)
	return nil
}

// setupWebhooks registers the webhooks, keeps the certificate current, and makes readiness
// wait for both the webhook server and a loaded certificate: a replica that cannot admit
// requests must not receive them.
func setupWebhooks(op *Operator, opts Options, watcher *certs.Watcher, ledgerClient client.Client, fairShareMetrics *fairshare.Metrics) error {
	if err := op.Add(watcher); err != nil {
		return fmt.Errorf("adding the certificate watcher: %w", err)
	}
	// ClaimPolicies are admitted with the extensions on: the leader's claim policy controller,
	// one of them, counts the ledgers admission reserves in.
	wopts := webhooks.Options{OperatorUser: opts.OperatorUser, PlatformGroups: opts.PlatformGroups, Tracer: op.tracer,
		LabelDomains: op.labelDomains, AnnotationDomains: opts.ClaimAnnotationDomains, Demand: op.demand,
		ClaimPolicies: opts.Extensions, LedgerClient: ledgerClient, FairShareMetrics: fairShareMetrics}
	if opts.Clock != nil {
		wopts.Now = opts.Clock.Now
	}
	if opts.Extensions {
		wopts.ClaimMaxWait = opts.ClaimAdmissionMaxWait
	}
	if err := webhooks.Setup(op, wopts); err != nil {
		return fmt.Errorf("setting up webhooks: %w", err)
	}
	if wopts.ClaimPolicies {
		// Admission lists a namespace's policies and reads ledgers from the cache for every new
		// claim: their informers start with the manager, and readiness waits for them, rather
		// than the first claim waiting for them on a replica whose controllers (the leader's)
		// do not run.
		for _, obj := range []client.Object{&tenancyv1alpha1.ClaimPolicy{}, &tenancyv1alpha1.ClaimLedger{}} {
			if _, err := op.GetCache().GetInformer(context.Background(), obj, cache.BlockUntilSynced(false)); err != nil {
				return fmt.Errorf("watching %T for admission: %w", obj, err)
			}
		}
	}
	if err := op.addReadyzCheck("webhook-server", op.GetWebhookServer().StartedChecker()); err != nil {
		return fmt.Errorf("adding the webhook server readiness check: %w", err)
	}
	if err := op.addReadyzCheck("serving-certificate", watcher.Checker()); err != nil {
		return fmt.Errorf("adding the certificate readiness check: %w", err)
	}
	return nil
}
