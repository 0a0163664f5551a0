//go:build integration

package claims_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sandgate-dev/sandgate/api"
	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
	"github.com/sandgate-dev/sandgate/internal/testing/builders"
)

// TestLostPodIsSeenByWatchers: the pod of a bound, Ready Sandbox is deleted. kwok makes the
// replacement Ready within milliseconds, so without the loss being written first, a watch of the
// Sandbox would see Ready=True throughout (issue 25). A watch of the Sandbox sees Ready=False
// PodLost, naming the lost pod's UID, then Ready=True on the replacement; a Warning event names
// the lost pod and the replacement by UID; a watch of the claim sees Ready=False PodLost then
// Ready=True, and the claim gets a Warning event too.
func TestLostPodIsSeenByWatchers(t *testing.T) {
	lostPodScenario(t, "deleted", func(e *env, pod *corev1.Pod) {
		e.g.Expect(e.Client.Delete(e.ctx(), pod, client.Preconditions{UID: &pod.UID})).To(Succeed())
	})
}

// TestEvictedPodIsSeenByWatchers: the same, with the pod evicted through the Eviction API
// (policy/v1), as a drain, the descheduler or the autoscaler evicts: the loss says evicted.
func TestEvictedPodIsSeenByWatchers(t *testing.T) {
	lostPodScenario(t, "evicted", func(e *env, pod *corev1.Pod) {
		eviction := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name}}
		e.g.Expect(e.Clientset.CoreV1().Pods(pod.Namespace).EvictV1(e.ctx(), eviction)).To(Succeed())
	})
}

func lostPodScenario(t *testing.T, how string, take func(*env, *corev1.Pod)) {
	e := setup(t, 0)
	e.create(builders.MakeTemplate("tmpl", e.ns).Obj())
	e.create(builders.MakePool("pool", e.ns, "tmpl").Replicas(1).Obj())
	e.waitPoolReady("pool", 1)
	e.create(builders.MakeClaim("c", e.ns, "pool").Obj())
	_, sb := e.waitClaimReady("c")
	old := &corev1.Pod{}
	e.g.Expect(e.Client.Get(e.ctx(), e.key(sb.Name), old)).To(Succeed())

	sandboxWatch := e.watchReady(&agentsv1beta1.SandboxList{}, sb.Name)
	claimWatch := e.watchReady(&extv1beta1.SandboxClaimList{}, "c")
	take(e, old)

	var replacement *corev1.Pod
	e.eventually(func(g Gomega) {
		replacement = &corev1.Pod{}
		g.Expect(e.Client.Get(e.ctx(), e.key(sb.Name), replacement)).To(Succeed())
		g.Expect(replacement.UID).NotTo(Equal(old.UID))
		c := e.claim(g, "c")
		g.Expect(ready(c.Status.Conditions)).To(BeTrue(), "claim conditions %+v", c.Status.Conditions)
	})
	lostPrefix := fmt.Sprintf("Pod %s (uid %s) was %s", sb.Name, old.UID, how)
	e.eventually(func(g Gomega) {
		g.Expect(sandboxWatch.transitions()).To(lostThenReady(lostPrefix), "the Sandbox's Ready as its watch saw it")
		g.Expect(claimWatch.transitions()).To(lostThenReady(lostPrefix), "the claim's Ready as its watch saw it")
	})

	e.eventually(func(g Gomega) {
		notes := e.warnings(g, "Sandbox", sb.Name, "PodLost")
		g.Expect(notes).To(HaveLen(1), "one event per loss")
		g.Expect(notes[0]).To(HavePrefix(lostPrefix))
		g.Expect(notes[0]).To(ContainSubstring(fmt.Sprintf("replaced by pod %s (uid %s)", replacement.Name, replacement.UID)))
		claimNotes := e.warnings(g, "SandboxClaim", "c", "PodLost")
		g.Expect(claimNotes).To(HaveLen(1))
		g.Expect(claimNotes[0]).To(ContainSubstring(lostPrefix))
	})
	c := e.claim(e.g, "c")
	e.g.Expect(e.boundSandbox(e.g, c).UID).To(Equal(sb.UID), "the claim keeps its Sandbox")
	checkInvariants(e.g, e)
}

// readySeen is a Ready condition as a watch delivered it.
type readySeen struct {
	status  metav1.ConditionStatus
	reason  string
	message string
}

func (s readySeen) String() string { return fmt.Sprintf("%s %s %q", s.status, s.reason, s.message) }

// readyLog is what a watch of one object saw of its Ready condition, one entry per change.
type readyLog struct {
	mu   sync.Mutex
	seen []readySeen
}

func (l *readyLog) transitions() []readySeen {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]readySeen(nil), l.seen...)
}

// watchReady watches the object of list's kind named name, from its current state, until the
// test ends, and logs each change of its Ready condition's status or reason.
func (e *env) watchReady(list client.ObjectList, name string) *readyLog {
	e.t.Helper()
	wc, err := client.NewWithWatch(cluster.Config, client.Options{Scheme: api.NewScheme()})
	e.g.Expect(err).NotTo(HaveOccurred())
	ctx, cancel := context.WithCancel(context.Background())
	w, err := wc.Watch(ctx, list, client.InNamespace(e.ns), client.MatchingFields{"metadata.name": name})
	e.g.Expect(err).NotTo(HaveOccurred())
	log := &readyLog{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			if ev.Type != watch.Added && ev.Type != watch.Modified {
				continue
			}
			var conds []metav1.Condition
			switch obj := ev.Object.(type) {
			case *agentsv1beta1.Sandbox:
				conds = obj.Status.Conditions
			case *extv1beta1.SandboxClaim:
				conds = obj.Status.Conditions
			}
			c := meta.FindStatusCondition(conds, agentsv1beta1.ConditionReady)
			if c == nil {
				continue
			}
			s := readySeen{c.Status, c.Reason, c.Message}
			log.mu.Lock()
			if n := len(log.seen); n == 0 || log.seen[n-1].status != s.status || log.seen[n-1].reason != s.reason {
				log.seen = append(log.seen, s)
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

// lostThenReady matches a Ready log that went True, then False with PodLost and a message
// starting with prefix, then True again, and nothing else.
func lostThenReady(prefix string) OmegaMatcher {
	return WithTransform(func(seen []readySeen) string {
		var out []string
		for _, s := range seen {
			switch {
			case s.status == metav1.ConditionTrue:
				out = append(out, "True")
			case s.reason == agentsv1beta1.ReasonPodLost && strings.HasPrefix(s.message, prefix):
				out = append(out, "False PodLost")
			default:
				out = append(out, s.String())
			}
		}
		return strings.Join(out, " → ")
	}, Equal("True → False PodLost → True"))
}

// warnings lists the notes of the Warning events with the given reason about an object of the
// test's namespace.
func (e *env) warnings(g Gomega, kind, name, reason string) []string {
	var list eventsv1.EventList
	g.Expect(e.Client.List(e.ctx(), &list, client.InNamespace(e.ns))).To(Succeed())
	var notes []string
	for _, ev := range list.Items {
		if ev.Regarding.Kind == kind && ev.Regarding.Name == name && ev.Reason == reason && ev.Type == corev1.EventTypeWarning {
			notes = append(notes, ev.Note)
		}
	}
	return notes
}
