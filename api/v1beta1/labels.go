package v1beta1

import "strings"

// Label and annotation keys of the contract. Clients select on them, so they never change.
const (
	// Domain is the reserved key prefix of this API: users may not set keys under it on pods.
	Domain = "agents.x-k8s.io/"
	// ExtensionsDomain is the reserved key prefix of the extensions group.
	ExtensionsDomain = "extensions.agents.x-k8s.io/"

	// LabelSandboxNameHash (Pod, Service, PVCs) is NameHash of the sandbox name; it is
	// status.selector (the public value) and, with LabelSandboxUID, the Service selector.
	LabelSandboxNameHash = Domain + "sandbox-name-hash"
	// AnnotationPodName (Sandbox) names the sandbox's pod.
	AnnotationPodName = Domain + "pod-name"
	// AnnotationSandboxTemplateRef (Sandbox) names the template the sandbox was made from.
	AnnotationSandboxTemplateRef = Domain + "sandbox-template-ref"
	// LabelSandboxTemplateRefHash (template, Sandbox, Pod) is NameHash of the template name; the
	// managed NetworkPolicy selects on it.
	LabelSandboxTemplateRefHash = Domain + "sandbox-template-ref-hash"
	// LabelSandboxTemplateHash (pool members) is BlueprintHash of the template the member was
	// made from; claims carry the same key as an annotation, stamped at admission.
	LabelSandboxTemplateHash = Domain + "sandbox-template-hash"
	// AnnotationSandboxTemplateHash is the claim's stamp: the template hash it must be bound to.
	AnnotationSandboxTemplateHash = LabelSandboxTemplateHash
	// LabelWarmPoolSandbox (pool members and their pods) is NameHash of the pool name; removed
	// when a claim adopts the member.
	LabelWarmPoolSandbox = Domain + "warm-pool-sandbox"
	// LabelLaunchType (Sandbox) is LaunchTypeWarm or LaunchTypeCold.
	LabelLaunchType = Domain + "launch-type"
	// LabelClaimUID (Sandbox, Pod) is the UID of the claim the sandbox is bound to.
	LabelClaimUID = Domain + "claim-uid"
	// AnnotationSandboxName (claim) names the sandbox the claim is bound to.
	AnnotationSandboxName = Domain + "sandbox-name"
	// LabelCreatedBy (claim, Sandbox, Pod) records which client created the chain.
	LabelCreatedBy = Domain + "created-by"
	// AnnotationWebhookFirstObservedAt (claim) is the RFC3339Nano admission time of the claim.
	AnnotationWebhookFirstObservedAt = Domain + "webhook-first-observed-at"
	// AnnotationControllerFirstObservedAt (claim) is when the claim controller first saw the claim.
	AnnotationControllerFirstObservedAt = Domain + "controller-first-observed-at"
	// AnnotationClientFirstRequestedAt (claim) is set by clients before they create the claim.
	AnnotationClientFirstRequestedAt = Domain + "client-first-requested-at"
	// AnnotationClaimFirstReadyAt (claim) is when the claim first became Ready.
	AnnotationClaimFirstReadyAt = Domain + "claim-first-ready-at"
	// LabelAdoptable (Pod, Service, PVC) set to "true" lets a Sandbox adopt an unowned child.
	LabelAdoptable = Domain + "adoptable"
)

// Keys of sandgate's own, under SandgateDomain. They are identity: the operator writes them,
// admission refuses them from anyone else, and every traffic or isolation decision (Service
// and NetworkPolicy selectors, which child a Sandbox runs) is made on them,
// never on the 32-bit name hashes of the public keys above, which stay for clients that read
// them.
const (
	// SandgateDomain is the reserved key prefix of sandgate's own keys.
	SandgateDomain = "sandgate.dev/"

	// LabelSandboxUID (Pod, Service, PVC) is the UID of the Sandbox the operator built the child
	// for: a Sandbox runs only children carrying its own UID, and its Service selects on it
	// (status.selector stays the public name hash alone, which nothing decides on).
	LabelSandboxUID = SandgateDomain + "sandbox-uid"
	// LabelTemplateUID (pod template of what a template builds, and so the pods) is the UID of
	// the SandboxTemplate the pod was built from: the template's managed NetworkPolicy selects
	// on it.
	LabelTemplateUID = SandgateDomain + "template-uid"
	// AnnotationCreator (claim) is the user name of the identity that created the claim,
	// recorded at admission and immutable: only it, the operator and the platform may change
	// or delete the claim and its Sandbox.
	AnnotationCreator = SandgateDomain + "creator"
)

