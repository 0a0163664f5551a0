package check

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sandgate-dev/sandgate/api/policy"
	tenancyv1alpha1 "github.com/sandgate-dev/sandgate/api/tenancy/v1alpha1"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
)

// A clean soak proves every invariant and measures what the faults cost.
func TestCheckCleanHistoryHasNoViolationAndMeasuresRecovery(t *testing.T) {
	got := Check(cleanRun().input())
	if len(got.Violations) > 0 {
		t.Fatalf("violations of a clean history:\n%s", violations(got))
	}
	if len(got.Notes) > 0 {
		t.Errorf("notes of a clean history: %q", got.Notes)
	}
	want := map[string][]time.Duration{"leader-kill": {sec(25.65).Sub(sec(20))}}
	if diff := cmp.Diff(want, got.Recovery); diff != "" {
		t.Errorf("recovery (-want +got):\n%s", diff)
	}
	wantCounts := ClaimCounts{Requested: 3, Created: 3, Served: 3, Deleted: 1, Admitted: 3}
	if diff := cmp.Diff(wantCounts, got.Claims); diff != "" {
		t.Errorf("claim counts (-want +got):\n%s", diff)
	}
	if got.Faults[0].Pending != 1 || got.FaultsByKind["leader-kill"] != 1 {
		t.Errorf("fault results %+v, by kind %v: want one pending claim of one leader-kill", got.Faults, got.FaultsByKind)
	}
	if got.LatencyInFaults.Count != 1 || got.LatencyInFaults.P99 != sec(25.65).Sub(sec(12.01)) {
		t.Errorf("latency in faults %+v, want c2's alone", got.LatencyInFaults)
	}
	if got.LatencyOutsideFaults.Count != 2 || got.LatencyOutsideFaults.P50 != 240*time.Millisecond {
		t.Errorf("latency outside faults %+v, want c1's and c3's (240ms each)", got.LatencyOutsideFaults)
	}
}

// Every create the load generator sent is counted once: created, refused, or given up
// unanswered (shed with 429 until the client's timeout, which client-go's retries reach, or
// the API server down); the audit log's 429s count every retry. Without the unanswered count a
// run's report left out hundreds of the claims it requested (2026-11-27, short soak at 20/s:
// 3,000 requested, 1,847 created, 897 refused, 256 nowhere).
func TestCheckCountsCreatesShedUntilTheClientGaveUp(t *testing.T) {
	r := cleanRun()
	claim9 := newClaim("c9", "c9-uid")
	for _, at := range []float64{40, 45} { // shed, retried after 5 s, shed again, then the timeout
		r.log.meta("create", loadUser, "", sec(at), "extensions.agents.x-k8s.io", "sandboxclaims", testNS, "c8").Code = 429
	}
	// c9 got no answer (the API server restarting) but was admitted: created, not unanswered.
	r.log.write("create", loadUser, "", sec(41), claim9)
	r.log.remove(loadUser, "", sec(42), claim9)
	r.in.Claims = append(r.in.Claims,
		ClaimRecord{Namespace: testNS, Name: "c8", Requested: sec(40), CreateErr: "context deadline exceeded"},
		ClaimRecord{Namespace: testNS, Name: "c9", Requested: sec(41), CreateErr: "http2: client connection lost"},
		ClaimRecord{Namespace: testNS, Name: "c10", Requested: sec(43), CreateCode: 500, CreateErr: `Internal error occurred: failed calling webhook "claims.sandgate.dev"`},
	)
	got := Check(r.input())
	if len(got.Violations) > 0 {
		t.Fatalf("violations:\n%s", violations(got))
	}
	want := ClaimCounts{Requested: 6, Created: 4, Served: 3, Deleted: 2, Refused: 1, Unanswered: 1, Admitted: 4, Shed: 2}
	if diff := cmp.Diff(want, got.Claims); diff != "" {
		t.Errorf("claim counts (-want +got):\n%s", diff)
	}
}

