package webhooks_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
	"github.com/sandgate-dev/sandgate/internal/testing/builders"
	"github.com/sandgate-dev/sandgate/webhooks"
)

func TestShedDecision(t *testing.T) {
	const maxWait = 2 * time.Second
	served := func(perSecond int) int { return perSecond * int(webhooks.RateWindow/time.Second) }
	byA := func(n float64) map[string]float64 { return map[string]float64{"a": n} }
	for _, tc := range []struct {
		name    string
		backlog webhooks.Backlog
		creator string
		want    webhooks.Shed
	}{
		{name: "nothing ahead", creator: "a", want: webhooks.Shed{Wait: -1}},
		{name: "fewer than MinBacklog ahead, nothing served to measure by", creator: "a",
			backlog: webhooks.Backlog{Ahead: webhooks.MinBacklog - 1, ByCreator: byA(webhooks.MinBacklog - 1), Stalled: time.Second},
			want:    webhooks.Shed{Ahead: webhooks.MinBacklog - 1, Wait: -1}},
		{name: "served in time: 39 ahead at 20 a second is 2 s with the new one", creator: "a",
			backlog: webhooks.Backlog{Ahead: 39, ByCreator: byA(39), Served: served(20), Over: webhooks.RateWindow},
			want:    webhooks.Shed{Ahead: 39, Rate: 20, Wait: maxWait}},
		{name: "one more ahead is past the limit: the backlog's creator is refused", creator: "a",
			backlog: webhooks.Backlog{Ahead: 40, ByCreator: byA(40), Served: served(20), Over: webhooks.RateWindow},
			want:    webhooks.Shed{Refuse: true, Ahead: 40, Rate: 20, Wait: 2050 * time.Millisecond, Mine: 40, Share: 40}},
		{name: "the rate of work begun within the window is over its own time", creator: "a",
			backlog: webhooks.Backlog{Ahead: 40, ByCreator: byA(40), Served: 20, Over: time.Second},
			want:    webhooks.Shed{Refuse: true, Ahead: 40, Rate: 20, Wait: 2050 * time.Millisecond, Mine: 40, Share: 40}},
		{name: "nothing served lately with a backlog ahead: refused", creator: "a",
			backlog: webhooks.Backlog{Ahead: 30, ByCreator: byA(30), Stalled: 10 * time.Second},
			want:    webhooks.Shed{Refuse: true, Ahead: 30, Wait: -1, Mine: 30, Share: 30}},
		{name: "nothing served for the horizon: a stalled cluster, which refusing does not mend", creator: "a",
			backlog: webhooks.Backlog{Ahead: 30, ByCreator: byA(30), Stalled: 31 * time.Second},
			want:    webhooks.Shed{Ahead: 30, Wait: -1}},
		{name: "a creator with nothing ahead is admitted while another floods", creator: "b",
			backlog: webhooks.Backlog{Ahead: 100, ByCreator: byA(100), Served: served(10), Over: webhooks.RateWindow},
			want:    webhooks.Shed{Ahead: 100, Rate: 10, Wait: 10100 * time.Millisecond, Share: 100}},
		{name: "a creator below its fair share is admitted", creator: "b",
			backlog: webhooks.Backlog{Ahead: 100, ByCreator: map[string]float64{"a": 90, "b": 10}, Served: served(10), Over: webhooks.RateWindow},
			want:    webhooks.Shed{Ahead: 100, Rate: 10, Wait: 10100 * time.Millisecond, Mine: 10, Share: 50}},
		{name: "a creator at its fair share is refused", creator: "b",
			backlog: webhooks.Backlog{Ahead: 100, ByCreator: map[string]float64{"a": 50, "b": 50}, Served: served(10), Over: webhooks.RateWindow},
			want:    webhooks.Shed{Refuse: true, Ahead: 100, Rate: 10, Wait: 10100 * time.Millisecond, Mine: 50, Share: 50}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := webhooks.ShedDecision(maxWait, tc.backlog, tc.creator)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("decision (-want +got):\n%s", diff)
			}
		})
	}
}

