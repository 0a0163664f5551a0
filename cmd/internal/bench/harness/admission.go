package harness

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/conversion"

	"github.com/sandgate-dev/sandgate/api"
	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
	"github.com/sandgate-dev/sandgate/webhooks"
)

// admissionWait bounds the wait for the API server to reach the webhooks.
const admissionWait = time.Minute

// installCABundle sets caBundle of every webhook of every webhook configuration, and of every
// CRD's conversion webhook, to the CA in caFile: the harness's own cluster has only
// sandgate's, and the operator made the CA.
func installCABundle(ctx context.Context, cfg *rest.Config, caFile string) error {
	ca, err := os.ReadFile(caFile)
	if err != nil {
		return fmt.Errorf("reading the operator's webhook CA: %w", err)
	}
	scheme := api.NewScheme()
	if err := apiextensionsv1.AddToScheme(scheme); err != nil {
		return fmt.Errorf("registering apiextensions: %w", err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return fmt.Errorf("creating client: %w", err)
	}
	var mutating admissionv1.MutatingWebhookConfigurationList
	if err := c.List(ctx, &mutating); err != nil {
		return fmt.Errorf("listing mutating webhook configurations: %w", err)
	}
	var validating admissionv1.ValidatingWebhookConfigurationList
	if err := c.List(ctx, &validating); err != nil {
		return fmt.Errorf("listing validating webhook configurations: %w", err)
	}
	var crds apiextensionsv1.CustomResourceDefinitionList
	if err := c.List(ctx, &crds); err != nil {
		return fmt.Errorf("listing CRDs: %w", err)
	}
	var configs []client.Object
	for i := range crds.Items {
		if conv := crds.Items[i].Spec.Conversion; conv != nil && conv.Webhook != nil && conv.Webhook.ClientConfig != nil {
			configs = append(configs, &crds.Items[i])
		}
	}
	for i := range mutating.Items {
		configs = append(configs, &mutating.Items[i])
	}
	for i := range validating.Items {
		configs = append(configs, &validating.Items[i])
	}
	for _, cfg := range configs {
		if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			if err := c.Get(ctx, client.ObjectKeyFromObject(cfg), cfg); err != nil {
				return err
			}
			setCABundle(cfg, ca)
			return c.Update(ctx, cfg)
		}); err != nil {
			return fmt.Errorf("setting the CA of %s: %w", cfg.GetName(), err)
		}
	}
	return nil
}

// setCABundle sets the CA of every webhook of a webhook configuration, or of a CRD's
// conversion webhook.
func setCABundle(cfg client.Object, ca []byte) {
	switch cfg := cfg.(type) {
	case *admissionv1.MutatingWebhookConfiguration:
		for i := range cfg.Webhooks {
			cfg.Webhooks[i].ClientConfig.CABundle = ca
		}
	case *admissionv1.ValidatingWebhookConfiguration:
		for i := range cfg.Webhooks {
			cfg.Webhooks[i].ClientConfig.CABundle = ca
		}
	case *apiextensionsv1.CustomResourceDefinition:
		cfg.Spec.Conversion.Webhook.ClientConfig.CABundle = ca
	}
}

