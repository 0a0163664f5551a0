//go:build integration

package controlplane_test

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/sandgate-dev/sandgate/test/env/controlplane"
)

// realisticStartup is short, to keep the test quick; the defaults are 2 s and 8 s.
var realisticStartup = controlplane.PodStartup{Median: 300 * time.Millisecond, P99: 1200 * time.Millisecond, Seed: 7}

func TestRealisticProfile(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, err := controlplane.Start(ctx, controlplane.Options{
		Nodes: 1, Profile: controlplane.ProfileRealistic, PodStartup: realisticStartup, NoControllerManager: true,
	})
	g.Expect(err).NotTo(HaveOccurred())
	defer func() {
		if err := c.Stop(); err != nil {
			t.Errorf("stopping the realistic-profile cluster: %v", err)
		}
	}()
	g.Expect(c.PodStartup).To(Equal(realisticStartup))
	cs := clientset(t, c)

	t.Run("pods become Ready through the kubelet's steps and go away unready", func(t *testing.T) {
		g := NewWithT(t)
		ns := namespace(t, cs, "realistic-steps")
		run := runPodToReady(t, g, cs, ns)
		t.Logf("status updates after binding: %s", summarize(run.afterBinding))
		expectRunningAndReady(g, run.ready)
		g.Expect(len(run.afterBinding)).To(BeNumerically(">=", 3), "separate status updates; saw %d", len(run.afterBinding))
		first := run.afterBinding[0]
		g.Expect(first.PodIP).NotTo(BeEmpty(), "the first update assigns the IP")
		g.Expect(conditionTrue(first.Conditions, corev1.PodInitialized)).To(BeTrue())
		g.Expect(conditionTrue(first.Conditions, corev1.ContainersReady)).To(BeFalse())
		g.Expect(conditionTrue(first.Conditions, corev1.PodReady)).To(BeFalse())
		g.Expect(first.Phase).To(Equal(corev1.PodPending))
		expectUnreadyThenDeleted(t, cs, run.ready)
	})

	t.Run("pods become Ready after their drawn start-up times", func(t *testing.T) {
		expectStartupTimes(t, cs, namespace(t, cs, "realistic-startup"), c.NodeNames[0], 200, realisticStartup)
	})

	t.Run("a pod that changes while it starts is still Ready at its time", func(t *testing.T) {
		// kwok recomputes a stage's delay whenever the pod changes, as sandgate's label
		// patches change it: the pod must not start over on each change.
		g := NewWithT(t)
		ns := namespace(t, cs, "realistic-patched")
		name := podWithStartup(realisticStartup, ns, time.Second)
		draw := realisticStartup.Draw(ns, name)
		w, err := cs.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name})
		g.Expect(err).NotTo(HaveOccurred())
		defer w.Stop()
		created := time.Now()
		_, err = cs.CoreV1().Pods(ns).Create(ctx, plainPod(name), metav1.CreateOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		patches := 0
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		deadline := time.After(draw + 10*time.Second)
		for ready := false; !ready; {
			select {
			case ev := <-w.ResultChan():
				if p, ok := ev.Object.(*corev1.Pod); ok {
					ready = conditionTrue(p.Status.Conditions, corev1.PodReady)
				}
			case <-tick.C:
				patch := fmt.Sprintf(`{"metadata":{"labels":{"patch":"%d"}}}`, patches)
				_, err := cs.CoreV1().Pods(ns).Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
				g.Expect(err).NotTo(HaveOccurred())
				patches++
			case <-deadline:
				t.Fatalf("pod %s (start-up %s) not Ready %s after its creation while patched every 100 ms (%d patches): each change restarted its start-up",
					name, draw, time.Since(created).Round(time.Millisecond), patches)
			}
		}
		took := time.Since(created)
		t.Logf("pod %s: start-up %s, Ready after %s, %d label patches meanwhile", name, draw, took.Round(time.Millisecond), patches)
		g.Expect(took).To(BeNumerically(">=", draw))
		g.Expect(patches).To(BeNumerically(">=", 5), "the pod changed while it started")
	})

	t.Run("a pod deleted while it starts goes away without becoming Ready", func(t *testing.T) {
		g := NewWithT(t)
		ns := namespace(t, cs, "realistic-deleted")
		name := podWithStartup(realisticStartup, ns, time.Second)
		w, err := cs.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name})
		g.Expect(err).NotTo(HaveOccurred())
		defer w.Stop()
		_, err = cs.CoreV1().Pods(ns).Create(ctx, plainPod(name), metav1.CreateOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		for initialized := false; !initialized; {
			ev := nextEvent(t, w)
			initialized = conditionTrue(ev.Object.(*corev1.Pod).Status.Conditions, corev1.PodInitialized)
		}
		g.Expect(cs.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{})).To(Succeed())
		for deleted := false; !deleted; {
			ev := nextEvent(t, w)
			g.Expect(conditionTrue(ev.Object.(*corev1.Pod).Status.Conditions, corev1.PodReady)).To(BeFalse(), "a deleted pod becomes Ready")
			deleted = ev.Type == watch.Deleted
		}
	})
	g.Expect(c.Err()).To(Succeed())
}

// plainPod is a pod with one container and no scheduling constraints.
func plainPod(name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "registry.example/app:1"}}},
	}
}

// podWithStartup returns the first name pod-<i> whose start-up time in ns is at least min.
func podWithStartup(s controlplane.PodStartup, ns string, minimum time.Duration) string {
	for i := 0; ; i++ {
		if name := fmt.Sprintf("pod-%d", i); s.Draw(ns, name) >= minimum {
			return name
		}
	}
}