// Each broken invariant is reported, and only it: the checker catches what it claims to.
func TestCheckReportsEachBrokenInvariant(t *testing.T) {
	claim9 := newClaim("c9", "c9-uid")
	cases := map[string]struct {
		breakIt func(r *run)
		want    map[string]int
		// wantDetail is part of a violation's detail.
		wantDetail string
	}{
		"a claim served without a stamp": {
			breakIt: func(r *run) {
				unstamped := claim9.DeepCopy()
				unstamped.Annotations = nil
				r.log.write("create", loadUser, "", sec(40), unstamped)
				r.log.write("patch", operatorUser, "b", sec(41), readyClaim(unstamped, memberABC.Name))
				r.log.remove(loadUser, "", sec(42), unstamped)
			},
			want: map[string]int{InvariantClaimStamped: 1}, wantDetail: "without the",
		},
		"a claim admitted while its pool was missing, stamped by the operator, then served": {
			breakIt: func(r *run) {
				unstamped := claim9.DeepCopy()
				unstamped.Annotations = nil
				r.log.write("create", loadUser, "", sec(40), unstamped)
				r.log.write("patch", operatorUser, "b", sec(41), claim9)
				r.log.write("patch", operatorUser, "b", sec(42), readyClaim(claim9, memberABC.Name))
				r.log.remove(loadUser, "", sec(43), claim9)
			},
			want: map[string]int{},
		},
		"a claim restamped by another user than the operator": {
			breakIt: func(r *run) {
				restamped := readyClaim(claim1, memberABC.Name)
				restamped.Annotations[agentsv1beta1.AnnotationSandboxTemplateHash] = "0123"
				r.log.write("patch", loadUser, "", sec(40), restamped)
			},
			want: map[string]int{InvariantStampByOperator: 1}, wantDetail: `to "0123"`,
		},
		"a claim restamped by the operator": {
			breakIt: func(r *run) {
				restamped := readyClaim(claim1, memberABC.Name)
				restamped.Annotations[agentsv1beta1.AnnotationSandboxTemplateHash] = "0123"
				r.log.write("patch", operatorUser, "b", sec(40), restamped)
			},
			want: map[string]int{},
		},
		"a final claim not Ready": {
			breakIt: func(r *run) {
				r.in.Final.Claims[0].Status.Conditions[0].Status = metav1.ConditionFalse
				r.in.Final.Claims[0].Status.Conditions[0].Reason = agentsv1beta1.ReasonDependenciesNotReady
			},
			want: map[string]int{InvariantClaimReady: 1}, wantDetail: "DependenciesNotReady",
		},
		"a final claim with two Sandboxes": {
			breakIt: func(r *run) {
				r.in.Final.Sandboxes = append(r.in.Final.Sandboxes, *coldFor(claim1, "extra-uid"))
			},
			want: map[string]int{InvariantClaimOneSandbox: 1}, wantDetail: "2 Sandboxes",
		},
		"a final claim without a Sandbox": {
			breakIt: func(r *run) {
				r.in.Final.Sandboxes = r.in.Final.Sandboxes[1:]
				r.in.Final.Pods = r.in.Final.Pods[1:]
			},
			want: map[string]int{InvariantClaimOneSandbox: 1}, wantDetail: "0 Sandboxes",
		},
		"a final claim bound to a Sandbox of another template version": {
			breakIt: func(r *run) {
				sb := &r.in.Final.Sandboxes[0]
				sb.Spec.PodTemplate.Spec.Containers[0].Image = "registry.example/agent:2"
				sb.Labels[agentsv1beta1.LabelSandboxTemplateHash] = policy.SandboxHash(sb)
			},
			want: map[string]int{InvariantClaimTemplateVersion: 1}, wantDetail: "labelled with version",
		},
		"a final claim bound to a Sandbox that is not what its label says": {
			breakIt: func(r *run) {
				r.in.Final.Sandboxes[0].Spec.PodTemplate.Spec.Containers[0].Image = "registry.example/agent:2"
			},
			want: map[string]int{InvariantClaimTemplateVersion: 1}, wantDetail: "built from version",
		},
		"a Sandbox rebound to a second claim": {
			breakIt: func(r *run) {
				r.log.write("patch", operatorUser, "b", sec(40), unbound(bindTo(memberABC, claim1)))
				r.log.write("patch", operatorUser, "b", sec(41), bindTo(memberABC, claim9))
			},
			want: map[string]int{InvariantSandboxOneClaim: 1}, wantDetail: "after claim c1-uid",
		},
		"a Sandbox bound to two claims at once": {
			breakIt: func(r *run) {
				sb := bindTo(memberABC, claim1)
				sb.Labels[agentsv1beta1.LabelClaimUID] = string(claim9.UID)
				r.log.write("patch", operatorUser, "b", sec(40), sb)
			},
			// The label's claim takes the Sandbox from c1: both a conflict and a rebinding.
			want: map[string]int{InvariantSandboxOneClaim: 2}, wantDetail: "label names claim c9-uid",
		},
		"a Sandbox bound twice": {
			breakIt: func(r *run) {
				r.log.write("patch", operatorUser, "b", sec(40), unbound(bindTo(memberABC, claim1)))
				r.log.write("patch", operatorUser, "b", sec(41), bindTo(memberABC, claim1))
			},
			want: map[string]int{InvariantSandboxBoundOnce: 1}, wantDetail: "again",
		},
		"a binding by another user than the operator": {
			breakIt: func(r *run) {
				rogue := coldFor(claim9, "rogue-uid")
				rogue.Name = "rogue"
				r.log.write("create", "mallory", "", sec(40), rogue)
				r.log.remove("mallory", "", sec(41), rogue)
			},
			want: map[string]int{InvariantBindingByOperator: 1}, wantDetail: "by mallory",
		},
		"a claim bound to two Sandboxes at once": {
			breakIt: func(r *run) {
				second := coldFor(claim1, "second-uid")
				r.log.write("create", operatorUser, "b", sec(40), second)
				r.log.remove(operatorUser, "b", sec(41), second)
			},
			want: map[string]int{InvariantClaimOneBinding: 1}, wantDetail: "while still bound to Sandbox soak/pool-abc",
		},
		"a claim bound to a second Sandbox after the first was deleted": {
			breakIt: func(r *run) {
				r.log.remove(gcUser, "", sec(40), cold2)
				r.log.write("create", operatorUser, "b", sec(41), coldFor(claim2, "second-uid"))
			},
			want: map[string]int{},
		},
		"a write of the old leader after the new one acquired the Lease": {
			breakIt: func(r *run) { r.log.write("patch", operatorUser, "a", sec(26), memberGHI) },
			want:    map[string]int{InvariantStaleLeaderWrite: 1}, wantDetail: "replica b held it as b_1",
		},
		"a write of the old leader after its Lease ran out, nobody holding it": {
			breakIt: func(r *run) { r.log.write("patch", operatorUser, "a", sec(24.5), memberGHI) },
			want:    map[string]int{InvariantStaleLeaderWrite: 1}, wantDetail: "nobody held it",
		},
		"a pod write of the old leader after its Lease ran out": {
			breakIt: func(r *run) { r.log.meta("delete", operatorUser, "a", sec(24.5), "", "pods", testNS, "pool-ghi") },
			want:    map[string]int{InvariantStaleLeaderWrite: 1}, wantDetail: "delete pods by",
		},
		"a write of a replica that never held the Lease": {
			breakIt: func(r *run) { r.log.write("patch", operatorUser, "c", sec(30), memberGHI) },
			want:    map[string]int{InvariantStaleLeaderWrite: 1}, wantDetail: "it had never held it",
		},
		"admission's ledger write of a replica without the Lease": {
			breakIt: func(r *run) {
				r.in.AdmissionUserAgent = "admission-ledger"
				r.log.meta("patch", operatorUser, "a", sec(26), "policy.sandgate.dev", "claimledgers", testNS, "quotas").UserAgent = "sandgate/v0.1.0/admission-ledger"
			},
			want: map[string]int{},
		},
		"a leader's ledger write of a replica without the Lease": {
			breakIt: func(r *run) {
				r.in.AdmissionUserAgent = "admission-ledger"
				r.log.meta("patch", operatorUser, "a", sec(26), "policy.sandgate.dev", "claimledgers", testNS, "quotas").UserAgent = "sandgate/v0.1.0"
			},
			want: map[string]int{InvariantStaleLeaderWrite: 1}, wantDetail: "patch claimledgers by",
		},
		"a write of the old leader before its Lease ran out": {
			breakIt: func(r *run) { r.log.write("patch", operatorUser, "a", sec(23.5), memberGHI) },
			want:    map[string]int{},
		},
		"a write of the old leader renewing after its Lease ran out": {
			breakIt: func(r *run) {
				r.log.lease("update", "a", "a_1", sec(24.2))
				r.log.write("patch", operatorUser, "a", sec(24.3), memberGHI)
			},
			want: map[string]int{},
		},
		"a write of the old leader between its Lease running out and its renewal": {
			breakIt: func(r *run) {
				r.log.write("patch", operatorUser, "a", sec(24.1), memberGHI)
				r.log.lease("update", "a", "a_1", sec(24.2))
			},
			want: map[string]int{InvariantStaleLeaderWrite: 1}, wantDetail: "ended 2026-11-25T10:00:24Z",
		},
		"a failed or exempt write of a replica without the Lease": {
			breakIt: func(r *run) {
				r.log.write("patch", operatorUser, "a", sec(26), memberGHI).Code = 403
				r.log.meta("create", operatorUser, "a", sec(26), "", "events", testNS, "pool.2")
				r.log.meta("create", operatorUser, "a", sec(26), "authorization.k8s.io", "subjectaccessreviews", "", "")
				r.log.lease("update", "a", "a_2", sec(40)).Code = 409
			},
			want: map[string]int{},
		},
		"a write of the operator user from no replica": {
			breakIt: func(r *run) { r.log.write("patch", operatorUser, "", sec(30), memberGHI) },
			want:    map[string]int{InvariantKnownWriter: 1}, wantDetail: "no replica",
		},
		"a leaked pod": {
			breakIt: func(r *run) { r.in.Final.Pods = append(r.in.Final.Pods, podOf(memberDEF)) },
			want:    map[string]int{InvariantNoLeakedChild: 1}, wantDetail: "its Sandbox pool-def",
		},
		"a leaked PVC that lost its owner reference": {
			breakIt: func(r *run) {
				r.in.Final.PVCs = append(r.in.Final.PVCs, corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{
					Name: "data-pool-def", Namespace: testNS, Labels: map[string]string{agentsv1beta1.LabelSandboxUID: string(memberDEF.UID)},
				}})
			},
			want: map[string]int{InvariantNoLeakedChild: 1}, wantDetail: "built for Sandbox UID def-uid",
		},
		"a leaked NetworkPolicy": {
			breakIt: func(r *run) { r.in.Final.Templates = nil },
			want:    map[string]int{InvariantNoLeakedChild: 1}, wantDetail: "its SandboxTemplate tmpl",
		},
		"a leaked Sandbox of a deleted claim": {
			breakIt: func(r *run) {
				r.in.Final.Sandboxes = append(r.in.Final.Sandboxes, *bindTo(memberDEF, claim3))
				r.in.Final.Pods = append(r.in.Final.Pods, podOf(memberDEF))
			},
			want: map[string]int{InvariantNoLeakedSandbox: 1}, wantDetail: "its claim c3",
		},
		"a leaked Sandbox without an owner, bound by label to a deleted claim": {
			breakIt: func(r *run) {
				r.in.Final.Sandboxes = append(r.in.Final.Sandboxes, *unbound(bindTo(memberDEF, claim3)))
				r.in.Final.Sandboxes[len(r.in.Final.Sandboxes)-1].Labels[agentsv1beta1.LabelClaimUID] = string(claim3.UID)
			},
			want: map[string]int{InvariantNoLeakedSandbox: 1}, wantDetail: "no controlling owner",
		},
		"a pool member of a deleted pool": {
			breakIt: func(r *run) { r.in.Final.Pools = nil },
			want:    map[string]int{InvariantNoLeakedSandbox: 1}, wantDetail: "its pool pool",
		},
		"a pool below its replicas": {
			breakIt: func(r *run) {
				r.in.Final.Sandboxes = r.in.Final.Sandboxes[:2]
				r.in.Final.Pods = r.in.Final.Pods[:2]
				r.in.Final.Pools[0].Status.ReadyReplicas = 0
			},
			want: map[string]int{InvariantPoolAtReplicas: 1}, wantDetail: "0 members and status.readyReplicas 0",
		},
		"a pool whose members are not ready": {
			breakIt: func(r *run) { r.in.Final.Pools[0].Status.ReadyReplicas = 0 },
			want:    map[string]int{InvariantPoolAtReplicas: 1}, wantDetail: "1 members and status.readyReplicas 0",
		},
		"a refused admission that left a claim behind": {
			breakIt: func(r *run) {
				r.in.Claims = append(r.in.Claims, ClaimRecord{Namespace: testNS, Name: "c9", Requested: sec(40),
					CreateCode: 500, CreateErr: `Internal error occurred: failed calling webhook "claims.sandgate.dev"`})
				r.log.write("create", loadUser, "", sec(40), claim9)
				r.log.remove(loadUser, "", sec(41), claim9)
			},
			want: map[string]int{InvariantRefusedCleanly: 1}, wantDetail: "yet the API server admitted it",
		},
		"a refused admission that left nothing": {
			breakIt: func(r *run) {
				r.in.Claims = append(r.in.Claims, ClaimRecord{Namespace: testNS, Name: "c9", Requested: sec(40),
					CreateCode: 500, CreateErr: `Internal error occurred: failed calling webhook "claims.sandgate.dev"`})
				r.log.meta("create", loadUser, "", sec(40), "extensions.agents.x-k8s.io", "sandboxclaims", testNS, "c9").Code = 500
			},
			want: map[string]int{},
		},
		"a claim created after recovery never served": {
			breakIt: func(r *run) {
				r.in.Claims = append(r.in.Claims, ClaimRecord{Namespace: testNS, Name: "c9", UID: claim9.UID, Requested: sec(40), Created: sec(40.01)})
				r.log.write("create", loadUser, "", sec(40), claim9)
				r.in.Final.Claims = append(r.in.Final.Claims, *claim9)
			},
			// Still there at the end: not Ready, and without its Sandbox.
			want: map[string]int{InvariantServedAfterRecovery: 1, InvariantClaimReady: 1, InvariantClaimOneSandbox: 1},
		},
		"a claim created after recovery deleted before it was served": {
			breakIt: func(r *run) {
				r.in.Claims = append(r.in.Claims, ClaimRecord{Namespace: testNS, Name: "c9", UID: claim9.UID, Requested: sec(40), Created: sec(40.01), DeleteRequested: sec(40.5)})
				r.log.write("create", loadUser, "", sec(40), claim9)
				r.log.remove(loadUser, "", sec(40.5), claim9)
			},
			want: map[string]int{},
		},
		"a claim pending when the fault cleared never served": {
			breakIt: func(r *run) {
				r.in.Claims = append(r.in.Claims, ClaimRecord{Namespace: testNS, Name: "c9", UID: claim9.UID, Requested: sec(15), Created: sec(15.01)})
				r.log.write("create", loadUser, "", sec(15), claim9)
				r.in.Final.Claims = append(r.in.Final.Claims, *claim9)
			},
			want: map[string]int{InvariantFaultRecovered: 1, InvariantClaimReady: 1, InvariantClaimOneSandbox: 1},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			r := cleanRun()
			tc.breakIt(r)
			got := Check(r.input())
			if diff := cmp.Diff(tc.want, got.ByInvariant); diff != "" {
				t.Fatalf("violations by invariant (-want +got):\n%s\nviolations:\n%s", diff, violations(got))
			}
			if tc.wantDetail != "" && !strings.Contains(violations(got), tc.wantDetail) {
				t.Errorf("no violation says %q:\n%s", tc.wantDetail, violations(got))
			}
		})
	}
}

