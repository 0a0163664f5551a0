//go:build integration

package sandbox_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sandgate-dev/sandgate/api"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
	"github.com/sandgate-dev/sandgate/internal/testing/builders"
)

// TestPodEvictedByItsNodeIsReplaced: a pod the kubelet evicts (node pressure) stays as phase
// Failed, reason Evicted. That is a lost pod, not a finished Sandbox: a watch of the Sandbox
// sees Ready=False PodLost naming the pod and the eviction, no Finished condition, then the
// evicted pod is deleted, replaced and Ready=True; a Warning event names both pods.
// (test/integration/claims covers deletion and the Eviction API, with a bound claim.)
func TestPodEvictedByItsNodeIsReplaced(t *testing.T) {
	e := setup(t)
	e.create(builders.MakeSandbox("evicted", e.ns).Obj())
	e.waitReady("evicted", readyPod)
	var old *corev1.Pod
	e.eventually(func(g Gomega) { old = e.pod(g, "evicted") })
	seen := e.watchSandbox("evicted")

	// What a kubelet writes when it evicts a pod under node pressure.
	patch := `{"status":{"phase":"Failed","reason":"Evicted","message":"The node was low on resource: memory.",` +
		`"conditions":[{"type":"Ready","status":"False"},{"type":"DisruptionTarget","status":"True","reason":"TerminationByKubelet"}]}}`
	e.g.Expect(e.Client.Status().Patch(e.ctx(), old, client.RawPatch("application/merge-patch+json", []byte(patch)))).To(Succeed())

	var replacement *corev1.Pod
	e.eventually(func(g Gomega) {
		replacement = e.pod(g, "evicted")
		g.Expect(replacement.UID).NotTo(Equal(old.UID))
		expectCondition(g, e.sandbox(g, "evicted"), agentsv1beta1.ConditionReady, readyPod)
	})
	lost := fmt.Sprintf("Pod evicted (uid %s) was evicted by its node (The node was low on resource: memory.)", old.UID)
	e.eventually(func(g Gomega) {
		g.Expect(seen.summary(lost)).To(Equal("True → False PodLost → True"))
	})
	e.g.Expect(seen.finished()).To(BeFalse(), "an evicted pod did not finish")
	e.eventually(func(g Gomega) {
		var list eventsv1.EventList
		g.Expect(e.Client.List(e.ctx(), &list, client.InNamespace(e.ns))).To(Succeed())
		var notes []string
		for _, ev := range list.Items {
			if ev.Regarding.Name == "evicted" && ev.Reason == "PodLost" && ev.Type == corev1.EventTypeWarning {
				notes = append(notes, ev.Note)
			}
		}
		g.Expect(notes).To(ConsistOf(HavePrefix(lost + "; replaced by pod evicted (uid " + string(replacement.UID) + ")")))
	})
}

// sandboxLog is what a watch of one Sandbox saw: its Ready condition, one entry per change of
// status or reason, and whether it ever had a Finished condition.
type sandboxLog struct {
	mu          sync.Mutex
	ready       []string
	messages    []string
	hadFinished bool
}

// summary renders the Ready changes: "True", "False PodLost" for a PodLost message starting
// with prefix, other states as they are.
func (l *sandboxLog) summary(prefix string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]string, len(l.ready))
	for i, r := range l.ready {
		out[i] = r
		if r == "False "+agentsv1beta1.ReasonPodLost && !strings.HasPrefix(l.messages[i], prefix) {
			out[i] += fmt.Sprintf(" %q", l.messages[i])
		}
	}
	return strings.Join(out, " → ")
}

func (l *sandboxLog) finished() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.hadFinished
}

// watchSandbox watches one Sandbox from its current state until the test ends.
func (e *env) watchSandbox(name string) *sandboxLog {
	e.t.Helper()
	wc, err := client.NewWithWatch(cluster.Config, client.Options{Scheme: api.NewScheme()})
	e.g.Expect(err).NotTo(HaveOccurred())
	ctx, cancel := context.WithCancel(context.Background())
	w, err := wc.Watch(ctx, &agentsv1beta1.SandboxList{}, client.InNamespace(e.ns), client.MatchingFields{"metadata.name": name})
	e.g.Expect(err).NotTo(HaveOccurred())
	log := &sandboxLog{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			sb, ok := ev.Object.(*agentsv1beta1.Sandbox)
			if !ok || (ev.Type != watch.Added && ev.Type != watch.Modified) {
				continue
			}
			log.mu.Lock()
			if meta.FindStatusCondition(sb.Status.Conditions, agentsv1beta1.ConditionFinished) != nil {
				log.hadFinished = true
			}
			if c := meta.FindStatusCondition(sb.Status.Conditions, agentsv1beta1.ConditionReady); c != nil {
				s := string(c.Status)
				if c.Status == "False" {
					s += " " + c.Reason
				}
				if n := len(log.ready); n == 0 || log.ready[n-1] != s {
					log.ready = append(log.ready, s)
					log.messages = append(log.messages, c.Message)
				}
			}
			log.mu.Unlock()
		}
	}()
	e.t.Cleanup(func() {
		w.Stop()
		cancel()
		<-done
	})
	return log
}
