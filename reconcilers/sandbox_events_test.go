package reconcilers

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestPodWake(t *testing.T) {
	base := func() *corev1.Pod {
		return &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPending}}
	}
	with := func(m func(*corev1.Pod)) *corev1.Pod { p := base(); m(p); return p }
	cond := func(typ corev1.PodConditionType, s corev1.ConditionStatus) corev1.PodCondition {
		return corev1.PodCondition{Type: typ, Status: s}
	}
	cases := map[string]struct {
		old, cur *corev1.Pod
		want     string
	}{
		"nothing that matters": {base(), with(func(p *corev1.Pod) { p.Labels = map[string]string{"a": "b"} }), wakeIgnored},
		"containers ready": {base(), with(func(p *corev1.Pod) {
			p.Status.Conditions = []corev1.PodCondition{cond(corev1.ContainersReady, corev1.ConditionTrue)}
		}), wakeIgnored},
		"initialized": {base(), with(func(p *corev1.Pod) {
			p.Status.Conditions = []corev1.PodCondition{cond(corev1.PodInitialized, corev1.ConditionTrue)}
		}), wakeIgnored},
		"scheduled":   {base(), with(func(p *corev1.Pod) { p.Spec.NodeName = "n1" }), wakeDelayed},
		"ip assigned": {base(), with(func(p *corev1.Pod) { p.Status.PodIPs = []corev1.PodIP{{IP: "10.0.0.1"}} }), wakeDelayed},
		"unschedulable": {base(), with(func(p *corev1.Pod) {
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable"}}
		}), wakeDelayed},
		"running":          {base(), with(func(p *corev1.Pod) { p.Status.Phase = corev1.PodRunning }), wakeDelayed},
		"deletion started": {base(), with(func(p *corev1.Pod) { p.DeletionTimestamp = &metav1.Time{Time: time.Now()} }), wakeDelayed},
		"ready": {base(), with(func(p *corev1.Pod) {
			p.Status.Conditions = []corev1.PodCondition{cond(corev1.PodReady, corev1.ConditionTrue)}
		}), wakeImmediate},
		"not ready anymore": {with(func(p *corev1.Pod) {
			p.Status.Conditions = []corev1.PodCondition{cond(corev1.PodReady, corev1.ConditionTrue)}
		}), base(), wakeImmediate},
		"succeeded": {base(), with(func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }), wakeImmediate},
		"failed":    {base(), with(func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed }), wakeImmediate},
		// A relist shows a pod deleted and recreated meanwhile as an update: another pod.
		"another pod under the name": {base(), with(func(p *corev1.Pod) { p.UID = "other" }), wakeImmediate},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := podWake(tc.old, tc.cur); got != tc.want {
				t.Errorf("podWake = %q, want %q", got, tc.want)
			}
		})
	}
}