// waitForAdmission waits until a dry-run create of a SandboxTemplate passes the webhooks: the
// API server has picked up their configuration and trusts the operator's certificate.
func waitForAdmission(ctx context.Context, cfg *rest.Config) error {
	c, err := client.New(cfg, client.Options{Scheme: api.NewScheme()})
	if err != nil {
		return fmt.Errorf("creating client: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, admissionWait)
	defer cancel()
	for {
		probe := &extv1beta1.SandboxTemplate{
			ObjectMeta: metav1.ObjectMeta{Name: "harness-admission-check", Namespace: metav1.NamespaceDefault},
			Spec: extv1beta1.SandboxTemplateSpec{SandboxBlueprint: agentsv1beta1.SandboxBlueprint{
				PodTemplate: agentsv1beta1.PodTemplate{Spec: corev1.PodSpec{
					Containers: []corev1.Container{{Name: "probe", Image: "registry.example/probe:1"}},
				}},
			}},
		}
		err := c.Create(ctx, probe, client.DryRunAll)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the API server could not reach the operator's webhooks within %s: %w", admissionWait, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// DetachOperator leaves the API server alone with what the operator made: it stops the
// operator, deletes every webhook configuration of the harness's cluster (the operator's
// only), and waits until the API server admits a claim without calling a webhook (it reads
// webhook configurations through an informer, a moment after the delete). The API server,
// etcd, the scheduler, kwok and the garbage collector keep running as they were. The floor
// run (load.Config.Floor) calls it once the operator has filled the pool.
//
// While the CRDs serve v1alpha1, the harness itself then answers their conversion webhook
// where the operator did, with sandgate's conversion (webhooks.ConversionHandler): converting
// is part of serving the API, not of the controller. The API server converts every write of
// every client into each served version's watch cache, so a floor whose conversion webhook
// is gone would be an API server failing to serve v1alpha1, not the same API without a
// controller. Admission webhooks are gone either way.
func (e *Env) DetachOperator(ctx context.Context) error {
	if e.Cluster == nil {
		return errors.New("the floor needs the harness's own cluster: it deletes the webhook configurations")
	}
	if e.Operator != nil {
		if err := e.Operator.Stop(); err != nil {
			return fmt.Errorf("stopping the operator: %w", err)
		}
		e.logf("operator stopped (log %s)", e.Operator.LogPath)
		e.Operator = nil
	}
	if !e.v1beta1Only {
		if err := e.serveConversion(ctx); err != nil {
			return err
		}
	}
	c, err := client.New(e.Config, client.Options{Scheme: api.NewScheme()})
	if err != nil {
		return fmt.Errorf("creating client: %w", err)
	}
	if err := c.DeleteAllOf(ctx, &admissionv1.MutatingWebhookConfiguration{}); err != nil {
		return fmt.Errorf("deleting mutating webhook configurations: %w", err)
	}
	if err := c.DeleteAllOf(ctx, &admissionv1.ValidatingWebhookConfiguration{}); err != nil {
		return fmt.Errorf("deleting validating webhook configurations: %w", err)
	}
	e.Webhooks = false
	return waitForNoAdmission(ctx, c)
}

// waitForNoAdmission waits until a dry-run create of a claim succeeds unstamped: with the
// operator stopped, a call to the claim-stamping (mutating) or claim-validating webhook
// would fail (failurePolicy Fail), so success means the API server has dropped both
// configurations.
func waitForNoAdmission(ctx context.Context, c client.Client) error {
	ctx, cancel := context.WithTimeout(ctx, admissionWait)
	defer cancel()
	for {
		probe := &extv1beta1.SandboxClaim{
			ObjectMeta: metav1.ObjectMeta{Name: "harness-no-admission-check", Namespace: metav1.NamespaceDefault},
			Spec:       extv1beta1.SandboxClaimSpec{WarmPoolRef: extv1beta1.WarmPoolRef{Name: "harness-no-admission-check"}},
		}
		err := c.Create(ctx, probe, client.DryRunAll)
		if err == nil {
			if _, stamped := probe.Annotations[agentsv1beta1.AnnotationWebhookFirstObservedAt]; !stamped {
				return nil
			}
			err = errors.New("the claim was stamped")
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the API server still called webhooks %s after their configurations were deleted: %w", admissionWait, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// serveConversion answers the CRDs' conversion webhook at the operator's webhook address and
// certificate, in this process, until Stop.
func (e *Env) serveConversion(ctx context.Context) error {
	scheme := api.NewScheme()
	h, err := webhooks.ConversionHandler(scheme, conversion.NewRegistry())
	if err != nil {
		return err
	}
	srv := webhook.NewServer(webhook.Options{Host: e.webhook.webhookHost, Port: e.webhook.webhookPort, CertDir: e.webhook.webhookCertDir})
	srv.Register(webhooks.ConvertPath, h)
	serveCtx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Start(serveCtx) }()
	e.stopConversion = func() {
		cancel()
		<-done
	}
	addr := net.JoinHostPort(e.webhook.webhookHost, strconv.Itoa(e.webhook.webhookPort))
	ctx, cancelWait := context.WithTimeout(ctx, admissionWait)
	defer cancelWait()
	started := srv.StartedChecker()
	for {
		err := started(nil)
		if err == nil {
			e.logf("conversion webhook served by the harness at %s (the CRDs serve v1alpha1)", addr)
			return nil
		}
		select {
		case err := <-done:
			e.stopConversion = cancel // the server is gone already
			return fmt.Errorf("serving the conversion webhook at %s: %w", addr, err)
		case <-ctx.Done():
			return fmt.Errorf("the conversion webhook at %s did not answer within %s: %w", addr, admissionWait, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}
