package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// MaxLimit bounds every limit and share of a ClaimPolicy. A namespace with more concurrent
// claims than this is not what a claim policy is for, and the bound keeps a policy's ledger
// (one entry per claim being admitted) well inside the API server's object size.
const MaxLimit = 10000

// MaxClaimsPerMinute bounds an admission rate: ten thousand claims a second is more than any
// API server admits.
const MaxClaimsPerMinute = 600000

// Bounds of a policy's lists, so that admission's decision is linear in small numbers.
const (
	MaxTenants    = 64
	MaxSubjects   = 64
	MaxPoolLimits = 64
	MaxWarmShares = 64
)

// UnnamedTenant is the name, in status and metrics, of the creators no tenant of a policy
// names; no tenant may take it.
const UnnamedTenant = "unnamed"

// SubjectKind is the kind of identity a Subject names.
// +kubebuilder:validation:Enum=User;Group;ServiceAccount
type SubjectKind string

const (
	// SubjectUser matches the user name of the claim's creator.
	SubjectUser SubjectKind = "User"
	// SubjectGroup matches a group of the claim's creator.
	SubjectGroup SubjectKind = "Group"
	// SubjectServiceAccount matches the service account the claim's creator authenticates as
	// (user name system:serviceaccount:<namespace>:<name>).
	SubjectServiceAccount SubjectKind = "ServiceAccount"
)

// WarmShareAction is what happens to a claim within its hard limits that its tenant's warm
// share does not let have a warm member.
// +kubebuilder:validation:Enum=ServeCold;Wait
type WarmShareAction string

const (
	// ServeCold serves the claim at once with a Sandbox of its own, built from the template.
	ServeCold WarmShareAction = "ServeCold"
	// Wait leaves the claim unserved (Ready=False, reason BeyondWarmShare) until a warm member
	// is within its share.
	Wait WarmShareAction = "Wait"
)

// Subject names the identities of a tenant, as RBAC subjects do.
type Subject struct {
	// Kind is User, Group or ServiceAccount.
	// +required
	Kind SubjectKind `json:"kind"`
	// Name of the user, group or service account.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// Namespace of a ServiceAccount; defaults to the policy's namespace. Empty for the other
	// kinds.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace,omitempty"`
}

// PoolLimit bounds the concurrent claims that name one warm pool.
type PoolLimit struct {
	// PoolName is the SandboxWarmPool of the namespace the claims name (spec.warmPoolRef.name).
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	PoolName string `json:"poolName"`
	// MaxClaims is the most claims of the pool that may exist at once.
	// +required
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=10000
	MaxClaims int32 `json:"maxClaims"`
}

// WarmShare is a tenant's share of one pool's warm members: the ones its claims hold (bound
// warm and not deleted yet).
type WarmShare struct {
	// PoolName is the SandboxWarmPool of the namespace.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	PoolName string `json:"poolName"`
	// Guaranteed is how many warm members the tenant may hold whatever the other tenants do:
	// while it holds fewer, the other tenants' claims get a ready member only when more are
	// ready than the tenants' guarantees still need.
	// +optional
	// +kubebuilder:default=0
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=10000
	Guaranteed int32 `json:"guaranteed,omitempty"`
	// Max is the most warm members the tenant may hold at once; unset is no maximum. A claim
	// beyond it is served as WhenBeyondWarmShare says.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=10000
	Max *int32 `json:"max,omitempty"`
}

// AdmissionRate bounds how fast claims are admitted: a token bucket that holds Burst claims
// and refills at ClaimsPerMinute. Each replica serving admission keeps its own bucket, so
// with n replicas behind the webhook Service up to n times the rate may be admitted.
type AdmissionRate struct {
	// ClaimsPerMinute is the sustained rate at which claims are admitted.
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=600000
	ClaimsPerMinute int32 `json:"claimsPerMinute"`
	// Burst is how many claims may be admitted at once after a pause; defaults to one
	// second's worth of the rate, at least 1.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10000
	Burst *int32 `json:"burst,omitempty"`
}

