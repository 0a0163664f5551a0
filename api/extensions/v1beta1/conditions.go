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
)

// Claim event reasons.
const (
	EventSandboxAdopted     = "SandboxAdopted"
	EventSandboxProvisioned = "SandboxProvisioned"
	// EventSandboxNameTaken (Warning): the claim's Sandbox name belongs to a Sandbox the claim
	// does not control, so its cold start uses a generated name.
	EventSandboxNameTaken = "SandboxNameTaken"
	EventClaimExpired     = "ClaimExpired"
)
