package webhooks_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
	"github.com/sandgate-dev/sandgate/internal/testing/builders"
	"github.com/sandgate-dev/sandgate/webhooks"
)

// A claim's deletion ends its Sandbox: no propagation its creator chooses orphans it.
func TestValidateClaimDeletion(t *testing.T) {
	claim := builders.MakeClaim("c", "ns", "pool").Obj()
	withFinalizer := func(f ...string) *extv1beta1.SandboxClaim {
		c := claim.DeepCopy()
		c.Finalizers = f
		return c
	}
	tests := map[string]struct {
		opts  *metav1.DeleteOptions
		claim *extv1beta1.SandboxClaim
		want  []string
	}{
		"no options":             {claim: claim},
		"background":             {opts: &metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)}, claim: claim},
		"foreground":             {opts: &metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationForeground)}, claim: claim},
		"orphan":                 {opts: &metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationOrphan)}, claim: claim, want: []string{"Forbidden propagationPolicy"}},
		"orphanDependents":       {opts: &metav1.DeleteOptions{OrphanDependents: ptr.To(true)}, claim: claim, want: []string{"Forbidden orphanDependents"}},
		"orphanDependents=false": {opts: &metav1.DeleteOptions{OrphanDependents: ptr.To(false)}, claim: withFinalizer(metav1.FinalizerOrphanDependents)},
		"the orphan finalizer, no policy": {claim: withFinalizer("example.com/x", metav1.FinalizerOrphanDependents),
			want: []string{"Forbidden metadata.finalizers[1]"}},
		"the orphan finalizer, background overrides it": {opts: &metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)},
			claim: withFinalizer(metav1.FinalizerOrphanDependents)},
		"the foreground finalizer first": {claim: withFinalizer(metav1.FinalizerDeleteDependents, metav1.FinalizerOrphanDependents)},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, summary(webhooks.ValidateClaimDeletion(tc.opts, tc.claim))); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// A claim's creator adds no owner reference and no finalizer to it; what it had stays.
func TestValidateClaimReferences(t *testing.T) {
	ref := metav1.OwnerReference{APIVersion: "extensions.agents.x-k8s.io/v1beta1", Kind: "SandboxClaim", Name: "victim", UID: "u1"}
	blocking := ref
	blocking.BlockOwnerDeletion = ptr.To(true)
	claim := func(refs []metav1.OwnerReference, finalizers ...string) *extv1beta1.SandboxClaim {
		c := builders.MakeClaim("c", "ns", "pool").Obj()
		c.OwnerReferences, c.Finalizers = refs, finalizers
		return c
	}
	tests := map[string]struct {
		newClaim, oldClaim *extv1beta1.SandboxClaim
		want               []string
	}{
		"a new claim with neither": {newClaim: claim(nil)},
		"a new claim with both": {newClaim: claim([]metav1.OwnerReference{blocking}, "example.com/never"),
			want: []string{"Forbidden metadata.ownerReferences[0]", "Forbidden metadata.finalizers[0]"}},
		"a new claim with the orphan finalizer": {newClaim: claim(nil, metav1.FinalizerOrphanDependents),
			want: []string{"Forbidden metadata.finalizers[0]"}},
		"an update keeping both":  {newClaim: claim([]metav1.OwnerReference{ref}, "a"), oldClaim: claim([]metav1.OwnerReference{ref}, "a")},
		"an update removing both": {newClaim: claim(nil), oldClaim: claim([]metav1.OwnerReference{ref}, "a")},
		"an update adding a finalizer": {newClaim: claim(nil, "a", "b"), oldClaim: claim(nil, "a"),
			want: []string{"Forbidden metadata.finalizers[1]"}},
		"an update making a reference blocking": {newClaim: claim([]metav1.OwnerReference{blocking}), oldClaim: claim([]metav1.OwnerReference{ref}),
			want: []string{"Forbidden metadata.ownerReferences[0]"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, summary(webhooks.ValidateClaimReferences(tc.newClaim, tc.oldClaim))); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// deleteRequestAs is a DELETE admission request of u carrying opts, as the API server sends it.
func deleteRequestAs(t *testing.T, u authenticationv1.UserInfo, opts *metav1.DeleteOptions) context.Context {
	raw, err := json.Marshal(opts)
	if err != nil {
		t.Fatal(err)
	}
	return admission.NewContextWithRequest(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		Operation: admissionv1.Delete, Namespace: "ns", UserInfo: u, Options: runtime.RawExtension{Raw: raw},
	}})
}

// Who may orphan a claim's Sandbox, and who may put references and finalizers on a claim:
// the operator, the platform and the Kubernetes controllers; not its creator.
func TestClaimDeletionAndReferencesByIdentity(t *testing.T) {
	alice := authenticationv1.UserInfo{Username: "alice", Groups: []string{"system:authenticated"}}
	admin := authenticationv1.UserInfo{Username: "root", Groups: []string{"system:masters"}}
	operator := authenticationv1.UserInfo{Username: operatorUser}
	gc := authenticationv1.UserInfo{Username: "system:serviceaccount:kube-system:generic-garbage-collector",
		Groups: []string{"system:serviceaccounts:kube-system"}}

	owned := builders.MakeClaim("c", "ns", "pool").Annotation(agentsv1beta1.AnnotationCreator, "alice").Obj()
	legacy := builders.MakeClaim("old", "ns", "pool").Obj()
	reader := fakeClient()
	w := &webhooks.ClaimWebhook{Cache: reader, APIReader: reader, OperatorUser: operatorUser}
	orphan := &metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationOrphan)}

	tests := map[string]struct {
		claim      *extv1beta1.SandboxClaim
		user       authenticationv1.UserInfo
		wantOrphan int32
		wantRefs   int32
	}{
		"its creator":                           {owned, alice, 422, 422},
		"its creator, on a claim with no owner": {legacy, alice, 422, 422},
		"a cluster admin":                       {owned, admin, 200, 200},
		"the operator":                          {owned, operator, 200, 200},
		"the garbage collector":                 {owned, gc, 200, 200},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := w.ValidateDelete(deleteRequestAs(t, tc.user, orphan), tc.claim)
			if diff := cmp.Diff(tc.wantOrphan, code(err)); diff != "" {
				t.Errorf("orphaning delete (-want +got):\n%s\nerror: %v", diff, err)
			}
			_, err = w.ValidateDelete(deleteRequestAs(t, tc.user, &metav1.DeleteOptions{}), tc.claim)
			if code(err) != 200 {
				t.Errorf("plain delete: %d (%v), want 200", code(err), err)
			}
			created := tc.claim.DeepCopy()
			created.Annotations = nil
			created.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "x", UID: "u"}}
			err = w.Default(requestAs(tc.user, admissionv1.Create), created)
			if diff := cmp.Diff(tc.wantRefs, code(err)); diff != "" {
				t.Errorf("creating with an owner reference (-want +got):\n%s\nerror: %v", diff, err)
			}
			changed := tc.claim.DeepCopy()
			changed.Finalizers = []string{"example.com/never"}
			_, err = w.ValidateUpdate(requestAs(tc.user, admissionv1.Update), tc.claim, changed)
			if diff := cmp.Diff(tc.wantRefs, code(err)); diff != "" {
				t.Errorf("adding a finalizer (-want +got):\n%s\nerror: %v", diff, err)
			}
		})
	}
}
