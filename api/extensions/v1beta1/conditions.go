package v1beta1

// Claim condition reasons beyond the Sandbox reasons the claim mirrors.
const (
	ReasonTemplateNotFound          = "TemplateNotFound"
	ReasonWarmPoolNotFound          = "WarmPoolNotFound"
	ReasonSandboxCreatePending      = "SandboxCreatePending"
	ReasonInvalidMetadata           = "InvalidMetadata"
	ReasonEnvVarsInjectionRejected  = "EnvVarsInjectionRejected"
	ReasonVolumeClaimTemplatesError = "VolumeClaimTemplatesError"
	ReasonClaimExpired              = "ClaimExpired"
	ReasonSandboxMissing            = "SandboxMissing"
	ReasonSandboxExpired            = "SandboxExpired"
	ReasonSandboxNotReady           = "SandboxNotReady"
	ReasonReconcilerError           = "ReconcilerError"
	// ReasonRestamped (Ready=False): the template version the claim was stamped with is gone,
	// and the claim was restamped to the current one; it is served from that version.
	ReasonRestamped = "Restamped"
	// ReasonStampedVersionGone (Ready=False): the stamped version is gone and the operator
	// runs with --restamp=false: the claim is not served.
	ReasonStampedVersionGone = "StampedVersionGone"
)

// Claim event reasons.
const (
	EventSandboxAdopted     = "SandboxAdopted"
	EventSandboxProvisioned = "SandboxProvisioned"
	// EventSandboxNameTaken (Warning): the claim's Sandbox name belongs to a Sandbox the claim
	// does not control, so its cold start uses a generated name.
	EventSandboxNameTaken = "SandboxNameTaken"
	EventClaimExpired     = "ClaimExpired"
	// EventClaimRestamped (Warning): the claim's stamped template version is gone and it was
	// restamped to the current one.
	EventClaimRestamped = "ClaimRestamped"
)
