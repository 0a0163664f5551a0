//go:build integration

package sandbox_test

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
	"github.com/sandgate-dev/sandgate/internal/operator"
	"github.com/sandgate-dev/sandgate/internal/testing/builders"
)

// TestLifecycleEvents walks a Sandbox through create → Ready → suspend → resume → delete,
// its pods started by the kubelet-like profile (several pod status updates per start, each
// able to wake the Sandbox), and reads the Events the API server holds about it: exactly the
// public controller's lifecycle events, once per transition — a pod created and Ready per
// start, one suspension — and nothing for the deletion. With --disable-sandbox-events the
// Sandbox has no Events at all.
func TestLifecycleEvents(t *testing.T) {
	cases := map[string]struct {
		disable bool
		want    map[string]int32
	}{
		"events on": {want: map[string]int32{
			"Normal SandboxPodCreated": 2, // the first start and the resume
			"Normal SandboxReady":      2,
			"Normal SandboxSuspended":  1,
		}},
		"--disable-sandbox-events": {disable: true, want: map[string]int32{}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			e := setupWith(t, func(o *operator.Options) { o.DisableSandboxEvents = tc.disable })
			e.create(builders.MakeSandbox("life", e.ns).Service(true).Obj())
			uid := e.waitReady("life", readyPodService).UID

			e.patchSandbox("life", `{"spec":{"operatingMode":"Suspended"}}`)
			e.eventually(func(g Gomega) {
				sb := e.sandbox(g, "life")
				expectCondition(g, sb, agentsv1beta1.ConditionSuspended, wantCondition{Status: metav1.ConditionTrue, Reason: agentsv1beta1.ReasonPodTerminated})
				e.gone(g, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "life"}})
			})
			e.patchSandbox("life", `{"spec":{"operatingMode":"Running"}}`)
			e.waitReady("life", readyPodService)

			e.g.Expect(e.Client.Delete(e.ctx(), &agentsv1beta1.Sandbox{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "life"}})).To(Succeed())
			e.eventually(func(g Gomega) {
				e.gone(g, &agentsv1beta1.Sandbox{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "life"}})
			})

			// The recorder writes in the background: wait for the events to arrive, then make
			// sure no duplicate follows.
			exactly := func(g Gomega) {
				g.Expect(e.sandboxEvents(g, "life", uid)).To(Equal(tc.want))
			}
			e.eventually(exactly)
			e.consistently(exactly)
		})
	}
}

// sandboxEvents counts the Events about one Sandbox by "type reason". An Event the recorder
// turned into a series (the same event again) counts as often as it was recorded.
func (e *env) sandboxEvents(g Gomega, name string, uid types.UID) map[string]int32 {
	var list eventsv1.EventList
	g.Expect(e.Client.List(e.ctx(), &list, client.InNamespace(e.ns))).To(Succeed())
	got := map[string]int32{}
	for _, ev := range list.Items {
		if ev.Regarding.Kind != "Sandbox" || ev.Regarding.Name != name || ev.Regarding.UID != uid {
			continue
		}
		n := int32(1)
		if ev.Series != nil {
			n = ev.Series.Count
		}
		got[ev.Type+" "+ev.Reason] += n
	}
	return got
}
