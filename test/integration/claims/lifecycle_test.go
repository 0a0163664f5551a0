//go:build integration

package claims_test

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
	"github.com/sandgate-dev/sandgate/internal/testing/builders"
)

// TestClaimExpiry: each way a claim ends, and what its shutdownPolicy leaves behind.
func TestClaimExpiry(t *testing.T) {
	e := setup(t, 0)
	e.create(builders.MakeTemplate("tmpl", e.ns).Obj())
	e.create(builders.MakePool("pool", e.ns, "tmpl").Replicas(4).Obj())
	e.waitPoolReady("pool", 4)

	tests := map[string]struct {
		lifecycle func() *extv1beta1.Lifecycle
		// finish makes the Sandbox's pod succeed, so that a TTL after finishing counts.
		finish        bool
		wantClaimGone bool
	}{
		"shutdownTime with Retain deletes only the sandbox": {
			lifecycle: func() *extv1beta1.Lifecycle {
				return &extv1beta1.Lifecycle{ShutdownTime: &metav1.Time{Time: time.Now().Add(4 * time.Second)}, ShutdownPolicy: extv1beta1.ClaimShutdownPolicyRetain}
			},
		},
		"shutdownTime with Delete deletes the claim and its sandbox": {
			lifecycle: func() *extv1beta1.Lifecycle {
				return &extv1beta1.Lifecycle{ShutdownTime: &metav1.Time{Time: time.Now().Add(4 * time.Second)}, ShutdownPolicy: extv1beta1.ClaimShutdownPolicyDelete}
			},
			wantClaimGone: true,
		},
		"shutdownTime with DeleteForeground deletes the claim after its sandbox": {
			lifecycle: func() *extv1beta1.Lifecycle {
				return &extv1beta1.Lifecycle{ShutdownTime: &metav1.Time{Time: time.Now().Add(4 * time.Second)}, ShutdownPolicy: extv1beta1.ClaimShutdownPolicyDeleteForeground}
			},
			wantClaimGone: true,
		},
		"ttlSecondsAfterFinished counts from the sandbox finishing": {
			lifecycle: func() *extv1beta1.Lifecycle {
				return &extv1beta1.Lifecycle{TTLSecondsAfterFinished: ptr.To[int32](1), ShutdownPolicy: extv1beta1.ClaimShutdownPolicyRetain}
			},
			finish: true,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			e := e.sub(t)
			claim := builders.MakeClaim(claimName(t), e.ns, "pool").Obj()
			claim.Spec.Lifecycle = tc.lifecycle()
			e.create(claim)
			_, sb := e.waitClaimReady(claim.Name)
			if tc.finish {
				// kwok leaves running pods alone; finish it as a kubelet would report it.
				pod := &corev1.Pod{}
				e.g.Expect(e.Client.Get(e.ctx(), e.key(sb.Name), pod)).To(Succeed())
				e.g.Expect(e.Client.Status().Patch(e.ctx(), pod, client.RawPatch("application/merge-patch+json",
					[]byte(`{"status":{"phase":"Succeeded","conditions":[{"type":"Ready","status":"False"}]}}`)))).To(Succeed())
				e.eventually(func(g Gomega) {
					c := e.claim(g, claim.Name)
					g.Expect(meta.IsStatusConditionTrue(c.Status.Conditions, agentsv1beta1.ConditionFinished)).To(BeTrue(), "Finished mirrored")
				})
			} else {
				e.consistently(time.Second, func(g Gomega) {
					g.Expect(ready(e.claim(g, claim.Name).Status.Conditions)).To(BeTrue(), "expired early")
				})
			}
			e.eventually(func(g Gomega) {
				err := e.Client.Get(e.ctx(), e.key(sb.Name), &agentsv1beta1.Sandbox{})
				g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "sandbox still there: %v", err)
				c := &extv1beta1.SandboxClaim{}
				err = e.Client.Get(e.ctx(), e.key(claim.Name), c)
				if tc.wantClaimGone {
					g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "claim still there: %v", err)
					return
				}
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(readyReason(c.Status.Conditions)).To(Equal(extv1beta1.ReasonClaimExpired))
				g.Expect(c.Status.Sandbox.Name).To(Equal(sb.Name))
			})
			if !tc.wantClaimGone {
				e.eventually(func(g Gomega) {
					g.Expect(e.claimEvents(g, claim.Name)).To(ContainElement(extv1beta1.EventClaimExpired))
				})
				// An expired claim is never served again.
				e.consistently(time.Second, func(g Gomega) {
					g.Expect(e.boundSandbox(g, e.claim(g, claim.Name))).To(BeNil())
				})
			}
		})
	}
	checkInvariants(e.g, e)
}

// TestSandboxMissing: a bound claim whose Sandbox is deleted reports it, and is not given
// another one.
func TestSandboxMissing(t *testing.T) {
	e := setup(t, 0)
	e.create(builders.MakeTemplate("tmpl", e.ns).Obj())
	e.create(builders.MakePool("pool", e.ns, "tmpl").Replicas(1).Obj())
	e.waitPoolReady("pool", 1)
	e.create(builders.MakeClaim("c", e.ns, "pool").Obj())
	_, sb := e.waitClaimReady("c")
	e.g.Expect(e.Client.Delete(e.ctx(), sb)).To(Succeed())
	e.eventually(func(g Gomega) {
		c := e.claim(g, "c")
		g.Expect(readyReason(c.Status.Conditions)).To(Equal(extv1beta1.ReasonSandboxMissing))
		g.Expect(c.Status.Sandbox.Name).To(Equal(sb.Name))
	})
	e.waitPoolReady("pool", 1)
	e.consistently(time.Second, func(g Gomega) {
		g.Expect(e.boundSandbox(g, e.claim(g, "c"))).To(BeNil())
	})
	checkInvariants(e.g, e)
}

func claimName(t *testing.T) string {
	h := agentsv1beta1.NameHash(t.Name())
	return "claim-" + h
}