// shedFixture drives a ClaimShed as its informers would, on a clock the test moves.
type shedFixture struct {
	t    *testing.T
	now  time.Time
	shed *webhooks.ClaimShed
}

func newShedFixture(t *testing.T, maxWait time.Duration) *shedFixture {
	f := &shedFixture{t: t, now: time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)}
	f.shed = &webhooks.ClaimShed{MaxWait: maxWait, Now: func() time.Time { return f.now }}
	return f
}

// claim is a claim of pool "pool" in "ns", admitted now, stamped with the template hash.
func (f *shedFixture) claim(name, creator, hash string) *extv1beta1.SandboxClaim {
	return builders.MakeClaim(name, "ns", "pool").Annotation(agentsv1beta1.AnnotationCreator, creator).
		Annotation(agentsv1beta1.AnnotationSandboxTemplateHash, hash).
		Annotation(agentsv1beta1.AnnotationWebhookFirstObservedAt, f.now.Format(time.RFC3339Nano)).Obj()
}

// waitN has n claims of creator wait, named prefix-i, without a Sandbox.
func (f *shedFixture) waitN(prefix, creator string, n int) {
	for i := range n {
		f.shed.Observe(f.claim(fmt.Sprintf("%s-%d", prefix, i), creator, "h1"))
	}
}

func readyClaim(c *extv1beta1.SandboxClaim) *extv1beta1.SandboxClaim {
	c = c.DeepCopy()
	c.Status.Conditions = []metav1.Condition{{Type: agentsv1beta1.ConditionReady, Status: metav1.ConditionTrue, Reason: "SandboxReady"}}
	return c
}

// serveN has n claims, admitted RateWindow ago, served now (seen waiting, then Ready): a
// steady n ÷ RateWindow a second.
func (f *shedFixture) serveN(prefix string, n int) {
	f.serveSince(prefix, n, f.now.Add(-webhooks.RateWindow))
}

// serveSince has n claims, admitted at since, served now.
func (f *shedFixture) serveSince(prefix string, n int, since time.Time) {
	for i := range n {
		c := f.claim(fmt.Sprintf("%s-%d", prefix, i), "served@example.com", "h1")
		c.Annotations[agentsv1beta1.AnnotationWebhookFirstObservedAt] = since.Format(time.RFC3339Nano)
		f.shed.Observe(c)
		f.shed.Observe(readyClaim(c))
	}
}

// sandboxOf is Sandbox name, bound to claim (its controller).
func sandboxOf(name, claim string) *agentsv1beta1.Sandbox {
	sb := builders.MakeSandbox(name, "ns").Obj()
	sb.OwnerReferences = []metav1.OwnerReference{{APIVersion: "extensions.agents.x-k8s.io/v1beta1", Kind: "SandboxClaim", Name: claim, UID: "c", Controller: ptr.To(true)}}
	return sb
}

// member is a pool member of "pool" built from template version hash, ready or not.
func member(name, hash string, ready bool) *agentsv1beta1.Sandbox {
	sb := builders.MakeSandbox(name, "ns").Label(agentsv1beta1.LabelWarmPoolSandbox, agentsv1beta1.NameHash("pool")).
		Label(agentsv1beta1.LabelSandboxTemplateHash, hash).Obj()
	sb.OwnerReferences = []metav1.OwnerReference{{APIVersion: "extensions.agents.x-k8s.io/v1beta1", Kind: "SandboxWarmPool", Name: "pool", UID: "p", Controller: ptr.To(true)}}
	if ready {
		sb.Status.Conditions = []metav1.Condition{{Type: agentsv1beta1.ConditionReady, Status: metav1.ConditionTrue, Reason: "DependenciesReady"}}
	}
	return sb
}

// podStage is how far a pod has come: waiting for the scheduler, placed on a node and waiting
// for its kubelet, taken up by its kubelet (status.startTime), Ready.
type podStage int

const (
	podUnplaced podStage = iota
	podOnNode
	podStarted
	podReady
)

