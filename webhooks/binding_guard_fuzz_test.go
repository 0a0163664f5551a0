package webhooks_test

import (
	"encoding/json"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/api/equality"

	"github.com/sandgate-dev/sandgate/api/policy"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
	"github.com/sandgate-dev/sandgate/webhooks"
)

// FuzzBindingGuard sends the guard arbitrary Sandbox updates, from the operator or a user,
// against a real claim (created by another tenant), pool and template. Whatever the update,
// the guard does not panic, and what it admits keeps the promises: nobody but the operator
// binds or changes a pool member, a warm binding takes only a Sandbox whose blueprint hashes
// to the claim's stamp, no user sets, changes or removes a reserved key of a Sandbox's
// metadata (the labels its pod is selected by among them), and no user but the claim's
// creator changes the spec of the claim's Sandbox.
// `go test` runs the seeds; `go test -fuzz FuzzBindingGuard ./webhooks` explores further.
func FuzzBindingGuard(f *testing.F) {
	fx := newGuardFixture()
	claim := stampedClaim("c1", "uid-1", fx.hash).Annotation(agentsv1beta1.AnnotationCreator, "alice").Obj()
	member := fx.member
	bound := boundTo(member, claim, true, true)
	stale := member.DeepCopy()
	stale.Spec.PodTemplate.Spec.Containers[0].Image = "attacker.example/evil:1"
	withLabel := func(sb *agentsv1beta1.Sandbox, k, v string) *agentsv1beta1.Sandbox {
		out := sb.DeepCopy()
		if v == "" {
			delete(out.Labels, k)
			return out
		}
		if out.Labels == nil {
			out.Labels = map[string]string{}
		}
		out.Labels[k] = v
		return out
	}
	suspended := bound.DeepCopy()
	suspended.Spec.OperatingMode = agentsv1beta1.OperatingModeSuspended
	forgedExtras := member.DeepCopy()
	forgedExtras.Annotations = map[string]string{"conversion.sandgate.dev/v1alpha1-fields": `{"x":1}`}
	for _, pair := range [][2]*agentsv1beta1.Sandbox{
		{member, bound}, {stale, boundTo(stale, claim, true, true)}, {member, stale}, {bound, member},
		{boundTo(member, claim, false, true), bound}, {member, boundTo(member, claim, true, false)},
		{member, withLabel(member, agentsv1beta1.LabelSandboxTemplateRefHash, "")},
		{member, withLabel(member, agentsv1beta1.LabelLaunchType, agentsv1beta1.LaunchTypeCold)},
		{bound, withLabel(bound, agentsv1beta1.LabelTemplateUID, "forged")},
		{member, forgedExtras}, {bound, suspended},
	} {
		oldJSON, _ := json.Marshal(pair[0])
		newJSON, _ := json.Marshal(pair[1])
		f.Add(string(oldJSON), string(newJSON), true)
		f.Add(string(oldJSON), string(newJSON), false)
	}
	reader := fakeClient(claim, fx.pool, fx.tmpl)
	w := &webhooks.BindingGuard{Cache: reader, APIReader: reader, OperatorUser: operatorUser}

	f.Fuzz(func(t *testing.T, oldJSON, newJSON string, byOperator bool) {
		var oldSB, newSB agentsv1beta1.Sandbox
		if json.Unmarshal([]byte(oldJSON), &oldSB) != nil || json.Unmarshal([]byte(newJSON), &newSB) != nil {
			return
		}
		oldSB.Namespace, newSB.Namespace = "ns", "ns"
		user := someUser
		if byOperator {
			user = operatorUser
		}
		if _, err := w.ValidateUpdate(request(user, admissionv1.Update), &oldSB, &newSB); err != nil {
			return
		}
		oldRef, oldUID := webhooks.ClaimBindingOf(&oldSB)
		newRef, newUID := webhooks.ClaimBindingOf(&newSB)
		binds := newRef != nil && (oldRef == nil || oldRef.UID != newRef.UID) || newUID != "" && newUID != oldUID
		if binds {
			if !byOperator {
				t.Fatalf("a user's binding was admitted: %s -> %s", oldJSON, newJSON)
			}
			if got := policy.SandboxHash(&oldSB); got != fx.hash {
				t.Fatalf("a Sandbox hashing to %s was bound to a claim stamped %s", got, fx.hash)
			}
		}
		if byOperator {
			return
		}
		if policy.ControllerOf(&oldSB, policy.PoolKind) != nil && !equality.Semantic.DeepEqual(oldSB.Spec, newSB.Spec) {
			t.Fatalf("a user changed the spec of a pool member: %s -> %s", oldJSON, newJSON)
		}
		for _, m := range [][2]map[string]string{{oldSB.Labels, newSB.Labels}, {oldSB.Annotations, newSB.Annotations}} {
			for k := range mergedKeys(m[0], m[1]) {
				if agentsv1beta1.IsReservedKey(k) && m[0][k] != m[1][k] {
					t.Fatalf("a user changed the reserved key %s: %s -> %s", k, oldJSON, newJSON)
				}
				if _, inOld := m[0][k]; agentsv1beta1.IsReservedKey(k) && inOld != hasKey(m[1], k) {
					t.Fatalf("a user set or removed the reserved key %s: %s -> %s", k, oldJSON, newJSON)
				}
			}
		}
		if ref := policy.ControllerOf(&oldSB, policy.ClaimKind); ref != nil && ref.UID == claim.UID && ref.Name == claim.Name &&
			!equality.Semantic.DeepEqual(oldSB.Spec, newSB.Spec) {
			t.Fatalf("%s changed the spec of alice's claim's Sandbox: %s -> %s", someUser, oldJSON, newJSON)
		}
	})
}

func mergedKeys(a, b map[string]string) map[string]bool {
	out := map[string]bool{}
	for k := range a {
		out[k] = true
	}
	for k := range b {
		out[k] = true
	}
	return out
}

func hasKey(m map[string]string, k string) bool {
	_, ok := m[k]
	return ok
}