// A pending claim that became Ready counts in its fault's recovery; the latest decides.
func TestCheckRecoveryIsTheLastReadyOfThePendingClaims(t *testing.T) {
	r := cleanRun()
	claim9 := newClaim("c9", "c9-uid")
	r.in.Claims = append(r.in.Claims,
		ClaimRecord{Namespace: testNS, Name: "c9", UID: claim9.UID, Requested: sec(19), Created: sec(19.01), Ready: sec(27)},
		// Deleted before it was served: owed nothing, left out.
		ClaimRecord{Namespace: testNS, Name: "c10", UID: "c10-uid", Requested: sec(19), Created: sec(19.01), DeleteRequested: sec(21)},
	)
	r.in.Faults = append(r.in.Faults, Fault{Kind: "leader-kill", Start: sec(26), End: sec(26.5)})
	got := Check(r.input())
	if diff := cmp.Diff(map[string]int{}, got.ByInvariant); diff != "" {
		t.Fatalf("violations (-want +got):\n%s\n%s", diff, violations(got))
	}
	want := map[string][]time.Duration{"leader-kill": {7 * time.Second, 500 * time.Millisecond}}
	if diff := cmp.Diff(want, got.Recovery); diff != "" {
		t.Errorf("recovery (-want +got):\n%s", diff)
	}
	if p := got.RecoveryPercentiles()["leader-kill"]; p.Count != 2 || p.P50 != 500*time.Millisecond || p.P99 != 7*time.Second {
		t.Errorf("recovery percentiles %+v, want p50 500ms, p99 7s", p)
	}
}