// podOf is Sandbox sandbox's pod (of UID uid-<sandbox>, or uid if given) at stage.
func podOf(sandbox string, stage podStage, uid ...types.UID) *corev1.Pod {
	p := builders.MakePod(sandbox, "ns").Obj()
	p.UID = types.UID("uid-" + sandbox)
	if len(uid) > 0 {
		p.UID = uid[0]
	}
	p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "agents.x-k8s.io/v1beta1", Kind: "Sandbox", Name: sandbox, UID: "sb", Controller: ptr.To(true)}}
	if stage >= podOnNode {
		p.Spec.NodeName = "node-1"
	}
	if stage >= podStarted {
		p.Status.StartTime = &metav1.Time{Time: time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)}
	}
	if stage >= podReady {
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	}
	return p
}

// refused asks to admit a new claim of creator, says whether it was refused (429), and
// withdraws it if not: a probe that leaves nothing behind.
func (f *shedFixture) refused(creator string) bool {
	f.t.Helper()
	c := f.claim("new", creator, "h1")
	err := f.shed.Admit(creator, c)
	if err != nil && !apierrors.IsTooManyRequests(err) {
		f.t.Fatalf("Admit: %v, want nil or 429", err)
	}
	if err == nil {
		f.shed.Withdraw(c.Namespace, c.Annotations[agentsv1beta1.AnnotationWebhookFirstObservedAt])
	}
	return err != nil
}

// The shed predicts a new claim's wait from what the informers show: the claims ahead of it
// (waiting, without a ready member to take, before their pods' start-up) over the rate claims
// were served in the last RateWindow.
func TestClaimShedPredictsTheWaitFromTheInformers(t *testing.T) {
	f := newShedFixture(t, 2*time.Second)
	f.serveN("earlier", 10) // 2 a second over the window
	f.now = f.now.Add(time.Second)
	f.waitN("cold", someUser, 3)
	if f.refused(someUser) {
		t.Fatal("3 claims ahead, fewer than MinBacklog, refused a new claim")
	}
	f.waitN("cold", someUser, 30)
	expectRetryLater(t, f.shed.Admit(someUser, f.claim("new", someUser, "h1")), 2, "30 claims are ahead of this one",
		"30 claims ahead served at 2 a second (15 s) under a 2 s limit")
	if f.refused("other@example.com") {
		t.Error("a creator with nothing on its way was refused while another's claims wait")
	}

	// The pool holds them: as many ready members of their pool and template version as claims
	// without a Sandbox are no backlog; another version's members, or members not Ready, are.
	for i := range 30 {
		f.shed.ObserveSandbox(member(fmt.Sprintf("stale-%d", i), "h0", true))
		f.shed.ObserveSandbox(member(fmt.Sprintf("starting-%d", i), "h1", false))
	}
	if !f.refused(someUser) {
		t.Fatal("members of another template version, or not Ready, were taken to serve the claims")
	}
	for i := range 30 {
		f.shed.ObserveSandbox(member(fmt.Sprintf("ready-%d", i), "h1", true))
	}
	if f.refused(someUser) {
		t.Fatal("30 claims with 30 ready members to take were taken for a backlog")
	}
	f.shed.SandboxHandler().OnDelete(member("ready-0", "h1", true))
	for i := 1; i <= 20; i++ { // taken by other claims: no longer members
		f.shed.ObserveSandbox(sandboxOf(fmt.Sprintf("ready-%d", i), "elsewhere"))
	}
	if !f.refused(someUser) {
		t.Fatal("members deleted or taken still counted as ready to serve")
	}

	// Claims whose pods their kubelets have taken up wait for their containers, not in the
	// cluster's queues; a Sandbox whose pod is not placed is a cold start in them.
	for i := range 30 {
		name := fmt.Sprintf("cold-%d", i)
		f.shed.ObserveSandbox(sandboxOf(name, name))
		if i < 25 {
			f.shed.ObservePod(podOf(name, podStarted))
		} else {
			f.shed.ObservePod(podOf(name, podUnplaced)) // waits for the scheduler
		}
	}
	if f.refused(someUser) {
		t.Fatal("claims whose pods their kubelets have taken up were taken for a backlog")
	}
	for i := range 25 { // Ready, the claims not yet: their last writes
		f.shed.ObservePod(podOf(fmt.Sprintf("cold-%d", i), podReady))
	}
	if f.refused(someUser) {
		t.Fatal("claims whose pods are Ready were taken for a backlog")
	}

	// Their pods lost and made again, on their nodes, waiting for their kubelets: for less than
	// the limit, the queue a kubelet needs in front of it; longer, kubelets that are behind, and
	// 30 ahead, served at 2 a second, refuse.
	for i := range 25 {
		name := fmt.Sprintf("cold-%d", i)
		f.shed.PodHandler().OnDelete(podOf(name, podReady))
		f.shed.ObservePod(podOf(name, podOnNode, types.UID("again-"+name)))
	}
	if f.refused(someUser) {
		t.Fatal("claims whose pods reached their nodes just now were taken for a backlog")
	}
	f.now = f.now.Add(2 * time.Second)
	f.shed.ObservePod(podOf("cold-0", podOnNode, "again-cold-0")) // an update: placed when first seen so
	if !f.refused(someUser) {
		t.Fatal("30 claims whose pods waited for their kubelets for the limit, served at 2 a second, did not refuse")
	}
	for i := range 25 { // taken up
		name := fmt.Sprintf("cold-%d", i)
		f.shed.ObservePod(podOf(name, podStarted, types.UID("again-"+name)))
	}
	if f.refused(someUser) {
		t.Fatal("claims whose pods their kubelets have taken up were taken for a backlog")
	}

	// Their pods lost (deleted, to be made again): 30 cold starts not placed, at 2 a second,
	// refuse; served at 22 a second, 30 ahead take 1.4 s: in time.
	for i := range 25 {
		f.shed.PodHandler().OnDelete(podOf(fmt.Sprintf("cold-%d", i), podStarted, types.UID("again-cold-"+fmt.Sprint(i))))
	}
	if !f.refused(someUser) {
		t.Fatal("30 cold starts not placed, served at 2 a second, did not refuse")
	}
	f.serveN("faster", 100)
	if f.refused(someUser) {
		t.Fatal("30 ahead served at 22 a second under a 2 s limit refused")
	}
}

