package check

import (
	"fmt"
	"math"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	"github.com/sandgate-dev/sandgate/api/policy"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
	"github.com/sandgate-dev/sandgate/internal/testing/builders"
)

// The histories of the tests are laid out in seconds from t0.
var t0 = time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)

func sec(s float64) time.Time { return t0.Add(time.Duration(math.Round(s*1e6)) * time.Microsecond) }

const (
	testNS       = "soak"
	operatorUser = "system:serviceaccount:sandgate-system:sandgate"
	loadUser     = "soak-load"
	gcUser       = "system:serviceaccount:kube-system:generic-garbage-collector"
	leaseNS      = "sandgate-system"
	leaseName    = "sandgate-leader"
	// answerAfter is how long the API server takes to answer every request of the tests.
	answerAfter = 10 * time.Millisecond
)

// groupsOf are the groups of a request of replica ("" for a client of no replica).
func groupsOf(replica string) []string {
	if replica == "" {
		return []string{"system:authenticated"}
	}
	return []string{"system:authenticated", ReplicaGroupPrefix + replica}
}

// auditLog builds an audit log by hand, one successful request at a time. A write that logs
// its object gets a resourceVersion that grows with the time the write is received (the
// microseconds since t0), as etcd's revisions grow with the time of the writes: a test may
// add writes in any order.
type auditLog struct {
	events []AuditEvent
}

// where an object lives, for the object reference of an event.
func resourceOf(obj runtime.Object) (gvk metav1.GroupVersionKind, resource string) {
	switch obj.(type) {
	case *agentsv1beta1.Sandbox:
		return metav1.GroupVersionKind{Group: "agents.x-k8s.io", Version: "v1beta1", Kind: "Sandbox"}, "sandboxes"
	case *extv1beta1.SandboxClaim:
		return metav1.GroupVersionKind{Group: "extensions.agents.x-k8s.io", Version: "v1beta1", Kind: "SandboxClaim"}, "sandboxclaims"
	case *coordinationv1.Lease:
		return metav1.GroupVersionKind{Group: "coordination.k8s.io", Version: "v1", Kind: "Lease"}, "leases"
	}
	panic(fmt.Sprintf("no resource for %T", obj))
}

// write logs a successful write of obj ("patch", or "patch/status" for a subresource) by
// user from replica, received at t, with the object as the response.
func (l *auditLog) write(verb, user, replica string, t time.Time, obj client.Object) *AuditEvent {
	verb, sub, _ := strings.Cut(verb, "/")
	gvk, resource := resourceOf(obj)
	cp := obj.DeepCopyObject().(client.Object)
	cp.SetResourceVersion(fmt.Sprint(t.Sub(t0).Microseconds() + 1))
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(cp)
	if err != nil {
		panic(err)
	}
	resp := &unstructured.Unstructured{Object: content}
	resp.SetAPIVersion(gvk.Group + "/" + gvk.Version)
	resp.SetKind(gvk.Kind)
	code := 200
	if verb == "create" {
		code = 201
	}
	return l.add(AuditEvent{
		Verb: verb, User: user, Groups: groupsOf(replica), APIGroup: gvk.Group, APIVersion: gvk.Version,
		Resource: resource, Subresource: sub, Namespace: obj.GetNamespace(), Name: obj.GetName(),
		Code: code, Received: t, Response: resp,
	})
}

// remove logs a successful delete of obj answered with a Status naming its UID, as the API
// server answers a delete of a custom resource.
func (l *auditLog) remove(user, replica string, t time.Time, obj client.Object) *AuditEvent {
	gvk, resource := resourceOf(obj)
	return l.add(AuditEvent{
		Verb: "delete", User: user, Groups: groupsOf(replica), APIGroup: gvk.Group, APIVersion: gvk.Version,
		Resource: resource, Namespace: obj.GetNamespace(), Name: obj.GetName(), Code: 200, Received: t,
		Response: &unstructured.Unstructured{Object: map[string]any{
			"kind": "Status", "apiVersion": "v1", "status": "Success",
			"details": map[string]any{"name": obj.GetName(), "group": gvk.Group, "kind": strings.ToLower(resource), "uid": string(obj.GetUID())},
		}},
	})
}

// meta logs a write the policy logs at level Metadata: who, what, no object.
func (l *auditLog) meta(verb, user, replica string, t time.Time, group, resource, ns, name string) *AuditEvent {
	verb, sub, _ := strings.Cut(verb, "/")
	return l.add(AuditEvent{
		Verb: verb, User: user, Groups: groupsOf(replica), APIGroup: group, Resource: resource, Subresource: sub,
		Namespace: ns, Name: name, Code: map[bool]int{true: 201, false: 200}[verb == "create"], Received: t,
	})
}

func (l *auditLog) add(e AuditEvent) *AuditEvent {
	e.AuditID = fmt.Sprintf("audit-%03d", len(l.events)+1)
	e.Completed = e.Received.Add(answerAfter)
	l.events = append(l.events, e)
	return &l.events[len(l.events)-1]
}

