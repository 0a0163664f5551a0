package v1alpha1

// Annotations admission sets on a claim created in a namespace with a ClaimPolicy. A client
// that sets either is refused (422); nobody may change them afterwards.
const (
	// AnnotationReservation is the ID of the claim's reservation in its policies' ledgers:
	// how the operator tells a reservation whose claim exists from one whose create failed.
	AnnotationReservation = "policy.sandgate.dev/reservation"
	// AnnotationCreatorGroups are the groups of the identity that created the claim, sorted,
	// comma-separated (at most MaxCreatorGroups of them, those a policy of the namespace names
	// first): with sandgate.dev/creator, the identity a policy's Group subjects match, then and
	// after a restart.
	AnnotationCreatorGroups = "policy.sandgate.dev/creator-groups"
)

// MaxCreatorGroups bounds the groups a claim records of its creator.
const MaxCreatorGroups = 64

// LabelLedgerPolicy labels each ClaimLedger with the name of its ClaimPolicy.
const LabelLedgerPolicy = "policy.sandgate.dev/policy"

// ReasonBeyondWarmShare is a claim's Ready reason (False) while it waits because its tenant's
// warm share lets it have no warm member (whenBeyondWarmShare: Wait), and the reason of the
// Normal event that says why a claim was not served warm. The public API has no reason for a
// claim held back by a policy; the waits it has a reason for (SandboxCreatePending: a member
// or Sandbox on its way) are not this one.
const ReasonBeyondWarmShare = "BeyondWarmShare"

// Limits a claim can be refused for, the values of the refusal metric's limit label.
const (
	LimitMaxClaims       = "maxClaims"
	LimitPerPool         = "perPool"
	LimitTenantMaxClaims = "tenants.maxClaims"
	LimitTenantPerPool   = "tenants.perPool"
	// LimitAdmissionRate and LimitTenantAdmissionRate are spec.admissionRate and a tenant's.
	LimitAdmissionRate       = "admissionRate"
	LimitTenantAdmissionRate = "tenants.admissionRate"
)