// The claims admission lets through count at once, before the informer shows them, until it
// does, Withdraw takes one back or admittedTTL passes (a create that failed after admission);
// a flood admitted faster than the informer delivers would otherwise be let through whole.
// Two claims admitted in the same instant both count.
func TestClaimShedCountsWhatItAdmittedBeforeTheInformerShowsIt(t *testing.T) {
	f := newShedFixture(t, 2*time.Second)
	f.serveN("earlier", 5) // 1 a second
	var admitted []*extv1beta1.SandboxClaim
	for i := range webhooks.MinBacklog + 5 {
		c := f.claim(fmt.Sprintf("flood-%d", i), someUser, "h1") // all admitted at the same instant
		if err := f.shed.Admit(someUser, c); err != nil {
			break
		}
		admitted = append(admitted, c)
	}
	if len(admitted) != webhooks.MinBacklog {
		t.Fatalf("admitted %d claims unseen by the informer, served at 1 a second under a 2 s limit; want MinBacklog = %d",
			len(admitted), webhooks.MinBacklog)
	}
	f.shed.Withdraw("ns", admitted[0].Annotations[agentsv1beta1.AnnotationWebhookFirstObservedAt]) // its policy refused it
	if f.refused(someUser) {
		t.Fatal("a claim withdrawn still counts")
	}
	if err := f.shed.Admit(someUser, admitted[0]); err != nil {
		t.Fatalf("admitting again: %v", err)
	}
	for _, c := range admitted[:10] { // the informer shows half: each counted once
		f.shed.Observe(c)
		f.shed.Observe(c)
	}
	if !f.refused(someUser) {
		t.Fatal("the claims admitted were forgotten, or counted once only, as the informer showed some")
	}
	for _, c := range admitted[:10] {
		f.shed.Forget(c.Namespace, c.Name)
	}
	if f.refused(someUser) {
		t.Fatal("deleted claims, or claims seen by the informer, still count as admitted")
	}
	f.now = f.now.Add(6 * time.Second)
	for i := range webhooks.MinBacklog {
		f.shed.Observe(f.claim(fmt.Sprintf("late-%d", i), someUser, "h1"))
	}
	if !f.refused(someUser) {
		t.Fatal("MinBacklog claims waiting, nothing served lately, refused nothing")
	}
	for i := range webhooks.MinBacklog {
		f.shed.Forget("ns", fmt.Sprintf("late-%d", i))
	}
	if f.refused(someUser) {
		t.Fatal("claims admitted whose creates failed after admission counted past admittedTTL")
	}
}