// lease logs a write of the leader election Lease by replica naming holder, renewed at t for
// 15 seconds.
func (l *auditLog) lease(verb, replica, holder string, t time.Time) *AuditEvent {
	lease := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: leaseName, Namespace: leaseNS, UID: "lease-uid"},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity: ptr.To(holder), LeaseDurationSeconds: ptr.To[int32](15),
			AcquireTime: &metav1.MicroTime{Time: t}, RenewTime: &metav1.MicroTime{Time: t},
		},
	}
	return l.write(verb, operatorUser, replica, t, lease)
}

// The objects of the tests: one template, one pool of one member.
var (
	template = builders.MakeTemplate("tmpl", testNS).UID("tmpl-uid").Obj()
	pool     = builders.MakePool("pool", testNS, "tmpl").Replicas(1).UID("pool-uid").Obj()
	// stamp is the template's version: every claim's stamp, every member's label.
	stamp     = policy.TemplateHash(template)
	poolGVK   = extv1beta1.GroupVersion.WithKind("SandboxWarmPool")
	claimGVK  = extv1beta1.GroupVersion.WithKind("SandboxClaim")
	sbGVK     = agentsv1beta1.GroupVersion.WithKind("Sandbox")
	tmplGVK   = extv1beta1.GroupVersion.WithKind("SandboxTemplate")
	readyTrue = metav1.Condition{Type: agentsv1beta1.ConditionReady, Status: metav1.ConditionTrue, Reason: agentsv1beta1.ReasonDependenciesReady}
)

// member is a pool member as the operator builds it.
func member(name string, uid types.UID) *agentsv1beta1.Sandbox {
	return builders.MakeSandbox(name, testNS).UID(uid).Blueprint(policy.TemplateBlueprint(template)).
		Label(agentsv1beta1.LabelSandboxTemplateHash, stamp).
		Label(agentsv1beta1.LabelWarmPoolSandbox, agentsv1beta1.NameHash(pool.Name)).
		ControlledBy(pool, poolGVK).Obj()
}

// bindTo is sb bound to claim, as the bind patch leaves it.
func bindTo(sb *agentsv1beta1.Sandbox, claim *extv1beta1.SandboxClaim) *agentsv1beta1.Sandbox {
	sb = sb.DeepCopy()
	sb.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(claim, claimGVK)}
	delete(sb.Labels, agentsv1beta1.LabelWarmPoolSandbox)
	sb.Labels[agentsv1beta1.LabelClaimUID] = string(claim.UID)
	sb.Labels[agentsv1beta1.LabelLaunchType] = agentsv1beta1.LaunchTypeWarm
	return sb
}

// unbound is sb with its binding taken off.
func unbound(sb *agentsv1beta1.Sandbox) *agentsv1beta1.Sandbox {
	sb = sb.DeepCopy()
	sb.OwnerReferences = nil
	delete(sb.Labels, agentsv1beta1.LabelClaimUID)
	return sb
}

// coldFor is the Sandbox a cold start builds for claim.
func coldFor(claim *extv1beta1.SandboxClaim, uid types.UID) *agentsv1beta1.Sandbox {
	return builders.MakeSandbox(claim.Name, testNS).UID(uid).Blueprint(policy.TemplateBlueprint(template)).
		Label(agentsv1beta1.LabelSandboxTemplateHash, stamp).
		Label(agentsv1beta1.LabelClaimUID, string(claim.UID)).
		Label(agentsv1beta1.LabelLaunchType, agentsv1beta1.LaunchTypeCold).
		ControlledBy(claim, claimGVK).Obj()
}

// newClaim is a claim as admission returns it, stamped.
func newClaim(name string, uid types.UID) *extv1beta1.SandboxClaim {
	return builders.MakeClaim(name, testNS, pool.Name).UID(uid).Annotation(agentsv1beta1.AnnotationSandboxTemplateHash, stamp).Obj()
}

// readyClaim is claim served by sb.
func readyClaim(claim *extv1beta1.SandboxClaim, sb string) *extv1beta1.SandboxClaim {
	claim = claim.DeepCopy()
	claim.Status.Conditions = []metav1.Condition{readyTrue}
	claim.Status.Sandbox.Name = sb
	return claim
}

// podOf is the pod of sb.
func podOf(sb *agentsv1beta1.Sandbox) corev1.Pod {
	pod := builders.MakePod(sb.Name, testNS).Label(agentsv1beta1.LabelSandboxUID, string(sb.UID)).Obj()
	pod.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(sb, sbGVK)}
	return *pod
}

// run is a soak's record, built by hand: cleanRun's, which a test then breaks.
type run struct {
	log auditLog
	in  Input
}

func (r *run) input() Input {
	in := r.in
	in.Audit = r.log.events
	return in
}