// A Ready the load generator's watch missed is taken from the audit log.
func TestCheckTakesReadyFromTheAuditLogWhenTheWatchMissedIt(t *testing.T) {
	r := cleanRun()
	r.in.Claims[1].Ready = time.Time{}
	got := Check(r.input())
	if len(got.Violations) > 0 {
		t.Fatalf("violations:\n%s", violations(got))
	}
	if want := sec(25.61).Sub(sec(20)); got.Recovery["leader-kill"][0] != want {
		t.Errorf("recovery %v, want %v (the Ready status write's answer)", got.Recovery["leader-kill"], want)
	}
}

// Without a Lease named, the writes of the operator are not checked, and the report says so.
func TestCheckWithoutALeaseSaysItSkippedTheLeaderCheck(t *testing.T) {
	r := cleanRun()
	r.in.LeaseName = ""
	r.log.write("patch", operatorUser, "", sec(30), memberGHI)
	got := Check(r.input())
	if len(got.Violations) > 0 {
		t.Fatalf("violations:\n%s", violations(got))
	}
	if len(got.Notes) != 1 || !strings.Contains(got.Notes[0], "stale-leader writes not checked") {
		t.Errorf("notes %q, want one saying the leader check was skipped", got.Notes)
	}
}

// Violations read in time order, those of the final state last.
func TestCheckOrdersViolationsInTime(t *testing.T) {
	r := cleanRun()
	r.log.write("patch", operatorUser, "a", sec(26), memberGHI)
	r.log.write("patch", operatorUser, "", sec(25.5), memberGHI)
	r.in.Final.Pools[0].Status.ReadyReplicas = 0
	got := Check(r.input())
	var order []string
	for _, v := range got.Violations {
		order = append(order, v.Invariant)
	}
	want := []string{InvariantKnownWriter, InvariantStaleLeaderWrite, InvariantPoolAtReplicas}
	if diff := cmp.Diff(want, order); diff != "" {
		t.Errorf("order (-want +got):\n%s", diff)
	}
}