// Who is refused is decided by each creator's part of the claims ahead: claims the pool's
// ready members serve are nobody's backlog, so a tenant's warm burst is not refused for another
// tenant's cold flood, and the flood's tenant is.
func TestClaimShedRefusesTheCreatorOfTheBacklog(t *testing.T) {
	f := newShedFixture(t, 2*time.Second)
	f.serveN("earlier", 10)
	for i := range 50 { // b: cold starts whose pods are not placed yet
		name := fmt.Sprintf("cold-%d", i)
		f.shed.Observe(f.claim(name, "b@example.com", "h1"))
		f.shed.ObserveSandbox(sandboxOf(name, name))
	}
	for i := range 100 { // a: a burst the pool holds
		f.shed.ObserveSandbox(member(fmt.Sprintf("m-%d", i), "h1", true))
		f.shed.Observe(f.claim(fmt.Sprintf("warm-%d", i), someUser, "h1"))
	}
	if f.refused(someUser) {
		t.Fatal("a creator whose claims the pool serves was refused for another's cold flood")
	}
	if !f.refused("b@example.com") {
		t.Fatal("the creator of the cold flood was admitted")
	}
	for i := range 60 { // a takes 60 members: 40 remain for its 100 claims
		f.shed.ObserveSandbox(sandboxOf(fmt.Sprintf("m-%d", i), "elsewhere"))
	}
	if !f.refused(someUser) {
		t.Fatal("60 of a creator's claims beyond its pool's ready members, more than its fair share of the 110 ahead, did not refuse it")
	}
}

// The shed's view follows the informers as they deliver: a claim's Sandbox seen before the
// claim, a claim made again under a served claim's name, a claim whose reconcile failed (it is
// retried, so on its way), and a burst after an idle hour (not a stalled cluster).
func TestClaimShedFollowsTheInformers(t *testing.T) {
	f := newShedFixture(t, 2*time.Second)
	f.serveN("earlier", 10) // 2 a second
	for i := range 30 {
		name := fmt.Sprintf("c-%d", i)
		f.shed.ObserveSandbox(sandboxOf(name, name)) // the Sandbox informer first
		f.shed.ObservePod(podOf(name, podStarted))
		f.shed.Observe(f.claim(name, someUser, "h1"))
	}
	if f.refused(someUser) {
		t.Fatal("claims whose Sandboxes the informer delivered first were taken for claims without one")
	}
	for i := range 30 {
		f.shed.Forget("ns", fmt.Sprintf("c-%d", i))
	}

	for i := range 30 {
		c := f.claim(fmt.Sprintf("again-%d", i), someUser, "h1")
		c.UID = "first"
		f.shed.Observe(readyClaim(c))
		c.UID = "second" // deleted and made again; the informer missed the delete
		f.shed.Observe(c)
	}
	if !f.refused(someUser) {
		t.Fatal("claims made again under served claims' names were taken for the served ones")
	}
	for i := range 30 {
		f.shed.Forget("ns", fmt.Sprintf("again-%d", i))
	}

	for i := range 30 {
		c := f.claim(fmt.Sprintf("failed-%d", i), someUser, "h1")
		c.Status.Conditions = []metav1.Condition{{Type: agentsv1beta1.ConditionReady, Status: metav1.ConditionFalse, Reason: extv1beta1.ReasonReconcilerError}}
		f.shed.Observe(c)
	}
	if !f.refused(someUser) {
		t.Fatal("claims whose reconcile failed, to be retried, were taken for claims waiting for a change")
	}
	for i := range 30 {
		f.shed.Forget("ns", fmt.Sprintf("failed-%d", i))
	}

	f.now = f.now.Add(time.Hour)
	start := f.now
	f.waitN("burst", someUser, 30)
	if !f.refused(someUser) {
		t.Fatal("30 claims ahead an hour after the last claim served were taken for a stalled cluster")
	}
	f.now = f.now.Add(500 * time.Millisecond)
	f.serveSince("first-of-burst", 1, start)
	if !f.refused(someUser) {
		t.Fatal("30 ahead, 1 served in the first second of the burst, did not refuse")
	}
	f.serveSince("more-of-burst", 20, start) // 21 in the burst's first second: 31 ahead take 1.5 s
	if f.refused(someUser) {
		t.Fatal("the rate of a burst begun a second ago was taken over the whole window")
	}
}

