package webhooks_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"

	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
	"github.com/sandgate-dev/sandgate/internal/testing/builders"
	"github.com/sandgate-dev/sandgate/webhooks"
)

// A claim belongs to its recorded creator: who may change its spec or delete it.
func TestClaimOwnership(t *testing.T) {
	alice := authenticationv1.UserInfo{Username: "alice", Groups: []string{"system:authenticated"}}
	bob := authenticationv1.UserInfo{Username: "bob", Groups: []string{"system:authenticated"}}
	admin := authenticationv1.UserInfo{Username: "root", Groups: []string{"system:masters"}}
	operator := authenticationv1.UserInfo{Username: operatorUser}
	gc := authenticationv1.UserInfo{Username: "system:serviceaccount:kube-system:generic-garbage-collector",
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:kube-system"}}
	kcm := authenticationv1.UserInfo{Username: "system:kube-controller-manager"}
	platform := authenticationv1.UserInfo{Username: "pat", Groups: []string{"platform-team"}}

	owned := builders.MakeClaim("c", "ns", "pool").Annotation(agentsv1beta1.AnnotationCreator, "alice").Obj()
	legacy := builders.MakeClaim("old", "ns", "pool").Obj() // admitted before creators were recorded
	reader := fakeClient()
	w := &webhooks.ClaimWebhook{Cache: reader, APIReader: reader, OperatorUser: operatorUser,
		Authority: webhooks.Authority{PlatformGroups: []string{"system:masters", "platform-team"}}}

	tests := map[string]struct {
		claim      *extv1beta1.SandboxClaim
		user       authenticationv1.UserInfo
		wantDelete int32
		wantUpdate int32
	}{
		"its creator":                      {owned, alice, 200, 200},
		"another tenant":                   {owned, bob, 403, 403},
		"a cluster admin":                  {owned, admin, 200, 200},
		"a platform group's member":        {owned, platform, 200, 200},
		"the operator":                     {owned, operator, 200, 200},
		"the garbage collector":            {owned, gc, 200, 200},
		"kube-controller-manager":          {owned, kcm, 200, 200},
		"anyone, on a claim with no owner": {legacy, bob, 200, 200},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := w.ValidateDelete(requestAs(tc.user, admissionv1.Delete), tc.claim)
			if diff := cmp.Diff(tc.wantDelete, code(err)); diff != "" {
				t.Errorf("delete (-want +got):\n%s\nerror: %v", diff, err)
			}
			changed := tc.claim.DeepCopy()
			changed.Spec.Lifecycle = &extv1beta1.Lifecycle{ShutdownPolicy: extv1beta1.ClaimShutdownPolicyDelete}
			_, err = w.ValidateUpdate(requestAs(tc.user, admissionv1.Update), tc.claim, changed)
			if diff := cmp.Diff(tc.wantUpdate, code(err)); diff != "" {
				t.Errorf("spec update (-want +got):\n%s\nerror: %v", diff, err)
			}
		})
	}

	// The creator is immutable, whoever asks.
	forged := owned.DeepCopy()
	forged.Annotations[agentsv1beta1.AnnotationCreator] = "bob"
	for _, u := range []authenticationv1.UserInfo{alice, admin, operator} {
		if _, err := w.ValidateUpdate(requestAs(u, admissionv1.Update), owned, forged); code(err) != 422 {
			t.Errorf("%s changing the creator: %d (%v), want 422", u.Username, code(err), err)
		}
	}
}