// nextEvent returns the watch's next event, failing the test after a generous wait.
func nextEvent(t *testing.T, w watch.Interface) watch.Event {
	t.Helper()
	select {
	case ev, ok := <-w.ResultChan():
		if !ok {
			t.Fatal("the watch ended")
		}
		return ev
	case <-time.After(eventually):
		t.Fatalf("no watch event within %s", eventually)
		return watch.Event{}
	}
}

// expectUnreadyThenDeleted deletes a Ready pod and watches it turn unready, then go away.
func expectUnreadyThenDeleted(t *testing.T, cs kubernetes.Interface, pod *corev1.Pod) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	w, err := cs.CoreV1().Pods(pod.Namespace).Watch(ctx, metav1.ListOptions{
		FieldSelector: "metadata.name=" + pod.Name, ResourceVersion: pod.ResourceVersion,
	})
	g.Expect(err).NotTo(HaveOccurred())
	defer w.Stop()
	g.Expect(cs.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{})).To(Succeed())
	unready := false
	for {
		ev := nextEvent(t, w)
		if ev.Type == watch.Deleted {
			break
		}
		unready = unready || !conditionTrue(ev.Object.(*corev1.Pod).Status.Conditions, corev1.PodReady)
	}
	g.Expect(unready).To(BeTrue(), "the pod turned unready before it went away")
}

// createRate is how many pods a second expectStartupTimes creates: kwok writes three status
// updates per pod and makes about 250 a second on a loaded 2-core machine; faster, and its
// queue, not the start-up time, decides when pods become Ready.
const createRate = 50

// expectStartupTimes creates n pods in ns at createRate, bound to node (the scheduler's
// client is limited to 50 requests a second, which a burst of pods waits for: not what this
// measures), and checks the time from each one's create
// call to the watch event showing it Ready against its drawn start-up time: never shorter
// (the simulated kubelet holds it until then), and the quantiles of all of them not much
// longer than the draws' (the rest is the machine's own latency, generous on a loaded one).
func expectStartupTimes(t *testing.T, cs kubernetes.Interface, ns, node string, n int, s controlplane.PodStartup) {
	t.Helper()
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*eventually)
	defer cancel()
	w, err := cs.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	defer w.Stop()

	var mu sync.Mutex
	created := map[string]time.Time{}
	names := make(chan string)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for name := range names {
				start := time.Now()
				mu.Lock()
				created[name] = start
				mu.Unlock()
				pod := plainPod(name)
				pod.Spec.NodeName = node
				if _, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
					t.Errorf("create pod %s: %v", name, err)
				}
			}
		})
	}
	go func() {
		tick := time.NewTicker(time.Second / createRate)
		defer tick.Stop()
		for i := range n {
			names <- fmt.Sprintf("pod-%03d", i)
			<-tick.C
		}
		close(names)
	}()

	took := map[string]time.Duration{}
	for len(took) < n {
		var ev watch.Event
		select {
		case ev = <-w.ResultChan():
		case <-ctx.Done():
			t.Fatalf("%d of %d pods Ready after %s", len(took), n, 2*eventually)
		}
		p, ok := ev.Object.(*corev1.Pod)
		if !ok || !conditionTrue(p.Status.Conditions, corev1.PodReady) {
			continue
		}
		if _, seen := took[p.Name]; !seen {
			mu.Lock()
			took[p.Name] = time.Since(created[p.Name])
			mu.Unlock()
		}
	}
	wg.Wait()

	var measured, drawn []time.Duration
	var early []string
	for name, d := range took {
		draw := s.Draw(ns, name)
		if d < draw {
			early = append(early, fmt.Sprintf("%s after %s (drawn %s)", name, d, draw))
		}
		measured, drawn = append(measured, d), append(drawn, draw)
	}
	g.Expect(early).To(BeEmpty(), "pods Ready before their start-up time")
	// The machine's latencies add to every draw, and a loaded one reorders neighbours; but the
	// pods that drew the longest start-ups must, as a group, become Ready after those that drew
	// the shortest. A profile that ignored the draws (every pod Ready after one delay) leaves
	// the two groups alike.
	if short, long := medianOfExtremes(drawn, measured); long <= short {
		t.Errorf("the pods with the longest draws were Ready after a median %s, no later than those with the shortest (%s): the draws do not decide when pods are Ready", long, short)
	}
	slices.Sort(measured)
	slices.Sort(drawn)
	var summary []string
	for _, q := range []float64{0.5, 0.9, 0.99} {
		m, d := quantileOf(measured, q), quantileOf(drawn, q)
		summary = append(summary, fmt.Sprintf("p%g %s (drawn %s)", q*100, m.Round(time.Millisecond), d))
	}
	t.Logf("%d pods, configured %s: %s", n, s, strings.Join(summary, ", "))
}

// medianOfExtremes pairs drawn and measured by index and returns the median measured time of
// the tenth with the shortest draws and of the tenth with the longest.
func medianOfExtremes(drawn, measured []time.Duration) (short, long time.Duration) {
	idx := make([]int, len(drawn))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(i, j int) int { return cmp.Compare(drawn[i], drawn[j]) })
	k := max(len(idx)/10, 1)
	median := func(of []int) time.Duration {
		m := make([]time.Duration, 0, len(of))
		for _, i := range of {
			m = append(m, measured[i])
		}
		slices.Sort(m)
		return m[len(m)/2]
	}
	return median(idx[:k]), median(idx[len(idx)-k:])
}

// quantileOf is the q-quantile of sorted values.
func quantileOf(sorted []time.Duration, q float64) time.Duration {
	i := int(q*float64(len(sorted))+0.999999) - 1
	return sorted[max(i, 0)]
}