// A cluster that serves nothing while claims wait is refused new claims until it has served
// none for servedHorizon, and then admits: claims that never become Ready do not hold the gate
// shut, and neither do claims that wait for a change (Stuck) or were served once.
func TestClaimShedOpensOnAStalledCluster(t *testing.T) {
	for _, servedBefore := range []bool{true, false} { // and a fresh cluster, which served none
		f := newShedFixture(t, 2*time.Second)
		if servedBefore {
			f.serveN("earlier", 5)
		}
		f.waitN("cold", someUser, 30)
		f.now = f.now.Add(10 * time.Second)
		if !f.refused(someUser) {
			t.Fatalf("served before: %t; 30 claims ahead, none served for 10 s, did not refuse", servedBefore)
		}
		f.now = f.now.Add(21 * time.Second)
		if f.refused(someUser) {
			t.Fatalf("served before: %t; a cluster that served nothing for the 31 s its oldest claim waited still refused", servedBefore)
		}
	}

	f := newShedFixture(t, 2*time.Second)
	f.serveN("earlier", 5)
	for i := range 30 {
		c := f.claim(fmt.Sprintf("stuck-%d", i), someUser, "h1")
		c.Status.Conditions = []metav1.Condition{{Type: agentsv1beta1.ConditionReady, Status: metav1.ConditionFalse, Reason: extv1beta1.ReasonTemplateNotFound}}
		f.shed.Observe(c)
		served := f.claim(fmt.Sprintf("retained-%d", i), someUser, "h1")
		f.shed.Observe(served)
		f.shed.Observe(readyClaim(served))
		served.Status.Conditions = []metav1.Condition{{Type: agentsv1beta1.ConditionReady, Status: metav1.ConditionFalse, Reason: extv1beta1.ReasonClaimExpired}}
		f.shed.Observe(served)
	}
	if f.refused(someUser) {
		t.Fatal("claims waiting for a change, or served and since expired, were taken for a backlog")
	}
}

func TestRetryAfter(t *testing.T) {
	for in, want := range map[time.Duration]int32{0: 1, 300 * time.Millisecond: 1, time.Second: 1, 1500 * time.Millisecond: 2, 5 * time.Second: 5} {
		if got := webhooks.RetryAfter(in); got != want {
			t.Errorf("RetryAfter(%s) = %d, want %d", in, got, want)
		}
	}
}

// stamperOneShortOfABacklog is a stamping webhook whose shed has one claim fewer than
// MinBacklog ahead, served at 1 a second.
func stamperOneShortOfABacklog(t *testing.T) (*shedFixture, *webhooks.ClaimWebhook) {
	f := newShedFixture(t, 2*time.Second)
	reader := fakeClient(builders.MakeTemplate("tmpl", "ns").Obj(), builders.MakePool("pool", "ns", "tmpl").Obj())
	w := &webhooks.ClaimWebhook{APIReader: reader, OperatorUser: operatorUser, Now: func() time.Time { return f.now }, Shed: f.shed}
	f.serveN("earlier", 5)
	f.waitN("cold", someUser, webhooks.MinBacklog-1)
	return f, w
}

