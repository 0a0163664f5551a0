//go:build integration

package takeover_test

// What the public agent-sandbox controller (kubernetes-sigs/agent-sandbox, v0.5.x, API
// v1beta1) writes, rebuilt from its source. Each builder names the file (and function) its
// facts come from; the repository index showed no release tags, so the files were read at the
// commits named here, the newest stored, and checked against older stored versions of the same
// files, which agree on every fact used below unless a comment says otherwise:
//
//	[pool]     extensions/controllers/sandboxwarmpool_controller.go @0266011c (buildSandboxCR,
//	           reconcilePool, computeSandboxBlueprintHash, computePodTemplateHash)
//	[defaults] extensions/controllers/utils.go (ApplySandboxSecureDefaults, SandboxTemplateRefHash;
//	           later moved to controllers/blueprint.go @105de254, unchanged)
//	[claim]    extensions/controllers/sandboxclaim_controller.go @00dadd35 (initializeAnnotations,
//	           adoptSandboxFromCandidates, completeAdoption, createSandbox, computeAndSetStatus)
//	[sandbox]  controllers/sandbox_controller.go @00a24329 (reconcilePod, updatePodMetadata,
//	           NameHash: FNV-1a 32-bit, 8 hex digits)
//	[template] extensions/controllers/sandboxtemplate_controller.go @0c6bdce4
//	           (buildDefaultNetworkPolicySpec)
//	[keys]     api/v1beta1/sandbox_types.go @040bc60f, extensions/api/v1beta1/sandboxclaim_types.go
//	           @07b6d8df (SandboxIDLabel = agents.x-k8s.io/claim-uid,
//	           AssignedSandboxNameAnnotation = agents.x-k8s.io/sandbox-name)
//	[convert]  extensions/api/v1alpha1/sandboxclaim_conversion.go @9c31d5db (ConvertTo)

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	extv1alpha1 "github.com/sandgate-dev/sandgate/api/extensions/v1alpha1"
	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
)

// Keys the public controller writes that sandgate's contract does not name.
const (
	// publicPodTemplateHashLabel [keys] (DeprecatedSandboxPodTemplateHashLabel): on members
	// and their podTemplate, the hash of the template's podTemplate.
	publicPodTemplateHashLabel = "agents.x-k8s.io/sandbox-pod-template-hash"
	// publicPropagatedLabels and publicPropagatedAnnotations [sandbox]: on pods, the keys
	// copied from the podTemplate, comma-separated.
	publicPropagatedLabels      = "agents.x-k8s.io/propagated-labels"
	publicPropagatedAnnotations = "agents.x-k8s.io/propagated-annotations"
)

// publicHash is the public controller's content hash [pool]: NameHash (FNV-1a) of the JSON of
// a value. Its sandbox-template-hash label is publicHash of the template's SandboxBlueprint
// as the template stores it (before the secure defaults): 8 hex digits where sandgate's is 32,
// so the two never coincide.
func publicHash(v any) string {
	raw, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return agentsv1beta1.NameHash(string(raw))
}

// publicSecureDefaults is ApplySandboxSecureDefaults [defaults]: no service account token
// unless the template sets it, for every template; under the secure default network policy
// (Managed, no rules of its own) and without a dnsPolicy, DNS None with the public resolvers,
// replacing any dnsConfig of the template.
func publicSecureDefaults(tmpl *extv1beta1.SandboxTemplate, spec *corev1.PodSpec) {
	if spec.AutomountServiceAccountToken == nil {
		spec.AutomountServiceAccountToken = ptr.To(false)
	}
	managed := tmpl.Spec.NetworkPolicyManagement == "" || tmpl.Spec.NetworkPolicyManagement == extv1beta1.NetworkPolicyManaged
	if managed && tmpl.Spec.NetworkPolicy == nil && spec.DNSPolicy == "" {
		spec.DNSPolicy = corev1.DNSNone
		spec.DNSConfig = &corev1.PodDNSConfig{Nameservers: []string{"8.8.8.8", "1.1.1.1"}}
	}
}