func TestReplicaFromGroups(t *testing.T) {
	cases := map[string]struct {
		groups []string
		want   string
	}{
		"no groups":        {want: ""},
		"no replica group": {groups: []string{"system:authenticated", "system:masters"}, want: ""},
		"a replica group":  {groups: []string{"system:authenticated", "sandgate.dev/replica:b"}, want: "b"},
		"an empty name":    {groups: []string{"sandgate.dev/replica:"}, want: ""},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := ReplicaFromGroups(tc.groups); got != tc.want {
				t.Errorf("ReplicaFromGroups(%q) = %q, want %q", tc.groups, got, tc.want)
			}
		})
	}
}

func violations(r Report) string {
	var b strings.Builder
	for _, v := range r.Violations {
		b.WriteString("  " + v.String() + "\n")
	}
	return b.String()
}

// policyRun is cleanRun with a ClaimPolicy whose status and ledger show the final claims
// exactly: c1, created by the load (tenant "load"), and c2, whose creator no tenant names.
func policyRun() *run {
	r := cleanRun()
	f := &r.in.Final
	f.Claims[0].Annotations[agentsv1beta1.AnnotationCreator] = loadUser
	f.Claims[1].Annotations[agentsv1beta1.AnnotationCreator] = "someone"
	p := tenancyv1alpha1.ClaimPolicy{ObjectMeta: metav1.ObjectMeta{Name: "quotas", Namespace: testNS},
		Spec: tenancyv1alpha1.ClaimPolicySpec{Tenants: []tenancyv1alpha1.Tenant{{Name: "load",
			Subjects: []tenancyv1alpha1.Subject{{Kind: tenancyv1alpha1.SubjectUser, Name: loadUser}}}}}}
	p.Status.Usage = tenancyv1alpha1.Usage{Claims: 2, Pools: []tenancyv1alpha1.PoolUsage{{PoolName: pool.Name, Claims: 2}}}
	p.Status.Tenants = []tenancyv1alpha1.TenantStatus{{Name: "load", Usage: tenancyv1alpha1.Usage{Claims: 1}}}
	p.Status.Unnamed = &tenancyv1alpha1.TenantStatus{Name: tenancyv1alpha1.UnnamedTenant, Usage: tenancyv1alpha1.Usage{Claims: 1}}
	f.ClaimPolicies = []tenancyv1alpha1.ClaimPolicy{p}
	f.ClaimLedgers = []tenancyv1alpha1.ClaimLedger{
		{ObjectMeta: metav1.ObjectMeta{Name: "quotas.load", Namespace: testNS}, Spec: tenancyv1alpha1.ClaimLedgerSpec{PolicyName: "quotas", Tenant: "load"},
			Status: tenancyv1alpha1.ClaimLedgerStatus{Counted: []tenancyv1alpha1.LedgerCount{{Tenant: "load", Claims: 1}}}},
	}
	return r
}

