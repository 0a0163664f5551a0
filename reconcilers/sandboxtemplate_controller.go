package reconcilers

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
)

// templateControllerName names the SandboxTemplate controller in logs and metrics.
const templateControllerName = "sandboxtemplate"

// Secure default of a managed network policy (the contract's): ingress only from the
// sandbox router, egress anywhere on the internet but not to private, link-local or
// cluster-internal ranges.
const (
	routerNamespace = "agent-sandbox-system"
	routerAppLabel  = "sandbox-router"
)

var (
	blockedIPv4 = []string{"10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "169.254.0.0/16"}
	blockedIPv6 = []string{"fc00::/7", "fe80::/10"}
)

// NetworkPolicyName is the name of the NetworkPolicy a template manages.
func NetworkPolicyName(template string) string { return template + "-network-policy" }

// templateReconciler labels each template with the hash of its name (the selector of its
// Sandboxes' pods) and keeps the template's managed NetworkPolicy.
type templateReconciler struct {
	Client  client.Client
	Metrics *Metrics
	Clock   clock.PassiveClock

	// expected holds the policies this process created that the cache does not show yet, so
	// that a reconcile in between does not create them again.
	expected *expectations
}

// SetupWithManager registers the controller and its watches.
func (r *templateReconciler) SetupWithManager(mgr ctrl.Manager, opts controller.Options) error {
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	r.expected = newExpectations(r.Clock)
	return ctrl.NewControllerManagedBy(mgr).
		Named(templateControllerName).
		WithOptions(opts).
		For(&extv1beta1.SandboxTemplate{}, builder.WithPredicates(predicate.Or(
			predicate.GenerationChangedPredicate{}, predicate.LabelChangedPredicate{}))).
		// Drift of the policy it controls (an edit, a deletion) brings the template back.
		Owns(&networkingv1.NetworkPolicy{}).
		Complete(r)
}

// Reconcile labels the template and brings its network policy in line with its spec.
func (r *templateReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	r.Metrics.reconciled(templateControllerName)
	tmpl := &extv1beta1.SandboxTemplate{}
	if err := r.Client.Get(ctx, req.NamespacedName, tmpl); err != nil {
		if apierrors.IsNotFound(err) {
			r.expected.forget(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !tmpl.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	hash := agentsv1beta1.NameHash(tmpl.Name)
	if tmpl.Labels[agentsv1beta1.LabelSandboxTemplateRefHash] != hash {
		p := &metadataPatch{}
		p.setLabel(agentsv1beta1.LabelSandboxTemplateRefHash, &hash)
		if err := patchMetadata(ctx, r.Client, tmpl, p); err != nil {
			return quiet(ctrl.Result{}, fmt.Errorf("labelling template: %w", err))
		}
	}
	return quiet(ctrl.Result{}, r.ensureNetworkPolicy(ctx, tmpl))
}

// ensureNetworkPolicy creates, repairs or (Unmanaged) deletes the policy the template
// controls. A policy of that name the template does not control belongs to someone else and
// is never touched.
func (r *templateReconciler) ensureNetworkPolicy(ctx context.Context, tmpl *extv1beta1.SandboxTemplate) error {
	np := &networkingv1.NetworkPolicy{}
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: tmpl.Namespace, Name: NetworkPolicyName(tmpl.Name)}, np)
	found := err == nil
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("reading network policy: %w", err)
	}
	controlled := found && metav1.IsControlledBy(np, tmpl)
	if found && !controlled {
		ctrl.LoggerFrom(ctx).V(1).Info("network policy exists and is not controlled by the template; leaving it alone", "networkPolicy", klog.KObj(np))
		return nil
	}

	if tmpl.Spec.NetworkPolicyManagement == extv1beta1.NetworkPolicyUnmanaged {
		if !controlled || !np.DeletionTimestamp.IsZero() {
			return nil
		}
		uid := np.UID
		if err := r.Client.Delete(ctx, np, client.Preconditions{UID: &uid}); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting network policy: %w", err)
		}
		return nil
	}

	want := desiredNetworkPolicy(tmpl)
	key, item := client.ObjectKeyFromObject(tmpl), createItem("NetworkPolicy", want.Name)
	if !found {
		if !r.expected.satisfied(key) {
			return nil // created a moment ago; its create event brings the template back
		}
		if err := ctrl.SetControllerReference(tmpl, want, r.Client.Scheme()); err != nil {
			return fmt.Errorf("setting owner of network policy: %w", err)
		}
		r.expected.expect(key, item)
		if err := r.Client.Create(ctx, want); err != nil {
			r.expected.observe(key, item)
			return fmt.Errorf("creating network policy: %w", err)
		}
		return nil
	}
	r.expected.observe(key, item)
	if sameNetworkPolicySpec(&np.Spec, &want.Spec) {
		return nil
	}
	if err := mergePatch(ctx, r.Client, np, map[string]any{"spec": networkPolicySpecPatch(&np.Spec, &want.Spec)}); err != nil {
		return fmt.Errorf("patching network policy: %w", err)
	}
	return nil
}