// publicMember is a warm pool member as buildSandboxCR writes it [pool]: GenerateName
// <pool>-, controller-owned by the pool, labelled with the pool's and the template's name
// hashes, launch-type warm, created-by controller and the two content hashes, annotated with
// the template's name; its spec is the template's blueprint with the same labels added to the
// podTemplate and the secure defaults applied. (With --enable-warm-pool-eviction it also
// annotates the podTemplate cluster-autoscaler.kubernetes.io/safe-to-evict=true; the flag is
// off by default.)
func publicMember(pool *extv1beta1.SandboxWarmPool, tmpl *extv1beta1.SandboxTemplate) *agentsv1beta1.Sandbox {
	tracking := map[string]string{
		agentsv1beta1.LabelWarmPoolSandbox:        agentsv1beta1.NameHash(pool.Name),
		agentsv1beta1.LabelSandboxTemplateRefHash: agentsv1beta1.NameHash(tmpl.Name),
		publicPodTemplateHashLabel:                publicHash(tmpl.Spec.PodTemplate),
		agentsv1beta1.LabelSandboxTemplateHash:    publicHash(tmpl.Spec.SandboxBlueprint),
	}
	sb := &agentsv1beta1.Sandbox{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: pool.Name + "-",
			Namespace:    pool.Namespace,
			Labels:       maps.Clone(tracking),
			Annotations:  map[string]string{agentsv1beta1.AnnotationSandboxTemplateRef: tmpl.Name},
			OwnerReferences: []metav1.OwnerReference{
				*metav1.NewControllerRef(pool, extv1beta1.GroupVersion.WithKind("SandboxWarmPool")),
			},
		},
		Spec: agentsv1beta1.SandboxSpec{SandboxBlueprint: *tmpl.Spec.SandboxBlueprint.DeepCopy()},
	}
	sb.Labels[agentsv1beta1.LabelLaunchType] = agentsv1beta1.LaunchTypeWarm
	sb.Labels[agentsv1beta1.LabelCreatedBy] = agentsv1beta1.CreatedByController
	md := &sb.Spec.PodTemplate.ObjectMeta
	if md.Labels == nil {
		md.Labels = map[string]string{}
	}
	maps.Copy(md.Labels, tracking)
	publicSecureDefaults(tmpl, &sb.Spec.PodTemplate.Spec)
	return sb
}

// publicAdopt turns a member into the claim's Sandbox as completeAdoption does [claim]: the
// pool's labels (warm-pool-sandbox and both content hashes) removed, launch-type warm, the
// claim's controller reference instead of the pool's, the pod-name annotation, claim-uid,
// created-by only when the claim has one, and the podTemplate's metadata replaced by the
// template's plus claim-uid and the template's name hash (and the claim's
// additionalPodMetadata, none here). Before this patch the controller writes the claim's
// sandbox-name annotation (adoptSandboxFromCandidates, an Update of the claim).
func publicAdopt(sb *agentsv1beta1.Sandbox, claim *extv1beta1.SandboxClaim, tmpl *extv1beta1.SandboxTemplate) {
	for _, k := range []string{agentsv1beta1.LabelWarmPoolSandbox, publicPodTemplateHashLabel, agentsv1beta1.LabelSandboxTemplateHash, agentsv1beta1.LabelCreatedBy} {
		delete(sb.Labels, k)
	}
	sb.Labels[agentsv1beta1.LabelLaunchType] = agentsv1beta1.LaunchTypeWarm
	sb.Labels[agentsv1beta1.LabelClaimUID] = string(claim.UID)
	sb.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(claim, extv1beta1.GroupVersion.WithKind("SandboxClaim"))}
	sb.Annotations[agentsv1beta1.AnnotationPodName] = sb.Name
	sb.Spec.PodTemplate.ObjectMeta = claimPodMetadata(claim, tmpl)
}

// publicColdSandbox is the Sandbox createSandbox makes for a claim no member served [claim]:
// named after the claim, controller-owned by it, labelled claim-uid, launch-type cold and the
// template's name hash, annotated with the template's name (no pod-name), the template's
// blueprint with the same podTemplate metadata as an adopted member and the secure defaults.
// No sandbox-template-hash label.
func publicColdSandbox(claim *extv1beta1.SandboxClaim, tmpl *extv1beta1.SandboxTemplate) *agentsv1beta1.Sandbox {
	sb := &agentsv1beta1.Sandbox{
		ObjectMeta: metav1.ObjectMeta{
			Name:      claim.Name,
			Namespace: claim.Namespace,
			Labels: map[string]string{
				agentsv1beta1.LabelClaimUID:               string(claim.UID),
				agentsv1beta1.LabelLaunchType:             agentsv1beta1.LaunchTypeCold,
				agentsv1beta1.LabelSandboxTemplateRefHash: agentsv1beta1.NameHash(tmpl.Name),
			},
			Annotations:     map[string]string{agentsv1beta1.AnnotationSandboxTemplateRef: tmpl.Name},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(claim, extv1beta1.GroupVersion.WithKind("SandboxClaim"))},
		},
		Spec: agentsv1beta1.SandboxSpec{SandboxBlueprint: *tmpl.Spec.SandboxBlueprint.DeepCopy()},
	}
	sb.Spec.PodTemplate.ObjectMeta = claimPodMetadata(claim, tmpl)
	publicSecureDefaults(tmpl, &sb.Spec.PodTemplate.Spec)
	return sb
}