// Tenant is a set of identities whose claims count together.
type Tenant struct {
	// Name of the tenant, a DNS label, unique in the policy; "unnamed" is the policy's name
	// for every creator no tenant names.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`
	// Subjects are the identities whose claims are the tenant's: the identity that creates a
	// claim, as admission records it. A creator matched by several tenants of one policy is
	// the first one's.
	// +required
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	Subjects []Subject `json:"subjects"`
	// MaxClaims is the most claims of the tenant that may exist at once.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=10000
	MaxClaims *int32 `json:"maxClaims,omitempty"`
	// PerPool bounds the tenant's claims of each named pool.
	// +optional
	// +listType=map
	// +listMapKey=poolName
	// +kubebuilder:validation:MaxItems=64
	PerPool []PoolLimit `json:"perPool,omitempty"`
	// WarmShares are the tenant's shares of pools' warm members.
	// +optional
	// +listType=map
	// +listMapKey=poolName
	// +kubebuilder:validation:MaxItems=64
	WarmShares []WarmShare `json:"warmShares,omitempty"`
	// AdmissionRate bounds how fast the tenant's claims are admitted: one tenant's burst
	// beyond it is refused at once instead of taking the API server from the others.
	// +optional
	AdmissionRate *AdmissionRate `json:"admissionRate,omitempty"`
}

// ClaimPolicySpec is what the platform allows the claims of a namespace.
type ClaimPolicySpec struct {
	// MaxClaims is the most claims of the namespace that may exist at once, whoever created
	// them.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=10000
	MaxClaims *int32 `json:"maxClaims,omitempty"`
	// PerPool bounds the claims of the namespace of each named pool, whoever created them.
	// +optional
	// +listType=map
	// +listMapKey=poolName
	// +kubebuilder:validation:MaxItems=64
	PerPool []PoolLimit `json:"perPool,omitempty"`
	// AdmissionRate bounds how fast the namespace's claims are admitted, whoever creates
	// them (a tenant's own rate applies too).
	// +optional
	AdmissionRate *AdmissionRate `json:"admissionRate,omitempty"`
	// Tenants are the sets of creators with limits and warm shares of their own.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=64
	Tenants []Tenant `json:"tenants,omitempty"`
	// WhenBeyondWarmShare says what happens to a claim its tenant's warm share does not let
	// have a warm member: ServeCold (the default) or Wait.
	// +optional
	// +kubebuilder:default=ServeCold
	WhenBeyondWarmShare WarmShareAction `json:"whenBeyondWarmShare,omitempty"`
}

// PoolUsage is the usage of one pool's claims and warm members.
type PoolUsage struct {
	// PoolName is the pool.
	PoolName string `json:"poolName"`
	// Claims counts the claims of the pool, as Usage.Claims does.
	// +optional
	Claims int32 `json:"claims"`
	// WarmHeld counts the claims of the pool bound to a warm member.
	// +optional
	WarmHeld int32 `json:"warmHeld"`
}

// Usage is what counts against a set of limits.
type Usage struct {
	// Claims counts the claims that exist (deleted ones count until they are gone) and those
	// admitted whose creation the operator has not seen yet (Reserved): what admission checks
	// the limits against.
	// +optional
	Claims int32 `json:"claims"`
	// Reserved is the part of Claims admitted and not seen created yet. It drops to 0 once
	// creations stop; a reservation whose claim is never created (refused after admission)
	// ends after --claim-reservation-ttl.
	// +optional
	Reserved int32 `json:"reserved"`
	// Pools are the usage of each pool a limit or warm share of the policy names (claims of
	// other pools count in Claims only).
	// +optional
	// +listType=map
	// +listMapKey=poolName
	Pools []PoolUsage `json:"pools"`
}

