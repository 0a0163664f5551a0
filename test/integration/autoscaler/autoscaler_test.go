//go:build integration

package autoscaler_test

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	autoscalingv1alpha1 "github.com/sandgate-dev/sandgate/api/autoscaling/v1alpha1"
	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
	"github.com/sandgate-dev/sandgate/internal/demand"
	"github.com/sandgate-dev/sandgate/internal/testing/builders"
)

// A burst of claims raises the pool as admission sees them, before any member the burst
// needs could have started: no member of the pool can start until the test opens the gate,
// and the scale-up is there while every member still waits. Once members start, the
// autoscaler measures their start-up and every claim is served.
func TestBurstScalesThePoolUpBeforeItsMembersCouldStart(t *testing.T) {
	e := setup(t)
	e.gatedTemplate("tmpl")
	e.create(builders.MakePool("pool", e.ns, "tmpl").Replicas(1).Obj())
	e.create(builders.MakeAutoscaler("wpa", e.ns, "pool").Min(2).Max(60).TargetSpare(2).Obj())
	e.eventually(func(g Gomega) {
		g.Expect(e.replicas(g, "pool")).To(Equal(int32(2)), "the autoscaler takes the pool to its minimum")
		g.Expect(meta.IsStatusConditionTrue(e.autoscaler(g, "wpa").Status.Conditions, autoscalingv1alpha1.ConditionAbleToScale)).To(BeTrue())
	})

	claims := e.createClaims("burst", "pool", 20)
	var scaledTo int32
	e.eventually(func(g Gomega) {
		scaledTo = e.replicas(g, "pool")
		// No member was ever measured: the default start-up time, 5 s; 20 claims in the 10 s
		// window are 2 claims/s, 10 expected during a start-up, plus 2 spare.
		g.Expect(scaledTo).To(BeNumerically(">", 2))
		g.Expect(e.autoscalerEvents(g, "wpa", autoscalingv1alpha1.EventScaledUp)).To(BeNumerically(">=", 2))
	})
	// The order: the pool was scaled up while none of its members had started, nor any
	// Sandbox a claim of the burst got.
	for _, m := range e.members(e.g, "pool") {
		e.g.Expect(meta.IsStatusConditionTrue(m.Status.Conditions, agentsv1beta1.ConditionReady)).To(BeFalse(), "member %s", m.Name)
	}
	var list agentsv1beta1.SandboxList
	e.g.Expect(e.Client.List(e.ctx(), &list, client.InNamespace(e.ns))).To(Succeed())
	for _, sb := range list.Items {
		e.g.Expect(meta.IsStatusConditionTrue(sb.Status.Conditions, agentsv1beta1.ConditionReady)).To(BeFalse(), "sandbox %s", sb.Name)
	}
	a := e.autoscaler(e.g, "wpa")
	e.g.Expect(a.Status.Demand).NotTo(BeNil())
	e.g.Expect(a.Status.Demand.MemberStartupSamples).To(BeZero())
	e.g.Expect(a.Status.Demand.MemberStartupMilliseconds).To(Equal(demand.DefaultStartup.Milliseconds()))
	e.g.Expect(a.Status.LastScaleReason).To(HavePrefix(autoscalingv1alpha1.EventScaledUp + ": "))
	t.Logf("scaled to %d before any member started: %s", scaledTo, a.Status.LastScaleReason)

	e.openGate()
	e.eventually(func(g Gomega) {
		for _, name := range claims {
			c := &extv1beta1.SandboxClaim{}
			g.Expect(e.Client.Get(e.ctx(), e.key(name), c)).To(Succeed())
			g.Expect(meta.IsStatusConditionTrue(c.Status.Conditions, agentsv1beta1.ConditionReady)).To(BeTrue(), "claim %s", name)
		}
		s := e.autoscaler(g, "wpa").Status
		g.Expect(s.Demand).NotTo(BeNil())
		g.Expect(s.Demand.MemberStartupSamples).To(BeNumerically(">", 0), "members that started are measured")
	})
	checkInvariants(e.g, e)
}

