package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// OtherPools is the pool of a ledger entry that stands for every pool no limit of the policy
// names: claims of such pools count only against the limits that span every pool.
const OtherPools = ""

// ClaimLedgerSpec says whose claims a ledger counts. It is set when the operator creates the
// ledger and never changes.
type ClaimLedgerSpec struct {
	// PolicyName is the ClaimPolicy of the namespace the ledger counts for.
	// +required
	PolicyName string `json:"policyName"`
	// Tenant is the one tenant of the policy whose claims the ledger counts; empty when the
	// policy has namespace-wide limits (maxClaims or perPool), and one ledger counts every
	// creator's claims.
	// +optional
	Tenant string `json:"tenant,omitempty"`
}

// LedgerCount is the number of claims of one tenant and pool the operator counted.
type LedgerCount struct {
	// Tenant is the tenant's name; empty for the creators no tenant names.
	// +optional
	Tenant string `json:"tenant,omitempty"`
	// Pool is the claims' pool; empty for the pools no limit of the policy names.
	// +optional
	Pool string `json:"pool,omitempty"`
	// Claims is the count.
	Claims int32 `json:"claims"`
}

// Reservation is one claim admission let through whose creation the operator has not
// counted yet. The claim carries its ID (annotation policy.sandgate.dev/reservation).
// Unlike a LedgerCount's, its Pool is the claim's pool, whether or not a limit names it.
type Reservation struct {
	// ID is random, unique in the namespace.
	ID string `json:"id"`
	// Claim is the claim's name, when it had one at admission (not with generateName).
	// +optional
	Claim string `json:"claim,omitempty"`
	// Tenant and Pool are what the claim counts against, as in LedgerCount.
	// +optional
	Tenant string `json:"tenant,omitempty"`
	// +optional
	Pool string `json:"pool,omitempty"`
	// Creator is the user name of the identity that creates the claim.
	// +optional
	Creator string `json:"creator,omitempty"`
	// At is when admission reserved it.
	At metav1.MicroTime `json:"at"`
}

// LedgerRefusals counts the claims of one tenant admission refused for this policy's limits.
type LedgerRefusals struct {
	// Tenant is the tenant's name; empty for the creators no tenant names.
	// +optional
	Tenant string `json:"tenant,omitempty"`
	// Count only grows.
	Count int64 `json:"count"`
}

// ClaimLedgerStatus is the ledger's content: what the operator counted and what admission
// reserved since. Admission checks a claim against Counted plus Reservations.
type ClaimLedgerStatus struct {
	// CountedAt is when the operator last counted the claims; unset until it first has, and
	// admission uses no ledger the operator has not counted.
	// +optional
	CountedAt *metav1.MicroTime `json:"countedAt,omitempty"`
	// CountedGeneration is the generation of the policy the count was made for: admission
	// reserves only against a count made for the policy it checks the claim against.
	// +optional
	CountedGeneration int64 `json:"countedGeneration,omitempty"`
	// Retired is set when a change of the policy moves its counting to other ledgers: no
	// reservation is added any more, and the operator moves those it holds and deletes it.
	// +optional
	Retired bool `json:"retired,omitempty"`
	// Counted are the claims the operator counted then, by tenant and pool.
	// +optional
	// +listType=atomic
	Counted []LedgerCount `json:"counted,omitempty"`
	// Reservations are the claims admitted since that the count does not include.
	// +optional
	// +listType=atomic
	Reservations []Reservation `json:"reservations,omitempty"`
	// Refusals count the claims refused, by tenant.
	// +optional
	// +listType=atomic
	Refusals []LedgerRefusals `json:"refusals,omitempty"`
}

// ClaimLedger is admission's record of one ClaimPolicy's usage: the claims the operator
// counted and those admitted since. Every replica's admission reserves a claim in it with one
// write conditional on its resourceVersion, so that two replicas never both admit the last
// claim a limit allows; the leader recounts it from the claims that exist. Only the operator
// writes ledgers; a policy without namespace-wide limits has one ledger per tenant, so that one
// tenant's admissions never wait for another's. They are the operator's bookkeeping, owned by
// their policy: read the policy's status instead.
// +kubebuilder:object:root=true
// +kubebuilder:printcolumn:name="Policy",type=string,JSONPath=".spec.policyName"
// +kubebuilder:printcolumn:name="Tenant",type=string,JSONPath=".spec.tenant"
// +kubebuilder:printcolumn:name="Counted",type=date,JSONPath=".status.countedAt"
type ClaimLedger struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec ClaimLedgerSpec `json:"spec"`
	// +optional
	Status ClaimLedgerStatus `json:"status,omitempty"`
}

// ClaimLedgerList is a list of ClaimLedgers.
// +kubebuilder:object:root=true
type ClaimLedgerList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ClaimLedger `json:"items"`
}

func init() {
	register(&ClaimLedger{}, &ClaimLedgerList{})
}
