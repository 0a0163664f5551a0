package check

import (
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/types"

	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	tenancyv1alpha1 "github.com/sandgate-dev/sandgate/api/tenancy/v1alpha1"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
)

// ClaimRecord is what the load generator saw of one claim it tried to create. Names are
// unique per attempt: a retried create is another record under another name.
type ClaimRecord struct {
	Namespace, Name string
	// UID is the created claim's UID; empty when the create failed.
	UID types.UID
	// Requested is when the create was sent.
	Requested time.Time
	// CreateCode and CreateErr are the HTTP status code and error of a failed create (0 and
	// "" when the claim was created; CreateCode 0 with an error when no answer came).
	CreateCode int
	CreateErr  string
	// Created, Ready and DeleteRequested are zero when they did not happen. Ready is the first
	// Ready=True the load generator's watch saw.
	Created, Ready, DeleteRequested time.Time
}

// Fault is one injected fault.
type Fault struct {
	// Kind names the kind of fault ("leader-kill", "webhook-down", ...): recovery is
	// reported per kind.
	Kind string
	// Start is when the fault was injected, End when it was cleared.
	Start, End time.Time
	// Detail says what exactly was done, for the report.
	Detail string
}

// State is what was listed after the load stopped and the system settled.
type State struct {
	Claims          []extv1beta1.SandboxClaim
	Sandboxes       []agentsv1beta1.Sandbox
	Pools           []extv1beta1.SandboxWarmPool
	Templates       []extv1beta1.SandboxTemplate
	Pods            []corev1.Pod
	PVCs            []corev1.PersistentVolumeClaim
	Services        []corev1.Service
	NetworkPolicies []networkingv1.NetworkPolicy
	ClaimPolicies   []tenancyv1alpha1.ClaimPolicy
	ClaimLedgers    []tenancyv1alpha1.ClaimLedger
}

// Input is everything a soak recorded.
type Input struct {
	// Audit is the API server's audit log (ReadAuditLog), written under AuditPolicy.
	Audit []AuditEvent
	// Claims are the load generator's records, one per create it sent.
	Claims []ClaimRecord
	// Faults are the injected faults.
	Faults []Fault
	// Final is the state after the load stopped and the system settled.
	Final State
	// OperatorUser is the user name both replicas use: the binding guard admits bindings
	// and restamps from it only.
	OperatorUser string
	// ReplicaOf says which replica sent a request, from the requester's groups; "" for none.
	// nil is ReplicaFromGroups.
	ReplicaOf func(groups []string) string
	// LeaseNamespace and LeaseName name the leader election Lease. With LeaseName empty the
	// stale-leader check is skipped.
	LeaseNamespace, LeaseName string
	// AdmissionUserAgent ends the User-Agent of admission's ClaimLedger writes
	// (operator.LedgerUserAgent): every replica admits claims and reserves them, so those
	// writes are no leader's. Empty checks every ledger write as a leader's.
	AdmissionUserAgent string
	// LoadStopped is when the load generator stopped: nothing new was created by it after.
	LoadStopped time.Time
}

// ReplicaGroupPrefix prefixes the extra group a soak gives each replica's client
// certificate: "sandgate.dev/replica:<name>".
const ReplicaGroupPrefix = "sandgate.dev/replica:"

// ReplicaFromGroups is the default Input.ReplicaOf: the name in the first group with
// ReplicaGroupPrefix, "" when there is none.
func ReplicaFromGroups(groups []string) string {
	for _, g := range groups {
		if name, ok := strings.CutPrefix(g, ReplicaGroupPrefix); ok && name != "" {
			return name
		}
	}
	return ""
}