// Values of LabelLaunchType.
const (
	LaunchTypeWarm = "warm"
	LaunchTypeCold = "cold"
)

// Values of LabelCreatedBy; any other value is reported as CreatedByUnknown.
const (
	CreatedByGoClient     = "go-client"
	CreatedByPythonClient = "python-client"
	CreatedByController   = "controller"
	CreatedByUnknown      = "unknown"
)

// Sandbox condition types.
const (
	ConditionReady        = "Ready"
	ConditionSuspended    = "Suspended"
	ConditionPodScheduled = "PodScheduled"
	ConditionFinished     = "Finished"
)

// Sandbox condition reasons.
const (
	ReasonDependenciesReady    = "DependenciesReady"
	ReasonDependenciesNotReady = "DependenciesNotReady"
	ReasonSandboxSuspended     = "SandboxSuspended"
	ReasonPodSucceeded         = "PodSucceeded"
	ReasonPodFailed            = "PodFailed"
	ReasonSandboxExpired       = "SandboxExpired"
	ReasonMultiplePods         = "MultiplePods"
	ReasonReconcilerError      = "ReconcilerError"
	// ReasonPodLost (Ready=False) is sandgate's, not the public API's: the pod the Sandbox
	// reported Ready was deleted, evicted or replaced, and with it the agent's processes and
	// memory. The message names the lost pod, its UID and how it went; it is reported from
	// before the replacement is created until the replacement is Ready. A bound claim's Ready
	// carries it too.
	ReasonPodLost = "PodLost"

	ReasonPodTerminated   = "PodTerminated"
	ReasonPodTerminating  = "PodTerminating"
	ReasonPodNotOwned     = "PodNotOwned"
	ReasonNotSuspended    = "NotSuspended"
	ReasonPodStateUnknown = "PodStateUnknown"
)

// Ready condition messages clients compare verbatim.
const (
	MessagePodReady              = "Pod is Ready"
	MessagePodReadyServiceExists = "Pod is Ready; Service Exists"
	MessagePodRunningNotReady    = "Pod is Running but not Ready"
	MessagePodExistsWithPhaseFmt = "Pod exists with phase: %s"
	MessagePodDoesNotExist       = "Pod does not exist"
	MessageSandboxSuspended      = "Sandbox is suspended"
	MessageSandboxSuspending     = "Sandbox is suspending"
	// MessagePodReadyNoIPs: the pod is Ready but reports no IP yet (Ready stays False).
	MessagePodReadyNoIPs = "Pod is Ready but has no podIPs yet"
	// MessagePodSucceeded and MessagePodFailed are the Ready and Finished messages of a pod
	// that ended.
	MessagePodSucceeded = "Pod completed successfully"
	MessagePodFailed    = "Pod failed"
	// MessageServiceExistsSuffix and MessageServiceMissingSuffix follow the pod's part of
	// the Ready message when the Sandbox has, or asks for, a Service.
	MessageServiceExistsSuffix  = "; Service Exists"
	MessageServiceMissingSuffix = "; Service does not exist"
)

// reservedDomains are the domains whose keys the operator alone writes.
var reservedDomains = []string{"agents.x-k8s.io", "sandgate.dev"}

// IsReservedKey reports whether a label or annotation key belongs to this API's domains
// (agents.x-k8s.io, extensions.agents.x-k8s.io and their subdomains) or to sandgate's own
// (sandgate.dev and its subdomains): such keys are set by the operator only, never
// propagated from users.
func IsReservedKey(key string) bool {
	prefix, _, found := strings.Cut(key, "/")
	if !found {
		return false
	}
	for _, domain := range reservedDomains {
		if prefix == domain || strings.HasSuffix(prefix, "."+domain) {
			return true
		}
	}
	return false
}