// claimPodMetadata is the podTemplate metadata of a claim's Sandbox [claim]: the template's,
// claim-uid, the template's name hash.
func claimPodMetadata(claim *extv1beta1.SandboxClaim, tmpl *extv1beta1.SandboxTemplate) agentsv1beta1.PodMetadata {
	md := *tmpl.Spec.PodTemplate.ObjectMeta.DeepCopy()
	if md.Labels == nil {
		md.Labels = map[string]string{}
	}
	md.Labels[agentsv1beta1.LabelClaimUID] = string(claim.UID)
	md.Labels[agentsv1beta1.LabelSandboxTemplateRefHash] = agentsv1beta1.NameHash(tmpl.Name)
	return md
}

// publicPod is the pod reconcilePod creates for a Sandbox [sandbox]: named after the Sandbox,
// controller-owned by it, its podTemplate's spec, labels and annotations plus the name-hash
// label, and the keys it copied listed in the propagated-labels and propagated-annotations
// annotations. v0.5 copied every podTemplate label verbatim, the tracking labels of the
// agents.x-k8s.io domain included (so the pods carry claim-uid and warm-pool-sandbox, as the
// API contract says); newer versions skip that domain. After an adoption updatePodMetadata
// brings the pod to the same shape from the new podTemplate, so one builder serves both.
func publicPod(sb *agentsv1beta1.Sandbox) *corev1.Pod {
	labels := maps.Clone(sb.Spec.PodTemplate.ObjectMeta.Labels)
	annotations := maps.Clone(sb.Spec.PodTemplate.ObjectMeta.Annotations)
	if annotations == nil {
		annotations = map[string]string{}
	}
	if keys := slices.Sorted(maps.Keys(labels)); len(keys) > 0 {
		annotations[publicPropagatedLabels] = strings.Join(keys, ",")
	}
	if keys := slices.Sorted(maps.Keys(sb.Spec.PodTemplate.ObjectMeta.Annotations)); len(keys) > 0 {
		annotations[publicPropagatedAnnotations] = strings.Join(keys, ",")
	}
	labels[agentsv1beta1.LabelSandboxNameHash] = agentsv1beta1.NameHash(sb.Name)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:            sb.Name,
			Namespace:       sb.Namespace,
			Labels:          labels,
			Annotations:     annotations,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(sb, agentsv1beta1.GroupVersion.WithKind("Sandbox"))},
		},
		Spec: *sb.Spec.PodTemplate.Spec.DeepCopy(),
	}
}

// publicService is the headless Service reconcileService creates for a Sandbox with
// spec.service true [sandbox]: named after the Sandbox, controller-owned by it, labelled and
// selecting by the name hash, one port per distinct container port, named as the container
// port is (servicePortsForSandbox; this test's ports are all named), targeting the same port.
func publicService(sb *agentsv1beta1.Sandbox) *corev1.Service {
	hash := map[string]string{agentsv1beta1.LabelSandboxNameHash: agentsv1beta1.NameHash(sb.Name)}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{
			Name: sb.Name, Namespace: sb.Namespace, Labels: hash,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(sb, agentsv1beta1.GroupVersion.WithKind("Sandbox"))},
		},
		Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Selector: maps.Clone(hash)},
	}
	for _, c := range sb.Spec.PodTemplate.Spec.Containers {
		for _, p := range c.Ports {
			svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{
				Name: p.Name, Protocol: p.Protocol, Port: p.ContainerPort, TargetPort: intstr.FromInt32(p.ContainerPort),
			})
		}
	}
	return svc
}