// The stamping webhook sheds new claims, never a dry run, and counts what it admits.
func TestClaimStampingShedsWhileTheClusterIsBehind(t *testing.T) {
	f, w := stamperOneShortOfABacklog(t)
	f.now = f.now.Add(time.Second)

	if err := w.Default(request(someUser, admissionv1.Create), builders.MakeClaim("c", "ns", "pool").Obj()); err != nil {
		t.Fatalf("a claim with fewer than MinBacklog ahead was refused: %v", err)
	}
	if got := code(w.Default(request(someUser, admissionv1.Create), builders.MakeClaim("d", "ns", "pool").Obj())); got != 429 {
		t.Errorf("the next claim, the one admitted before it now ahead too: code %d, want 429", got)
	}
	if err := w.Default(request("other@example.com", admissionv1.Create), builders.MakeClaim("e", "ns", "pool").Obj()); err != nil {
		t.Errorf("a creator with nothing waiting was refused: %v", err)
	}
	dryRun := admission.NewContextWithRequest(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		Operation: admissionv1.Create, Namespace: "ns", UserInfo: authenticationv1.UserInfo{Username: someUser}, DryRun: ptr.To(true)}})
	if err := w.Default(dryRun, builders.MakeClaim("f", "ns", "pool").Obj()); err != nil {
		t.Errorf("a dry run was refused: %v", err)
	}
}

// Admission invoked again on the claim it stamped (reinvocationPolicy IfNeeded: another
// mutating webhook changed it after this one) counts the claim once, not once per call.
func TestClaimStampingCountsAReinvokedClaimOnce(t *testing.T) {
	f, w := stamperOneShortOfABacklog(t)

	c := builders.MakeClaim("c", "ns", "pool").Obj()
	if err := w.Default(request(someUser, admissionv1.Create), c); err != nil {
		t.Fatalf("a claim with fewer than MinBacklog ahead was refused: %v", err)
	}
	f.now = f.now.Add(time.Millisecond)
	if err := w.Default(request(someUser, admissionv1.Create), c); err != nil {
		t.Fatalf("the same claim, admission invoked again, was refused: it was counted ahead of itself: %v", err)
	}
	if got := code(w.Default(request(someUser, admissionv1.Create), builders.MakeClaim("d", "ns", "pool").Obj())); got != 429 {
		t.Errorf("the next claim, with MinBacklog ahead: code %d, want 429", got)
	}
}

// Until its informers have loaded what the API server holds, the shed knows nothing of the
// claims ahead: it refuses every claim with 429 and a retry after a second (a replica restarted
// under load admitted a flood otherwise), and decides as usual once they have.
func TestClaimShedRefusesUntilItsInformersHaveSynced(t *testing.T) {
	f := newShedFixture(t, 2*time.Second)
	synced := false
	f.shed.Synced = func() bool { return synced }
	expectRetryLater(t, f.shed.Admit(someUser, f.claim("new", someUser, "h1")), 1, "replica is starting",
		"a claim before the shed's informers synced")
	synced = true
	if f.refused(someUser) {
		t.Fatal("a claim with nothing ahead refused once the informers synced")
	}
}

// expectRetryLater fails the test unless err is a claim's 429 whose details ask for a retry
// after retry seconds and whose message says want; what names the case.
func expectRetryLater(t *testing.T, err error, retry int32, want, what string) {
	t.Helper()
	var status apierrors.APIStatus
	if !apierrors.IsTooManyRequests(err) || !errors.As(err, &status) {
		t.Fatalf("%s: not refused with 429: %v", what, err)
	}
	if d := status.Status().Details; d == nil || d.RetryAfterSeconds != retry || d.Kind != "SandboxClaim" {
		t.Errorf("%s: refusal details = %+v, want kind SandboxClaim and retryAfterSeconds %d", what, d, retry)
	}
	if msg := status.Status().Message; !strings.Contains(msg, want) {
		t.Errorf("%s: refusal message %q does not say %q", what, msg, want)
	}
}