// A schedule's window holds its minimum; when the window is gone the pool comes down to the
// autoscaler's minimum, not before the scale-down stabilization window has passed since the
// minimum was last in force.
func TestScheduleMinimumHoldsAndScaleDownWaitsForTheWindow(t *testing.T) {
	const window = 4 * time.Second
	e := setup(t)
	e.create(builders.MakeTemplate("tmpl", e.ns).Obj())
	e.create(builders.MakePool("pool", e.ns, "tmpl").Replicas(1).Obj())
	e.create(builders.MakeAutoscaler("wpa", e.ns, "pool").Min(1).Max(20).TargetSpare(0).
		ScaleDown(int32(window/time.Second), "100%", 0).
		Schedule("always", "00:00", "24:00", "Europe/Paris", 6).Obj())
	e.eventually(func(g Gomega) {
		g.Expect(e.replicas(g, "pool")).To(Equal(int32(6)))
		g.Expect(e.members(g, "pool")).To(HaveLen(6))
		a := e.autoscaler(g, "wpa")
		g.Expect(a.Status.ActiveSchedules).To(Equal([]string{"always"}))
		c := condition(a, autoscalingv1alpha1.ConditionScalingActive)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(autoscalingv1alpha1.ReasonScheduleMinimum))
	})

	removed := time.Now()
	e.patch(builders.MakeAutoscaler("wpa", e.ns, "pool").Obj(), `{"spec":{"schedules":null}}`)
	e.eventually(func(g Gomega) {
		g.Expect(e.replicas(g, "pool")).To(Equal(int32(1)))
		g.Expect(e.members(g, "pool")).To(HaveLen(1))
		g.Expect(e.autoscalerEvents(g, "wpa", autoscalingv1alpha1.EventScaledDown)).To(Equal(1))
	})
	a := e.autoscaler(e.g, "wpa")
	e.g.Expect(a.Status.LastScaleReason).To(HavePrefix(autoscalingv1alpha1.EventScaledDown + ": 6 -> 1"))
	// lastScaleTime has a resolution of one second.
	e.g.Expect(a.Status.LastScaleTime.Add(time.Second)).To(BeTemporally(">", removed.Add(window)),
		"scaled down %s after the schedule was removed, within the %s window", a.Status.LastScaleTime.Sub(removed), window)
	checkInvariants(e.g, e)
}

// Scaling the pool down never deletes a claimed member: a claim takes its member out of the
// pool (the member's controller reference moves to the claim), the pool counts and deletes
// only the members it controls, and it deletes each on condition that it is unchanged since
// its cache saw it. The autoscaler takes the pool to zero; the claims keep their Sandboxes.
func TestScaleDownNeverDeletesAClaimedMember(t *testing.T) {
	e := setup(t)
	e.create(builders.MakeTemplate("tmpl", e.ns).Obj())
	e.create(builders.MakePool("pool", e.ns, "tmpl").Replicas(1).Obj())
	e.create(builders.MakeAutoscaler("wpa", e.ns, "pool").Min(5).Max(10).TargetSpare(0).ScaleDown(1, "100%", 0).Obj())
	e.eventually(func(g Gomega) {
		members := e.members(g, "pool")
		g.Expect(members).To(HaveLen(5))
		for _, m := range members {
			g.Expect(meta.IsStatusConditionTrue(m.Status.Conditions, agentsv1beta1.ConditionReady)).To(BeTrue())
		}
	})

	claims := e.createClaims("keep", "pool", 3)
	bound := map[string]types.UID{}
	e.eventually(func(g Gomega) {
		var list agentsv1beta1.SandboxList
		g.Expect(e.Client.List(e.ctx(), &list, client.InNamespace(e.ns))).To(Succeed())
		for _, name := range claims {
			c := &extv1beta1.SandboxClaim{}
			g.Expect(e.Client.Get(e.ctx(), e.key(name), c)).To(Succeed())
			g.Expect(meta.IsStatusConditionTrue(c.Status.Conditions, agentsv1beta1.ConditionReady)).To(BeTrue(), "claim %s", name)
			for _, sb := range list.Items {
				if sb.Labels[agentsv1beta1.LabelClaimUID] == string(c.UID) {
					g.Expect(sb.Labels[agentsv1beta1.LabelLaunchType]).To(Equal("warm"), "claim %s got a pool member", name)
					bound[name] = sb.UID
				}
			}
		}
		g.Expect(bound).To(HaveLen(3))
	})

	e.patch(builders.MakeAutoscaler("wpa", e.ns, "pool").Obj(), `{"spec":{"minReplicas":0}}`)
	e.eventually(func(g Gomega) {
		g.Expect(e.replicas(g, "pool")).To(BeZero())
		g.Expect(e.members(g, "pool")).To(BeEmpty())
	})
	var list agentsv1beta1.SandboxList
	e.g.Expect(e.Client.List(e.ctx(), &list, client.InNamespace(e.ns))).To(Succeed())
	kept := map[string]types.UID{}
	for _, name := range claims {
		c := &extv1beta1.SandboxClaim{}
		e.g.Expect(e.Client.Get(e.ctx(), e.key(name), c)).To(Succeed())
		e.g.Expect(meta.IsStatusConditionTrue(c.Status.Conditions, agentsv1beta1.ConditionReady)).To(BeTrue(), "claim %s", name)
		for _, sb := range list.Items {
			if sb.Labels[agentsv1beta1.LabelClaimUID] == string(c.UID) {
				e.g.Expect(sb.DeletionTimestamp).To(BeNil(), "claim %s's Sandbox is being deleted", name)
				kept[name] = sb.UID
			}
		}
	}
	e.g.Expect(kept).To(Equal(bound), "every claim keeps the member it was given")
	checkInvariants(e.g, e)
}