// publicSandboxStatus is the status the Sandbox controller writes once the pod is Running and
// Ready (and the Service exists, where there is one) [sandbox]: Ready True DependenciesReady
// "Pod is Ready" ("Pod is Ready; Service Exists"), the pod's IPs and node, the name-hash
// selector, and the Service's name and cluster-local FQDN.
func publicSandboxStatus(sb *agentsv1beta1.Sandbox, pod *corev1.Pod, svc *corev1.Service) agentsv1beta1.SandboxStatus {
	var ips []string
	for _, ip := range pod.Status.PodIPs {
		ips = append(ips, ip.IP)
	}
	st := agentsv1beta1.SandboxStatus{
		Conditions: []metav1.Condition{{
			Type: agentsv1beta1.ConditionReady, Status: metav1.ConditionTrue, ObservedGeneration: sb.Generation,
			Reason: agentsv1beta1.ReasonDependenciesReady, Message: agentsv1beta1.MessagePodReady,
			LastTransitionTime: metav1.Now(),
		}},
		Selector: agentsv1beta1.LabelSandboxNameHash + "=" + agentsv1beta1.NameHash(sb.Name),
		PodIPs:   ips,
		NodeName: pod.Spec.NodeName,
	}
	if svc != nil {
		st.Conditions[0].Message = agentsv1beta1.MessagePodReadyServiceExists
		st.Service, st.ServiceFQDN = svc.Name, svc.Name+"."+svc.Namespace+".svc.cluster.local"
	}
	return st
}

// publicClaimStatus is what computeAndSetStatus writes for a claim served by sb [claim]: the
// Sandbox's Ready condition as it is (its observedGeneration is the Sandbox's), and the
// Sandbox's name and IPs.
func publicClaimStatus(sb *agentsv1beta1.Sandbox) extv1beta1.SandboxClaimStatus {
	return extv1beta1.SandboxClaimStatus{
		Conditions: slices.Clone(sb.Status.Conditions[:1]),
		Sandbox:    extv1beta1.SandboxStatusRef{Name: sb.Name, PodIPs: sb.Status.PodIPs},
	}
}

// publicObservedAt is the controller-first-observed-at annotation initializeAnnotations puts on
// every claim it sees [claim].
func publicObservedAt() map[string]string {
	return map[string]string{agentsv1beta1.AnnotationControllerFirstObservedAt: time.Now().Format(time.RFC3339Nano)}
}

// publicAlphaState is what the public conversion webhook keeps on a claim created through
// v1alpha1 [convert]: the whole v1alpha1 object as JSON, in
// api.agents.x-k8s.io/v1alpha1-sandboxclaim-state of the stored v1beta1 claim; a claim naming
// a specific warmpool is stored with warmPoolRef.name = that pool.
func publicAlphaState(name, ns, template, pool string) string {
	warmpool := extv1alpha1.WarmPoolPolicy(pool)
	raw, err := json.Marshal(&extv1alpha1.SandboxClaim{
		TypeMeta:   metav1.TypeMeta{APIVersion: extv1alpha1.GroupVersion.String(), Kind: "SandboxClaim"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       extv1alpha1.SandboxClaimSpec{TemplateRef: extv1alpha1.SandboxTemplateRef{Name: template}, WarmPool: &warmpool},
	})
	if err != nil {
		panic(err)
	}
	return string(raw)
}

// publicNetworkPolicy is the NetworkPolicy the template controller creates for a Managed
// template [template]: <template>-network-policy, controller-owned by the template, selecting
// the template's pods, the template's rules or the secure default (ingress from the router's
// pods, egress to public addresses). This version's IPv6 exceptions are fewer than sandgate's;
// sandgate patches the rules, it does not recreate the policy.
func publicNetworkPolicy(tmpl *extv1beta1.SandboxTemplate) *networkingv1.NetworkPolicy {
	spec := networkingv1.NetworkPolicySpec{
		PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{agentsv1beta1.LabelSandboxTemplateRefHash: agentsv1beta1.NameHash(tmpl.Name)}},
		PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
	}
	if np := tmpl.Spec.NetworkPolicy; np != nil {
		spec.Ingress, spec.Egress = np.Ingress, np.Egress
	} else {
		spec.Ingress = []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{
			PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "sandbox-router"}},
		}}}}
		spec.Egress = []networkingv1.NetworkPolicyEgressRule{{To: []networkingv1.NetworkPolicyPeer{
			{IPBlock: &networkingv1.IPBlock{CIDR: "0.0.0.0/0", Except: []string{"10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "169.254.0.0/16"}}},
			{IPBlock: &networkingv1.IPBlock{CIDR: "::/0", Except: []string{"fc00::/7"}}},
		}}}
	}
	return &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{
			Name: tmpl.Name + "-network-policy", Namespace: tmpl.Namespace,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(tmpl, extv1beta1.GroupVersion.WithKind("SandboxTemplate"))},
		},
		Spec: spec,
	}
}