// The objects of cleanRun.
var (
	claim1, claim2, claim3 = newClaim("c1", "c1-uid"), newClaim("c2", "c2-uid"), newClaim("c3", "c3-uid")
	memberABC              = member("pool-abc", "abc-uid")
	memberDEF              = member("pool-def", "def-uid")
	memberGHI              = member("pool-ghi", "ghi-uid")
	cold2                  = coldFor(claim2, "cold2-uid")
)

// cleanRun is a soak in which nothing breaks: replica a leads from 0 s and is killed at
// 10 s (last renewal at 9 s, so its Lease runs out at 24 s); replica b takes over at 25 s.
// Claim c1 is served warm at 2 s; c2, created during the fault, is served cold by b at
// 25.6 s; c3 is served warm at 30.2 s and deleted at 35 s.
func cleanRun() *run {
	r := &run{}
	l := &r.log
	l.lease("create", "a", "a_1", sec(0))
	for _, t := range []float64{3, 6, 9} {
		l.lease("update", "a", "a_1", sec(t))
	}
	l.write("create", operatorUser, "a", sec(1), memberABC)
	l.meta("create", operatorUser, "a", sec(1.2), "", "pods", testNS, memberABC.Name)
	l.write("create", loadUser, "", sec(2), claim1)
	l.write("patch", operatorUser, "a", sec(2.1), bindTo(memberABC, claim1))
	l.meta("patch", operatorUser, "a", sec(2.15), "", "pods", testNS, memberABC.Name)
	l.write("patch/status", operatorUser, "a", sec(2.2), readyClaim(claim1, memberABC.Name))
	l.write("create", operatorUser, "a", sec(3), memberDEF)
	l.meta("create", operatorUser, "a", sec(3.2), "", "pods", testNS, memberDEF.Name)
	l.meta("patch/status", operatorUser, "a", sec(3.5), "extensions.agents.x-k8s.io", "sandboxwarmpools", testNS, pool.Name)
	l.meta("create", operatorUser, "a", sec(4), "", "events", testNS, "pool.1")

	l.write("create", loadUser, "", sec(12), claim2)
	for _, t := range []float64{25, 30, 35, 40, 45, 50} {
		l.lease("update", "b", "b_1", sec(t))
	}
	l.write("create", operatorUser, "b", sec(25.2), cold2)
	l.meta("create", operatorUser, "b", sec(25.3), "", "pods", testNS, cold2.Name)
	l.write("patch/status", operatorUser, "b", sec(25.6), readyClaim(claim2, cold2.Name))

	l.write("create", loadUser, "", sec(30), claim3)
	l.write("patch", operatorUser, "b", sec(30.1), bindTo(memberDEF, claim3))
	l.write("patch/status", operatorUser, "b", sec(30.2), readyClaim(claim3, memberDEF.Name))
	l.write("create", operatorUser, "b", sec(31), memberGHI)
	l.meta("create", operatorUser, "b", sec(31.1), "", "pods", testNS, memberGHI.Name)
	l.remove(loadUser, "", sec(35), claim3)
	l.remove(gcUser, "", sec(35.1), memberDEF)
	l.meta("delete", gcUser, "", sec(35.2), "", "pods", testNS, memberDEF.Name)

	readyPool := pool.DeepCopy()
	readyPool.Status.Replicas, readyPool.Status.ReadyReplicas = 1, 1
	r.in = Input{
		Claims: []ClaimRecord{
			{Namespace: testNS, Name: "c1", UID: claim1.UID, Requested: sec(2), Created: sec(2.01), Ready: sec(2.25)},
			{Namespace: testNS, Name: "c2", UID: claim2.UID, Requested: sec(12), Created: sec(12.01), Ready: sec(25.65)},
			{Namespace: testNS, Name: "c3", UID: claim3.UID, Requested: sec(30), Created: sec(30.01), Ready: sec(30.25), DeleteRequested: sec(35)},
		},
		Faults: []Fault{{Kind: "leader-kill", Start: sec(10), End: sec(20), Detail: "SIGKILL replica a"}},
		Final: State{
			Claims:    []extv1beta1.SandboxClaim{*readyClaim(claim1, memberABC.Name), *readyClaim(claim2, cold2.Name)},
			Sandboxes: []agentsv1beta1.Sandbox{*bindTo(memberABC, claim1), *cold2.DeepCopy(), *memberGHI.DeepCopy()},
			Pools:     []extv1beta1.SandboxWarmPool{*readyPool},
			Templates: []extv1beta1.SandboxTemplate{*template},
			Pods:      []corev1.Pod{podOf(memberABC), podOf(cold2), podOf(memberGHI), *builders.MakePod("unrelated", testNS).Obj()},
			NetworkPolicies: []networkingv1.NetworkPolicy{{ObjectMeta: metav1.ObjectMeta{
				Name: "tmpl-network-policy", Namespace: testNS,
				OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(template, tmplGVK)},
			}}},
		},
		OperatorUser:   operatorUser,
		LeaseNamespace: leaseNS,
		LeaseName:      leaseName,
		LoadStopped:    sec(50),
	}
	return r
}