// A ClaimPolicy whose status or ledger differs from the claims that exist is reported, by
// the limit that differs; one that matches is not.
func TestCheckPolicyUsageIsTheTruth(t *testing.T) {
	if got := Check(policyRun().input()); len(got.Violations) > 0 {
		t.Fatalf("violations of an exact policy:\n%s", violations(got))
	}
	for name, tc := range map[string]struct {
		breakIt func(f *State)
		want    string
	}{
		"a claim too many":             {func(f *State) { f.ClaimPolicies[0].Status.Claims = 3 }, "claims: the status shows 3, 2 exist"},
		"a reservation left":           {func(f *State) { f.ClaimPolicies[0].Status.Reserved = 1 }, "claims reserved: the status shows 1, 0 exist"},
		"a pool's slot leaked":         {func(f *State) { f.ClaimPolicies[0].Status.Pools[0].Claims = 1 }, "claims of pool " + pool.Name + ": the status shows 1, 2 exist"},
		"a tenant's claim not counted": {func(f *State) { f.ClaimPolicies[0].Status.Tenants[0].Claims = 0 }, "claims of tenant load: the status shows 0, 1 exist"},
		"a ledger's reservation never ended": {func(f *State) {
			f.ClaimLedgers[0].Status.Reservations = []tenancyv1alpha1.Reservation{{ID: "r1", Tenant: "load"}}
		}, "1 reservations left"},
		"a ledger counting a claim that is gone": {func(f *State) { f.ClaimLedgers[0].Status.Counted[0].Claims = 2 }, "counts 2 claims, 1 exist"},
	} {
		t.Run(name, func(t *testing.T) {
			r := policyRun()
			tc.breakIt(&r.in.Final)
			got := Check(r.input())
			if len(got.Violations) != 1 || got.Violations[0].Invariant != InvariantPolicyUsage || !strings.Contains(got.Violations[0].Detail, tc.want) {
				t.Errorf("violations:\n%s\nwant one %s saying %q", violations(got), InvariantPolicyUsage, tc.want)
			}
		})
	}
}