// desiredNetworkPolicy is the policy of a Managed template: its rules, or the secure default.
// It selects the template's pods by the template's UID (policy.TemplateBlueprint labels them
// with it), which no other template's pods carry: the public sandbox-template-ref-hash is a
// 32-bit hash of the name, and a template named to collide would otherwise select another
// template's pods with its own rules.
func desiredNetworkPolicy(tmpl *extv1beta1.SandboxTemplate) *networkingv1.NetworkPolicy {
	spec := networkingv1.NetworkPolicySpec{
		PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{
			agentsv1beta1.LabelTemplateUID: string(tmpl.UID),
		}},
		PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
	}
	if np := tmpl.Spec.NetworkPolicy; np != nil {
		spec.Ingress = np.Ingress
		spec.Egress = np.Egress
	} else {
		spec.Ingress, spec.Egress = secureDefaultRules()
	}
	return &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: NetworkPolicyName(tmpl.Name), Namespace: tmpl.Namespace},
		Spec:       *spec.DeepCopy(),
	}
}

func secureDefaultRules() ([]networkingv1.NetworkPolicyIngressRule, []networkingv1.NetworkPolicyEgressRule) {
	ingress := []networkingv1.NetworkPolicyIngressRule{{
		From: []networkingv1.NetworkPolicyPeer{{
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: routerNamespace}},
			PodSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"app": routerAppLabel}},
		}},
	}}
	egress := []networkingv1.NetworkPolicyEgressRule{{
		To: []networkingv1.NetworkPolicyPeer{
			{IPBlock: &networkingv1.IPBlock{CIDR: "0.0.0.0/0", Except: blockedIPv4}},
			{IPBlock: &networkingv1.IPBlock{CIDR: "::/0", Except: blockedIPv6}},
		},
	}}
	return ingress, egress
}

// normalizedRules encodes a policy's rules with the defaults the API server fills in (port
// protocol TCP), so that a policy read back compares equal to the one written.
func normalizedRules(spec *networkingv1.NetworkPolicySpec) string {
	s := spec.DeepCopy()
	for i := range s.Ingress {
		defaultProtocols(s.Ingress[i].Ports)
	}
	for i := range s.Egress {
		defaultProtocols(s.Egress[i].Ports)
	}
	data, _ := json.Marshal([]any{s.Ingress, s.Egress, s.PolicyTypes}) // plain data always encodes
	return string(data)
}

func defaultProtocols(ports []networkingv1.NetworkPolicyPort) {
	for i := range ports {
		if ports[i].Protocol == nil {
			ports[i].Protocol = ptr.To(corev1.ProtocolTCP)
		}
	}
}

func sameNetworkPolicySpec(have, want *networkingv1.NetworkPolicySpec) bool {
	return maps.Equal(have.PodSelector.MatchLabels, want.PodSelector.MatchLabels) &&
		len(have.PodSelector.MatchExpressions) == 0 &&
		normalizedRules(have) == normalizedRules(want)
}

// networkPolicySpecPatch is a merge patch that makes have's spec want's: lists are replaced
// whole by a merge patch, selector labels someone added are removed explicitly.
func networkPolicySpecPatch(have, want *networkingv1.NetworkPolicySpec) map[string]any {
	matchLabels := map[string]any{}
	for k := range have.PodSelector.MatchLabels {
		matchLabels[k] = nil
	}
	for k, v := range want.PodSelector.MatchLabels {
		matchLabels[k] = v
	}
	return map[string]any{
		"podSelector": map[string]any{"matchLabels": matchLabels, "matchExpressions": nil},
		"policyTypes": want.PolicyTypes,
		"ingress":     nonNil(want.Ingress),
		"egress":      nonNil(want.Egress),
	}
}

// nonNil turns a nil list into an empty one, which a merge patch writes as [] rather than
// as a deletion.
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
