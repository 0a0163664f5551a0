package harness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	pathpkg "path"
	"slices"
	"strconv"
	"strings"
	"time"

	admissionapi "k8s.io/api/admission/v1"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/sandgate-dev/sandgate/api"
	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	"github.com/sandgate-dev/sandgate/api/policy"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
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
	mutating, validating, err := webhookConfigurations(ctx, c)
	if err != nil {
		return err
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
// controller.
//
// With Options.FloorAdmission the webhook configurations stay, and the harness answers every
// admission call at once where the operator did (answerAtOnce): the floor of an API guarded
// by admission webhooks, their round trips included and no decision in them.
func (e *Env) DetachOperator(ctx context.Context) error {
	if e.Cluster == nil {
		return errors.New("the floor needs the harness's own cluster: it removes or answers the webhooks itself")
	}
	if e.Operator != nil {
		if err := e.Operator.Stop(); err != nil {
			return fmt.Errorf("stopping the operator: %w", err)
		}
		e.logf("operator stopped (log %s)", e.Operator.LogPath)
		e.Operator = nil
	}
	c, err := client.New(e.Config, client.Options{Scheme: api.NewScheme()})
	if err != nil {
		return fmt.Errorf("creating client: %w", err)
	}
	if e.floorAdmission {
		paths, err := admissionPaths(ctx, c)
		if err != nil {
			return err
		}
		if err := e.serveWebhooks(ctx, paths); err != nil {
			return err
		}
		return waitForAdmission(ctx, e.Config)
	}
	if !e.v1beta1Only {
		if err := e.serveWebhooks(ctx, nil); err != nil {
			return err
		}
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

// admissionPaths returns the URL path of every webhook of the cluster's webhook
// configurations.
func admissionPaths(ctx context.Context, c client.Client) ([]string, error) {
	mutating, validating, err := webhookConfigurations(ctx, c)
	if err != nil {
		return nil, err
	}
	var configs []admissionv1.WebhookClientConfig
	for _, cfg := range mutating.Items {
		for _, w := range cfg.Webhooks {
			configs = append(configs, w.ClientConfig)
		}
	}
	for _, cfg := range validating.Items {
		for _, w := range cfg.Webhooks {
			configs = append(configs, w.ClientConfig)
		}
	}
	var paths []string
	for _, cc := range configs {
		path := ""
		switch {
		case cc.URL != nil:
			u, err := url.Parse(*cc.URL)
			if err != nil {
				return nil, fmt.Errorf("webhook URL %q: %w", *cc.URL, err)
			}
			path = u.Path
		case cc.Service != nil && cc.Service.Path != nil:
			path = *cc.Service.Path
		}
		if path == "" {
			continue
		}
		// As the operator's server registers it (envtest's URLs start with "//").
		path = pathpkg.Clean("/" + path)
		if !slices.Contains(paths, path) {
			paths = append(paths, path)
		}
	}
	if len(paths) == 0 {
		return nil, errors.New("no admission webhook to answer: the cluster has no webhook configurations")
	}
	return paths, nil
}

// webhookConfigurations lists the cluster's mutating and validating webhook configurations.
func webhookConfigurations(ctx context.Context, c client.Client) (*admissionv1.MutatingWebhookConfigurationList, *admissionv1.ValidatingWebhookConfigurationList, error) {
	var mutating admissionv1.MutatingWebhookConfigurationList
	if err := c.List(ctx, &mutating); err != nil {
		return nil, nil, fmt.Errorf("listing mutating webhook configurations: %w", err)
	}
	var validating admissionv1.ValidatingWebhookConfigurationList
	if err := c.List(ctx, &validating); err != nil {
		return nil, nil, fmt.Errorf("listing validating webhook configurations: %w", err)
	}
	return &mutating, &validating, nil
}

// answerAtOnce answers an admission call without deciding anything: it allows the request,
// and stamps a claim's CREATE with webhook-first-observed-at, the admission time the
// server-side latency view starts from (as sandgate's stamping webhook does). With admit, a
// claim's CREATE that admit refuses is answered 429 Too Many Requests with a one-second retry
// hint, the shape of sandgate's refusal past the sustainable rate: the contract floor under
// overload, where an oracle that knows the rate the cluster sustains does the shedding.
func answerAtOnce(now func() time.Time, admit func() bool) admission.Handler {
	return admission.HandlerFunc(func(_ context.Context, req admission.Request) admission.Response {
		resp := admission.Allowed("")
		if req.Operation != admissionapi.Create || (schema.GroupKind{Group: req.Kind.Group, Kind: req.Kind.Kind}) != policy.ClaimKind {
			return resp
		}
		if admit != nil && !admit() {
			return admission.Response{AdmissionResponse: admissionapi.AdmissionResponse{Allowed: false, Result: &metav1.Status{
				Status: metav1.StatusFailure, Code: http.StatusTooManyRequests, Reason: metav1.StatusReasonTooManyRequests,
				Message: "the stand-in admits claims at a fixed rate; retry later",
				Details: &metav1.StatusDetails{Group: req.Kind.Group, Kind: req.Kind.Kind, Name: req.Name, RetryAfterSeconds: 1},
			}}}
		}
		var obj struct {
			Metadata struct {
				Annotations map[string]string `json:"annotations"`
			} `json:"metadata"`
		}
		if err := json.Unmarshal(req.Object.Raw, &obj); err != nil {
			return admission.Errored(http.StatusBadRequest, err)
		}
		at := now().UTC().Format(time.RFC3339Nano)
		op := map[string]any{"op": "add", "path": "/metadata/annotations", "value": map[string]string{agentsv1beta1.AnnotationWebhookFirstObservedAt: at}}
		if obj.Metadata.Annotations != nil {
			key := strings.NewReplacer("~", "~0", "/", "~1").Replace(agentsv1beta1.AnnotationWebhookFirstObservedAt)
			op = map[string]any{"op": "add", "path": "/metadata/annotations/" + key, "value": at}
		}
		patch, err := json.Marshal([]any{op})
		if err != nil {
			return admission.Errored(http.StatusInternalServerError, err)
		}
		pt := admissionapi.PatchTypeJSONPatch
		resp.Patch, resp.PatchType = patch, &pt
		return resp
	})
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

// serveWebhooks serves, at the operator's webhook address and certificate, until Stop: the
// CRDs' conversion webhook while they serve v1alpha1, and answerAtOnce at each of
// admissionPaths; in a process of their own with Options.StandInExecutable, else in this one.
func (e *Env) serveWebhooks(ctx context.Context, admissionPaths []string) error {
	if e.standInExe != "" {
		return e.startStandIn(ctx, admissionPaths)
	}
	srv, what, err := standInServer(webhook.Options{Host: e.webhook.webhookHost, Port: e.webhook.webhookPort, CertDir: e.webhook.webhookCertDir},
		!e.v1beta1Only, admissionPaths, e.floorClaimRate)
	if err != nil {
		return err
	}
	serveCtx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Start(serveCtx) }()
	e.stopWebhooks = func() {
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
			e.logf("webhooks served by the harness's own process at %s: %s", addr, strings.Join(what, "; "))
			return nil
		}
		select {
		case err := <-done:
			e.stopWebhooks = cancel // the server is gone already
			return fmt.Errorf("serving webhooks at %s: %w", addr, err)
		case <-ctx.Done():
			return fmt.Errorf("the webhook server at %s did not answer within %s: %w", addr, admissionWait, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}