// Metering is what a set of creators got since the policy was created: counters that only
// grow (a leader that fails over may lose the last few seconds of them).
type Metering struct {
	// WarmHits counts claims served with a warm member.
	// +optional
	WarmHits int64 `json:"warmHits"`
	// ColdStarts counts claims served with a Sandbox of their own.
	// +optional
	ColdStarts int64 `json:"coldStarts"`
	// Refusals counts claims refused at admission for a limit of this policy.
	// +optional
	Refusals int64 `json:"refusals"`
	// ClaimSeconds is the time claims existed, summed over claims, in seconds.
	// +optional
	ClaimSeconds int64 `json:"claimSeconds"`
}

// TenantStatus is one tenant's usage and metering.
type TenantStatus struct {
	// Name is the tenant's, or "unnamed" for the creators no tenant names.
	Name     string `json:"name"`
	Usage    `json:",inline"`
	Metering `json:",inline"`
}

// Condition types of a ClaimPolicy.
const (
	// ConditionCounted is True once the operator counted the namespace's claims for the
	// policy's current generation (its admission ledgers exist); until then admission refuses
	// claims the policy limits (503), as it cannot count them.
	ConditionCounted = "Counted"
	// ConditionWithinLimits is False while a usage is above its limit: a limit lowered below
	// the claims that exist refuses new claims and ends none.
	ConditionWithinLimits = "WithinLimits"
	// ConditionPoolsFound is False while a limit or warm share names a pool the namespace does
	// not have (claims of it are refused at the pool's own limit, or count for nothing).
	ConditionPoolsFound = "PoolsFound"
)

// Condition reasons of a ClaimPolicy.
const (
	ReasonCounted         = "Counted"
	ReasonCounting        = "Counting"
	ReasonUsageBelowLimit = "UsageBelowLimit"
	ReasonUsageAboveLimit = "UsageAboveLimit"
	ReasonPoolsFound      = "PoolsFound"
	ReasonPoolNotFound    = "PoolNotFound"
)

// ClaimPolicyStatus is the usage of a policy's limits and what its creators got. Fields that
// can go back to zero or empty have no omitempty: the operator writes the status as a merge
// patch of all of it, where a field left out would keep its old value.
type ClaimPolicyStatus struct {
	// ObservedGeneration is the generation the status was computed for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Usage is the namespace's, against spec.maxClaims and spec.perPool.
	Usage `json:",inline"`
	// Tenants are the usage and metering of each tenant of spec.tenants.
	// +optional
	// +listType=map
	// +listMapKey=name
	Tenants []TenantStatus `json:"tenants"`
	// Unnamed is the usage and metering of the creators no tenant names.
	// +optional
	Unnamed *TenantStatus `json:"unnamed,omitempty"`
	// MeteredAt is when ClaimSeconds were last brought up to date.
	// +optional
	MeteredAt *metav1.Time `json:"meteredAt,omitempty"`
	// Conditions: Counted, WithinLimits, PoolsFound.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// ClaimPolicy limits the claims of its namespace: how many may exist at once, in all, per
// pool, per tenant (a set of creators), and how many warm members each tenant may hold. Every
// policy of a namespace applies to every claim of it, as ResourceQuotas do. The platform
// writes it; tenants read it to see their usage.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:storageversion
// +kubebuilder:printcolumn:name="Claims",type=integer,JSONPath=".status.claims"
// +kubebuilder:printcolumn:name="Max",type=integer,JSONPath=".spec.maxClaims"
// +kubebuilder:printcolumn:name="Counted",type=string,JSONPath=".status.conditions[?(@.type=='Counted')].status"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=".metadata.creationTimestamp"
type ClaimPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +optional
	Spec ClaimPolicySpec `json:"spec,omitempty"`
	// +optional
	Status ClaimPolicyStatus `json:"status,omitempty"`
}

// ClaimPolicyList is a list of ClaimPolicies.
// +kubebuilder:object:root=true
type ClaimPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ClaimPolicy `json:"items"`
}

func init() {
	register(&ClaimPolicy{}, &ClaimPolicyList{})
}
