package reconcilers

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	"github.com/sandgate-dev/sandgate/api/policy"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
	"github.com/sandgate-dev/sandgate/internal/testing/builders"
	"github.com/sandgate-dev/sandgate/internal/testing/policycases"
	"github.com/sandgate-dev/sandgate/reconcilers/indexes"
)

// The Reconcile tests of this file and sandboxclaim_lifecycle_test.go run the claim controller
// on a fake API server with the production indexes (fakeclient_test.go): the paths the claims
// integration suite covers on a real control plane, in milliseconds, with every write and
// event in the journal.

var claimKey = types.NamespacedName{Namespace: "ns", Name: "c"}

func testTemplate() *extv1beta1.SandboxTemplate { return builders.MakeTemplate("tmpl", "ns").Obj() }

func testPool(replicas int32) *extv1beta1.SandboxWarmPool {
	return builders.MakePool("pool", "ns", "tmpl").Replicas(replicas).UID("pool-uid").Obj()
}

// testClaim is claim "c" on pool "pool", stamped with tmpl's version as admission stamps it.
func testClaim(tmpl *extv1beta1.SandboxTemplate, mutate ...func(*builders.ClaimWrapper)) *extv1beta1.SandboxClaim {
	w := builders.MakeClaim("c", "ns", "pool").Annotation(agentsv1beta1.AnnotationSandboxTemplateHash, policy.TemplateHash(tmpl)).
		UID("claim-uid")
	for _, m := range mutate {
		m(w)
	}
	return w.Obj()
}

// claim is claim "c" on pool "pool", not stamped: for the claim path's steps, which do not
// look at the stamp.
func claim(mutate ...func(*builders.ClaimWrapper)) *extv1beta1.SandboxClaim {
	w := builders.MakeClaim("c", "ns", "pool").UID("claim-uid")
	for _, m := range mutate {
		m(w)
	}
	return w.Obj()
}

// readyMember is a ready member of pool built from tmpl, as the pool controller builds it
// (marked safe to evict, as by default).
func readyMember(pool *extv1beta1.SandboxWarmPool, tmpl *extv1beta1.SandboxTemplate, name, ip string) *agentsv1beta1.Sandbox {
	sb := newPoolMember(pool, tmpl, true)
	sb.Name, sb.UID = name, types.UID("uid-"+name)
	sb.Status = agentsv1beta1.SandboxStatus{
		PodIPs: []string{ip},
		Conditions: []metav1.Condition{{
			Type: agentsv1beta1.ConditionReady, Status: metav1.ConditionTrue,
			Reason: agentsv1beta1.ReasonDependenciesReady, Message: agentsv1beta1.MessagePodReady,
			LastTransitionTime: metav1.NewTime(planNow.Add(-time.Minute)),
		}},
	}
	return sb
}

// observeSandboxes feeds the warm index what the controller's Sandbox informer would: every
// Sandbox the API server has.
func observeSandboxes(t *testing.T, a *fakeAPI, index *warmIndex) {
	t.Helper()
	var list agentsv1beta1.SandboxList
	if err := a.List(context.Background(), &list); err != nil {
		t.Fatal(err)
	}
	for i := range list.Items {
		index.Observe(&list.Items[i])
	}
}

func reconcileClaim(t *testing.T, r *claimReconciler) ctrl.Result {
	t.Helper()
	res, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: claimKey})
	if err != nil {
		t.Fatalf("Reconcile: %v", err)
	}
	return res
}

func getClaim(t *testing.T, a *fakeAPI) *extv1beta1.SandboxClaim {
	t.Helper()
	c := &extv1beta1.SandboxClaim{}
	if err := a.Get(context.Background(), claimKey, c); err != nil {
		t.Fatalf("reading the claim: %v", err)
	}
	return c
}

// claimSandboxes are the Sandboxes the API server has that carry the claim's UID label.
func claimSandboxes(t *testing.T, a *fakeAPI, uid types.UID) []agentsv1beta1.Sandbox {
	t.Helper()
	var list agentsv1beta1.SandboxList
	if err := a.List(context.Background(), &list, client.MatchingFields{indexes.SandboxClaimUID: string(uid)}); err != nil {
		t.Fatal(err)
	}
	return list.Items
}

func readyCondition(status metav1.ConditionStatus, reason, msg string) []metav1.Condition {
	return []metav1.Condition{{
		Type: agentsv1beta1.ConditionReady, Status: status, Reason: reason, Message: msg,
		LastTransitionTime: metav1.NewTime(planNow),
	}}
}

// TestClaimReconcileWarm: a claim binds one ready member with one patch preconditioned on the
// member's resourceVersion; a member the API server refuses (409, 403, 404) is never tried
// again, and the next one is; the status names the bound member and its IPs, and the event
// follows the status write. When every member is refused, the claim cold-starts.
func TestClaimReconcileWarm(t *testing.T) {
	gr := schema.GroupResource{Group: agentsv1beta1.GroupVersion.Group, Resource: "sandboxes"}
	conflict := apierrors.NewConflict(gr, "m", errors.New("the object has been modified"))
	denied := apierrors.NewForbidden(gr, "m", errors.New("binding guard"))
	gone := apierrors.NewNotFound(gr, "m")
	tests := map[string]struct {
		bindAnswers []error
		// podLabels are the claim's additionalPodMetadata labels, which the bind patch adds to
		// the member's podTemplate.
		podLabels     map[string]string
		wantBinds     int
		wantColdStart bool
	}{
		"the first member picked binds":                 {wantBinds: 1},
		"the claim's pod labels ride in the bind patch": {podLabels: map[string]string{"sandbox.users.io/user": "u1"}, wantBinds: 1},
		"409: the next member binds":                    {bindAnswers: []error{conflict}, wantBinds: 2},
		"403: the next member binds":                    {bindAnswers: []error{denied}, wantBinds: 2},
		"404: the next member binds":                    {bindAnswers: []error{gone}, wantBinds: 2},
		"409, 403 and 404: the fourth member binds":     {bindAnswers: []error{conflict, denied, gone}, wantBinds: 4},
		"every member refused: a cold start": {
			bindAnswers: []error{conflict, denied, gone, conflict}, wantBinds: 4, wantColdStart: true,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			tmpl, pool := testTemplate(), testPool(4)
			claim := testClaim(tmpl, func(w *builders.ClaimWrapper) {
				for k, v := range tc.podLabels {
					w.PodLabel(k, v)
				}
			})
			ips := map[string]string{}
			objs := []client.Object{tmpl, pool, claim}
			for i, m := range []string{"pool-a", "pool-b", "pool-c", "pool-d"} {
				ips[m] = fmt.Sprintf("10.0.0.%d", i+1)
				member := readyMember(pool, tmpl, m, ips[m])
				objs = append(objs, member, podOf(member))
			}
			a := newFakeAPI(t, objs...)
			a.bindAnswers = tc.bindAnswers
			clk := clocktesting.NewFakeClock(planNow)
			r := newClaimReconciler(t, a, clk)
			observeSandboxes(t, a, r.Index)
			storedRV := map[string]string{}
			var members agentsv1beta1.SandboxList
			if err := a.List(context.Background(), &members); err != nil {
				t.Fatal(err)
			}
			for _, m := range members.Items {
				storedRV[m.Name] = m.ResourceVersion
			}

			reconcileClaim(t, r)
			if tc.wantColdStart {
				// The cold Sandbox is not Ready: reported after interimReportDelay.
				clk.Step(interimReportDelay)
				reconcileClaim(t, r)
			}

			binds := a.Binds()
			if len(binds) != tc.wantBinds {
				t.Fatalf("bind patches = %d (%v), want %d", len(binds), binds, tc.wantBinds)
			}
			var wantJournal []string
			tried := map[string]bool{}
			for i, b := range binds {
				if tried[b.Sandbox] {
					t.Errorf("member %s was sent a bind patch twice: %v", b.Sandbox, binds)
				}
				tried[b.Sandbox] = true
				if b.ResourceVersion == "" || b.ResourceVersion != storedRV[b.Sandbox] {
					t.Errorf("bind patch of %s has resourceVersion precondition %q, want the member's %q", b.Sandbox, b.ResourceVersion, storedRV[b.Sandbox])
				}
				entry := "bind Sandbox/" + b.Sandbox
				if i < len(tc.bindAnswers) {
					entry += " (" + resultOf(tc.bindAnswers[i]) + ")"
				}
				wantJournal = append(wantJournal, entry)
			}

			got := getClaim(t, a)
			bound := claimSandboxes(t, a, claim.UID)
			if len(bound) != 1 {
				t.Fatalf("Sandboxes labelled with the claim's UID: %d, want 1", len(bound))
			}
			sb := bound[0]
			if !policy.IsControlledBy(&sb, policy.ClaimKind, claim.UID) {
				t.Errorf("Sandbox %s carries the claim's UID and is not controlled by the claim: %v", sb.Name, sb.OwnerReferences)
			}

			var wantStatus extv1beta1.SandboxClaimStatus
			if tc.wantColdStart {
				if sb.Name != claim.Name || sb.Labels[agentsv1beta1.LabelLaunchType] != agentsv1beta1.LaunchTypeCold {
					t.Errorf("claim got Sandbox %s (launch type %q), want its own cold-started %s", sb.Name, sb.Labels[agentsv1beta1.LabelLaunchType], claim.Name)
				}
				wantJournal = append(wantJournal, "create Sandbox/c", "event Normal SandboxProvisioned SandboxClaim/c", "patch SandboxClaim/c/status")
				wantStatus = extv1beta1.SandboxClaimStatus{
					Sandbox:    extv1beta1.SandboxStatusRef{Name: "c"},
					Conditions: readyCondition(metav1.ConditionFalse, extv1beta1.ReasonSandboxNotReady, messageSandboxNotReady),
				}
				wantStatus.Conditions[0].LastTransitionTime = metav1.NewTime(clk.Now())
			} else {
				last := binds[len(binds)-1].Sandbox
				if sb.Name != last {
					t.Errorf("bound Sandbox is %s, want %s, the last one sent a bind patch", sb.Name, last)
				}
				if _, pooled := sb.Labels[agentsv1beta1.LabelWarmPoolSandbox]; pooled || sb.Labels[agentsv1beta1.LabelLaunchType] != agentsv1beta1.LaunchTypeWarm {
					t.Errorf("bound Sandbox labels = %v, want launch-type warm and no warm-pool label", sb.Labels)
				}
				// Ready means routable: the pod looks bound before the claim says Ready.
				wantJournal = append(wantJournal, "patch Pod/"+podNameFor(&sb), "patch SandboxClaim/c/status")
				wantStatus = extv1beta1.SandboxClaimStatus{
					Sandbox:    extv1beta1.SandboxStatusRef{Name: last, PodIPs: []string{ips[last]}},
					Conditions: readyCondition(metav1.ConditionTrue, agentsv1beta1.ReasonDependenciesReady, agentsv1beta1.MessagePodReady),
				}
				wantPodLabels := policy.TemplateBlueprint(tmpl).PodTemplate.ObjectMeta.Labels
				for k, v := range tc.podLabels {
					if wantPodLabels == nil {
						wantPodLabels = map[string]string{}
					}
					wantPodLabels[k] = v
				}
				if diff := cmp.Diff(wantPodLabels, sb.Spec.PodTemplate.ObjectMeta.Labels); diff != "" {
					t.Errorf("bound Sandbox's pod labels (-want +got):\n%s", diff)
				}
				pod := &corev1.Pod{}
				if err := a.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: podNameFor(&sb)}, pod); err != nil {
					t.Fatal(err)
				}
				wantOnPod := map[string]string{agentsv1beta1.LabelClaimUID: string(claim.UID)}
				for k, v := range tc.podLabels {
					wantOnPod[k] = v
				}
				for k, v := range wantOnPod {
					if pod.Labels[k] != v {
						t.Errorf("pod label %s = %q when the claim was reported Ready, want %q", k, pod.Labels[k], v)
					}
				}
				if _, pooled := pod.Labels[agentsv1beta1.LabelWarmPoolSandbox]; pooled {
					t.Errorf("pod still labelled %s when the claim was reported Ready: the router would not route to it", agentsv1beta1.LabelWarmPoolSandbox)
				}
				if hits := r.Metrics.WarmHits(); hits != 1 {
					t.Errorf("warm hits = %v, want 1", hits)
				}
			}
			if diff := cmp.Diff(wantJournal, a.Journal()); diff != "" {
				t.Errorf("writes and events (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(wantStatus, got.Status); diff != "" {
				t.Errorf("claim status (-want +got):\n%s", diff)
			}
			if lost := r.Metrics.BindConflicts(); lost != float64(len(tc.bindAnswers)) {
				t.Errorf("lost binds = %v, want %d", lost, len(tc.bindAnswers))
			}

			// The informer delivers the bound Sandbox; the claim is reconciled again. Having
			// been reported Ready, it records its Sandbox's name (bookkeeping off the claim's
			// path, after claims pause: no pause to wait for here); then nothing more.
			observeSandboxes(t, a, r.Index)
			reconcileClaim(t, r)
			var wantBookkeeping []string
			if meta.IsStatusConditionTrue(got.Status.Conditions, agentsv1beta1.ConditionReady) {
				wantBookkeeping = []string{"patch SandboxClaim/c"}
				if tc.wantBinds > 0 && len(a.Binds()) > 0 {
					wantBookkeeping = append(wantBookkeeping, "event Normal SandboxAdopted SandboxClaim/c")
				}
			}
			if diff := cmp.Diff(wantBookkeeping, a.Journal()); diff != "" {
				t.Errorf("a second reconcile of the served claim wrote (-want +got):\n%s", diff)
			}
			if n, want := r.Metrics.ClaimBookkeepingWrites(), float64(min(len(wantBookkeeping), 1)); n != want {
				t.Errorf("bookkeeping writes counted %v, want %v (the sandbox-name annotation, apart from the claim's path)", n, want)
			}
			reconcileClaim(t, r)
			if diff := cmp.Diff([]string(nil), a.Journal()); diff != "" {
				t.Errorf("a third reconcile of the served claim wrote (-want +got):\n%s", diff)
			}
			if n := len(a.Binds()); n != tc.wantBinds {
				t.Errorf("bind patches after a second reconcile = %d, want still %d", n, tc.wantBinds)
			}
		})
	}
}

// TestClaimReconcileColdStart: without a ready member (or with env or volume claim templates),
// the claim gets a Sandbox of its own, named after it, controlled by it, built as
// policy.ClaimBlueprint says. A Sandbox of that name the claim does not control is never
// adopted, whatever it says of itself: the claim's Sandbox gets a generated name.
func TestClaimReconcileColdStart(t *testing.T) {
	squatter := func(mutate ...func(*builders.SandboxWrapper)) *agentsv1beta1.Sandbox {
		w := builders.MakeSandbox("c", "ns").UID("squatter-uid")
		for _, m := range mutate {
			m(w)
		}
		return w.Obj()
	}
	tests := map[string]struct {
		tmpl              *extv1beta1.SandboxTemplate
		claim             func(*extv1beta1.SandboxTemplate) *extv1beta1.SandboxClaim
		objs              []client.Object
		withMember        bool
		wantGeneratedName bool
		// wantStamp: the claim came without a stamp and is stamped before its Sandbox is made.
		wantStamp bool
	}{
		"no member: a Sandbox named after the claim": {},
		"an unstamped claim (admitted while its template was missing) is stamped first": {
			claim: func(tmpl *extv1beta1.SandboxTemplate) *extv1beta1.SandboxClaim {
				c := testClaim(tmpl)
				delete(c.Annotations, agentsv1beta1.AnnotationSandboxTemplateHash)
				return c
			},
			wantStamp: true,
		},
		"env and volumes: a cold start although a member is ready": {
			tmpl: builders.MakeTemplate("tmpl", "ns").EnvVarsInjectionPolicy(extv1beta1.EnvVarsInjectionAllowed).
				VolumeClaimTemplatesPolicy(extv1beta1.VolumeClaimTemplatesAllowed).Obj(),
			claim: func(tmpl *extv1beta1.SandboxTemplate) *extv1beta1.SandboxClaim {
				return testClaim(tmpl, func(w *builders.ClaimWrapper) {
					w.Env("TOKEN", "t", "").VolumeClaimTemplate("scratch", "1Gi").PodLabel("sandbox.users.io/user", "u1")
				})
			},
			withMember: true,
		},
		"the name is taken by someone's Sandbox: a generated name": {
			objs: []client.Object{squatter()}, wantGeneratedName: true,
		},
		"the name is taken by a Sandbox that wears the claim's UID label: a generated name": {
			objs: []client.Object{squatter(func(w *builders.SandboxWrapper) {
				w.Label(agentsv1beta1.LabelClaimUID, "claim-uid")
			})},
			wantGeneratedName: true,
		},
		"the name is taken by the Sandbox of an earlier claim of the same name: a generated name": {
			objs: []client.Object{func() *agentsv1beta1.Sandbox {
				sb := squatter(func(w *builders.SandboxWrapper) { w.Label(agentsv1beta1.LabelClaimUID, "earlier-claim-uid") })
				earlier := testClaim(testTemplate())
				earlier.UID = "earlier-claim-uid"
				sb.OwnerReferences = []metav1.OwnerReference{claimRef(earlier)}
				return sb
			}()},
			wantGeneratedName: true,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			tmpl := tc.tmpl
			if tmpl == nil {
				tmpl = testTemplate()
			}
			claim := testClaim(tmpl)
			if tc.claim != nil {
				claim = tc.claim(tmpl)
			}
			pool := testPool(0)
			objs := append([]client.Object{tmpl, pool, claim}, tc.objs...)
			if tc.withMember {
				pool.Spec.Replicas = ptr.To[int32](1)
				objs = append(objs, readyMember(pool, tmpl, "pool-a", "10.0.0.1"))
			}
			var before []agentsv1beta1.Sandbox
			for _, o := range tc.objs {
				before = append(before, *o.(*agentsv1beta1.Sandbox).DeepCopy())
			}
			a := newFakeAPI(t, objs...)
			clk := clocktesting.NewFakeClock(planNow)
			r := newClaimReconciler(t, a, clk)
			observeSandboxes(t, a, r.Index)

			// The new Sandbox is not Ready: the claim's status says nothing of it for
			// interimReportDelay, then reports it not Ready.
			if res := reconcileClaim(t, r); res.RequeueAfter != interimReportDelay {
				t.Errorf("requeue after %s, want interimReportDelay %s", res.RequeueAfter, interimReportDelay)
			}
			if st := getClaim(t, a).Status; st.Sandbox.Name != "" || len(st.Conditions) != 0 {
				t.Errorf("within interimReportDelay the claim's status is %+v, want nothing written", st)
			}
			// A claim cold-started for its spec, beside a ready member, is no shortfall of
			// its pool's: its refill is not told of it (poolActivity.shortfall).
			if n := r.activity.unmetClaims(client.ObjectKeyFromObject(pool), clk.Now()); tc.withMember && n != 0 {
				t.Errorf("the pool's unmet claims: %d, want 0 (the claim's spec asked for a cold start)", n)
			}
			clk.Step(interimReportDelay)
			reconcileClaim(t, r)

			var list agentsv1beta1.SandboxList
			if err := a.List(context.Background(), &list); err != nil {
				t.Fatal(err)
			}
			var own []agentsv1beta1.Sandbox
			for _, sb := range list.Items {
				if policy.IsControlledBy(&sb, policy.ClaimKind, claim.UID) {
					own = append(own, sb)
				}
			}
			if len(own) != 1 {
				t.Fatalf("Sandboxes controlled by the claim: %d, want 1", len(own))
			}
			sb := own[0]
			wantJournal := []string{"create Sandbox/c", "event Normal SandboxProvisioned SandboxClaim/c", "patch SandboxClaim/c/status"}
			if tc.wantGeneratedName {
				if !strings.HasPrefix(sb.Name, "c-") {
					t.Errorf("the claim's Sandbox is %s, want a name generated from c-", sb.Name)
				}
				wantJournal = []string{
					"create Sandbox/c (already_exists)", "create Sandbox/" + sb.Name,
					"event Warning SandboxNameTaken SandboxClaim/c", "event Normal SandboxProvisioned SandboxClaim/c",
					"patch SandboxClaim/c/status",
				}
			} else if sb.Name != "c" {
				t.Errorf("the claim's Sandbox is %s, want c", sb.Name)
			}
			if tc.wantStamp {
				wantJournal = append([]string{"patch SandboxClaim/c"}, wantJournal...)
			}
			if stamp := getClaim(t, a).Annotations[agentsv1beta1.AnnotationSandboxTemplateHash]; stamp != policy.TemplateHash(tmpl) {
				t.Errorf("the claim's stamp is %q, want the template's hash %s", stamp, policy.TemplateHash(tmpl))
			}
			if diff := cmp.Diff(wantJournal, a.Journal()); diff != "" {
				t.Errorf("writes and events (-want +got):\n%s", diff)
			}

			wantBP, errs := policy.ClaimBlueprint(tmpl, claim)
			if len(errs) > 0 {
				t.Fatalf("the test's claim is not servable: %v", errs)
			}
			if diff := cmp.Diff(wantBP, sb.Spec.SandboxBlueprint); diff != "" {
				t.Errorf("the Sandbox's blueprint is not policy.ClaimBlueprint's (-want +got):\n%s", diff)
			}
			wantLabels := map[string]string{
				agentsv1beta1.LabelClaimUID:               string(claim.UID),
				agentsv1beta1.LabelLaunchType:             agentsv1beta1.LaunchTypeCold,
				agentsv1beta1.LabelSandboxTemplateHash:    policy.TemplateHash(tmpl),
				agentsv1beta1.LabelSandboxTemplateRefHash: agentsv1beta1.NameHash(tmpl.Name),
			}
			if diff := cmp.Diff(wantLabels, sb.Labels); diff != "" {
				t.Errorf("the Sandbox's labels (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]metav1.OwnerReference{claimRef(claim)}, sb.OwnerReferences); diff != "" {
				t.Errorf("the Sandbox's owners (-want +got):\n%s", diff)
			}
			wantStatus := extv1beta1.SandboxClaimStatus{
				Sandbox:    extv1beta1.SandboxStatusRef{Name: sb.Name},
				Conditions: readyCondition(metav1.ConditionFalse, extv1beta1.ReasonSandboxNotReady, messageSandboxNotReady),
			}
			wantStatus.Conditions[0].LastTransitionTime = metav1.NewTime(clk.Now())
			if diff := cmp.Diff(wantStatus, getClaim(t, a).Status); diff != "" {
				t.Errorf("claim status (-want +got):\n%s", diff)
			}
			if len(a.Binds()) != 0 {
				t.Errorf("bind patches sent: %v, want none", a.Binds())
			}
			for _, want := range before {
				got := &agentsv1beta1.Sandbox{}
				if err := a.Get(context.Background(), client.ObjectKeyFromObject(&want), got); err != nil {
					t.Fatalf("the Sandbox that held the name: %v", err)
				}
				if diff := cmp.Diff(want.OwnerReferences, got.OwnerReferences); diff != "" {
					t.Errorf("the Sandbox that held the name was adopted (-want +got):\n%s", diff)
				}
			}

			// The informer delivers the new Sandbox: nothing more is created or written.
			reconcileClaim(t, r)
			if diff := cmp.Diff([]string(nil), a.Journal()); diff != "" {
				t.Errorf("a second reconcile wrote (-want +got):\n%s", diff)
			}

			// The Sandbox builds its pod (with the binding's labels: nothing to move before
			// Ready) and becomes Ready, its last change: the claim is reported Ready and looks
			// again by itself, to record its Sandbox's name.
			if err := a.Create(context.Background(), podOf(&sb)); err != nil {
				t.Fatal(err)
			}
			sb.Status.PodIPs = []string{"10.0.0.9"}
			sb.Status.Conditions = readyCondition(metav1.ConditionTrue, agentsv1beta1.ReasonDependenciesReady, agentsv1beta1.MessagePodReady)
			if err := a.Status().Update(context.Background(), &sb); err != nil {
				t.Fatal(err)
			}
			a.Journal()
			if res := reconcileClaim(t, r); res.RequeueAfter <= 0 {
				t.Errorf("the reconcile that reports the claim Ready asks for no requeue (%+v): nothing would record its Sandbox's name", res)
			}
			if diff := cmp.Diff([]string{"patch SandboxClaim/c/status"}, a.Journal()); diff != "" {
				t.Errorf("the reconcile that sees the Sandbox Ready wrote (-want +got):\n%s", diff)
			}
			reconcileClaim(t, r)
			if diff := cmp.Diff([]string{"patch SandboxClaim/c"}, a.Journal()); diff != "" {
				t.Errorf("the requeued reconcile wrote (-want +got):\n%s", diff)
			}
			if got := getClaim(t, a).Annotations[agentsv1beta1.AnnotationSandboxName]; got != sb.Name {
				t.Errorf("the claim's %s annotation is %q, want %s", agentsv1beta1.AnnotationSandboxName, got, sb.Name)
			}
		})
	}
}

// TestClaimReconcileNotServed: a claim whose pool or template is missing, whose pod metadata
// uses reserved keys, that expired before it was served or whose Sandbox is gone gets
// Ready=False with the reason, and no Sandbox.
func TestClaimReconcileNotServed(t *testing.T) {
	tests := map[string]struct {
		objs       []client.Object
		claim      *extv1beta1.SandboxClaim
		wantReason string
		wantMsg    string
		// wantSandboxName is status.sandbox.name, which a claim that was bound keeps.
		wantSandboxName string
		wantEvents      []string
	}{
		"no pool": {
			claim:      builders.MakeClaim("c", "ns", "nopool").Obj(),
			wantReason: extv1beta1.ReasonWarmPoolNotFound, wantMsg: "SandboxWarmPool nopool not found",
		},
		"the pool's template is missing": {
			objs:       []client.Object{builders.MakePool("orphan", "ns", "missing").Obj()},
			claim:      builders.MakeClaim("c", "ns", "orphan").Obj(),
			wantReason: extv1beta1.ReasonTemplateNotFound, wantMsg: "SandboxTemplate missing not found",
		},
		"a reserved pod label": {
			objs:       []client.Object{testTemplate(), testPool(1)},
			claim:      testClaim(testTemplate(), func(w *builders.ClaimWrapper) { w.PodLabel(agentsv1beta1.LabelClaimUID, "someone-else") }),
			wantReason: extv1beta1.ReasonInvalidMetadata,
			wantMsg:    "spec.additionalPodMetadata.labels[agents.x-k8s.io/claim-uid]: Forbidden: keys of the agents.x-k8s.io, sandgate.dev, kubernetes.io and k8s.io domains and their subdomains are reserved",
		},
		"expired before it was served: no Sandbox": {
			objs:       []client.Object{testTemplate(), testPool(0)},
			claim:      testClaim(testTemplate(), func(w *builders.ClaimWrapper) { w.ShutdownTime(planNow.Add(-time.Second)) }),
			wantReason: extv1beta1.ReasonClaimExpired,
			wantMsg:    fmt.Sprintf(messageClaimExpiredFmt, planNow.Add(-time.Second).Format(time.RFC3339)),
			wantEvents: []string{"event Normal ClaimExpired SandboxClaim/c"},
		},
		"its Sandbox is gone: SandboxMissing, never served again": {
			objs:       []client.Object{testTemplate(), testPool(0)},
			claim:      testClaim(testTemplate(), func(w *builders.ClaimWrapper) { w.StatusSandbox("c") }),
			wantReason: extv1beta1.ReasonSandboxMissing, wantMsg: "Sandbox c not found", wantSandboxName: "c",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			claim := tc.claim
			claim.UID = "claim-uid"
			a := newFakeAPI(t, append(tc.objs, claim)...)
			r := newClaimReconciler(t, a, clocktesting.NewFakeClock(planNow))

			if res := reconcileClaim(t, r); res != (ctrl.Result{}) {
				t.Errorf("result = %+v, want none: a watch wakes the claim", res)
			}
			if diff := cmp.Diff(append([]string{"patch SandboxClaim/c/status"}, tc.wantEvents...), a.Journal()); diff != "" {
				t.Errorf("writes and events (-want +got):\n%s", diff)
			}
			want := extv1beta1.SandboxClaimStatus{
				Sandbox:    extv1beta1.SandboxStatusRef{Name: tc.wantSandboxName},
				Conditions: readyCondition(metav1.ConditionFalse, tc.wantReason, tc.wantMsg),
			}
			if diff := cmp.Diff(want, getClaim(t, a).Status); diff != "" {
				t.Errorf("claim status (-want +got):\n%s", diff)
			}
			reconcileClaim(t, r)
			if diff := cmp.Diff([]string(nil), a.Journal()); diff != "" {
				t.Errorf("a second reconcile wrote (-want +got):\n%s", diff)
			}
		})
	}
}

// TestClaimReportsAColdSandboxOnce: a cold-started Sandbox that is Ready within
// interimReportDelay is reported once, Ready: the claim's status is written once on its cold
// path. One deleted before the claim's status reported it still leaves the claim bound:
// SandboxMissing, and no second Sandbox.
func TestClaimReportsAColdSandboxOnce(t *testing.T) {
	setup := func(t *testing.T) (*fakeAPI, *claimReconciler, *clocktesting.FakeClock) {
		tmpl := testTemplate()
		a := newFakeAPI(t, tmpl, testPool(0), testClaim(tmpl))
		clk := clocktesting.NewFakeClock(planNow)
		r := newClaimReconciler(t, a, clk)
		reconcileClaim(t, r)
		if n := len(claimSandboxes(t, a, "claim-uid")); n != 1 {
			t.Fatalf("Sandboxes of the claim after its first reconcile: %d, want 1", n)
		}
		return a, r, clk
	}
	statusWrites := func(a *fakeAPI) int {
		n := 0
		for _, e := range a.Journal() {
			if e == "patch SandboxClaim/c/status" {
				n++
			}
		}
		return n
	}

	t.Run("ready within the delay: one status write, Ready", func(t *testing.T) {
		a, r, clk := setup(t)
		sb := &agentsv1beta1.Sandbox{}
		if err := a.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "c"}, sb); err != nil {
			t.Fatal(err)
		}
		// The Sandbox controller's work: the pod, then the Sandbox's Ready status.
		if err := a.Create(context.Background(), podOf(sb)); err != nil {
			t.Fatal(err)
		}
		sb.Status = readyMember(testPool(0), testTemplate(), "c", "10.0.0.7").Status
		if err := a.Status().Update(context.Background(), sb); err != nil {
			t.Fatal(err)
		}
		clk.Step(interimReportDelay / 10)
		reconcileClaim(t, r)

		if n := statusWrites(a); n != 1 {
			t.Errorf("claim status writes: %d, want 1 (%v)", n, a.Journal())
		}
		got := getClaim(t, a).Status
		if got.Sandbox.Name != "c" || !meta.IsStatusConditionTrue(got.Conditions, agentsv1beta1.ConditionReady) {
			t.Errorf("claim status %+v, want Ready naming Sandbox c", got)
		}
	})

	t.Run("deleted before reported: SandboxMissing, not served again", func(t *testing.T) {
		a, r, clk := setup(t)
		clk.Step(interimReportDelay / 10)
		reconcileClaim(t, r) // the cache shows the Sandbox, not Ready: nothing reported yet
		if n := statusWrites(a); n != 0 {
			t.Fatalf("claim status writes within interimReportDelay: %d, want 0", n)
		}
		if err := a.Delete(context.Background(), &agentsv1beta1.Sandbox{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c"}}); err != nil {
			t.Fatal(err)
		}
		clk.Step(interimReportDelay / 10)
		reconcileClaim(t, r)

		ready := meta.FindStatusCondition(getClaim(t, a).Status.Conditions, agentsv1beta1.ConditionReady)
		if ready == nil || ready.Reason != extv1beta1.ReasonSandboxMissing {
			t.Errorf("Ready = %+v, want reason %s", ready, extv1beta1.ReasonSandboxMissing)
		}
		if n := len(claimSandboxes(t, a, "claim-uid")); n != 0 {
			t.Errorf("Sandboxes of the claim: %d, want none: a claim is not served a second Sandbox", n)
		}
	})
}

// The claim controller applies the claim injection rule of the one table the rule's and
// admission's tests iterate too (internal/testing/policycases): Ready=False with the case's reason exactly
// when the case has problems, naming their fields, and otherwise the claim's Sandbox, built as
// policy.ClaimBlueprint says. With TestClaimCreateAppliesTheClaimRule (webhooks), this shows
// that a claim admission accepts is never rejected by the controller, and the reverse.
func TestClaimReconcileAppliesTheClaimRule(t *testing.T) {
	for name, tc := range policycases.Cases() {
		t.Run(name, func(t *testing.T) {
			pool := builders.MakePool(policycases.Pool, policycases.Namespace, tc.Template.Name).Replicas(0).UID("pool-uid").Obj()
			claim := tc.Claim
			claim.UID = "claim-uid"
			metav1.SetMetaDataAnnotation(&claim.ObjectMeta, agentsv1beta1.AnnotationSandboxTemplateHash, policy.TemplateHash(tc.Template))
			a := newFakeAPI(t, tc.Template, pool, claim)
			clk := clocktesting.NewFakeClock(planNow)
			r := newClaimReconciler(t, a, clk)

			for range 2 { // a served claim's cold Sandbox is reported after interimReportDelay
				if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(claim)}); err != nil {
					t.Fatalf("Reconcile: %v", err)
				}
				clk.Step(interimReportDelay)
			}

			got := &extv1beta1.SandboxClaim{}
			if err := a.Get(context.Background(), client.ObjectKeyFromObject(claim), got); err != nil {
				t.Fatal(err)
			}
			ready := meta.FindStatusCondition(got.Status.Conditions, agentsv1beta1.ConditionReady)
			if ready == nil {
				t.Fatalf("no Ready condition: %+v", got.Status)
			}
			own := claimSandboxes(t, a, claim.UID)
			if len(tc.WantErrors) > 0 {
				if ready.Status != metav1.ConditionFalse || ready.Reason != tc.WantReason {
					t.Errorf("Ready = %s %s, want False %s", ready.Status, ready.Reason, tc.WantReason)
				}
				for _, e := range tc.WantErrors {
					if !strings.Contains(ready.Message, e.Field+": ") {
						t.Errorf("Ready message %q does not name %s", ready.Message, e.Field)
					}
				}
				if len(own) != 0 {
					t.Errorf("a claim the rule rejects got Sandbox %s", own[0].Name)
				}
				if diff := cmp.Diff([]string{"patch SandboxClaim/c/status"}, a.Journal()); diff != "" {
					t.Errorf("writes and events (-want +got):\n%s", diff)
				}
				return
			}
			if ready.Reason != extv1beta1.ReasonSandboxNotReady {
				t.Errorf("Ready reason = %s (%s), want %s: the claim is served", ready.Reason, ready.Message, extv1beta1.ReasonSandboxNotReady)
			}
			if len(own) != 1 {
				t.Fatalf("Sandboxes of the claim: %d, want 1", len(own))
			}
			wantBP, _ := policy.ClaimBlueprint(tc.Template, claim)
			if diff := cmp.Diff(wantBP, own[0].Spec.SandboxBlueprint); diff != "" {
				t.Errorf("the Sandbox's blueprint is not policy.ClaimBlueprint's (-want +got):\n%s", diff)
			}
		})
	}
}

// startingMember is a member of pool built from tmpl whose Sandbox is not Ready yet (its pod
// not made, or starting).
func startingMember(pool *extv1beta1.SandboxWarmPool, tmpl *extv1beta1.SandboxTemplate, name string) *agentsv1beta1.Sandbox {
	sb := newPoolMember(pool, tmpl, true)
	sb.Name, sb.UID = name, types.UID("uid-"+name)
	sb.Annotations[agentsv1beta1.AnnotationPodName] = name
	sb.Status = agentsv1beta1.SandboxStatus{Conditions: []metav1.Condition{{
		Type: agentsv1beta1.ConditionReady, Status: metav1.ConditionFalse, Reason: agentsv1beta1.ReasonDependenciesNotReady,
		Message: "Pod does not exist", LastTransitionTime: metav1.NewTime(planNow.Add(-time.Second)),
	}}}
	return sb
}

// A claim that finds no ready member takes one the pool is starting, rather than start a
// Sandbox of its own beside it: one bind patch, no create; the member is the claim's, warm,
// counted as served not ready (agent_sandbox_claim_creation_total, pod_condition not_ready),
// and the claim's status is written once, Ready, when the member is, as a cold start's is.
func TestClaimTakesAStartingMember(t *testing.T) {
	tmpl, pool := testTemplate(), testPool(1)
	member := startingMember(pool, tmpl, "pool-a")
	a := newFakeAPI(t, tmpl, pool, testClaim(tmpl), member)
	clk := clocktesting.NewFakeClock(planNow)
	r := newClaimReconciler(t, a, clk)
	observeSandboxes(t, a, r.Index)

	res := reconcileClaim(t, r)
	if diff := cmp.Diff([]string{"bind Sandbox/pool-a"}, a.Journal()); diff != "" {
		t.Fatalf("first reconcile's writes (-want +got):\n%s", diff)
	}
	if res.RequeueAfter <= 0 || res.RequeueAfter > interimReportDelay {
		t.Errorf("requeue after %s, want within interimReportDelay (%s): the member is reported once Ready", res.RequeueAfter, interimReportDelay)
	}
	if n := r.Metrics.ColdStarts(); n != 0 {
		t.Errorf("cold starts = %v, want 0", n)
	}
	if got := testutil.ToFloat64(r.Metrics.public.claimCreations.WithLabelValues("ns", "tmpl", agentsv1beta1.LaunchTypeWarm, "pool", PodConditionNotReady, agentsv1beta1.CreatedByUnknown)); got != 1 {
		t.Errorf("claims created warm from a member not ready: %v, want 1", got)
	}
	// The pool had no ready member for it: its refill is told it fell short by one
	// (poolActivity.shortfall), until the claim is Ready.
	if n := r.activity.unmetClaims(client.ObjectKeyFromObject(pool), clk.Now()); n != 1 {
		t.Errorf("the pool's unmet claims: %d, want 1", n)
	}

	// The Sandbox controller makes the pod, the claim's Sandbox's now (its labels are the
	// binding's: no route write to make), and reports the member Ready.
	sb := &agentsv1beta1.Sandbox{}
	if err := a.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "pool-a"}, sb); err != nil {
		t.Fatal(err)
	}
	if err := a.Create(context.Background(), podOf(sb)); err != nil {
		t.Fatal(err)
	}
	sb.Status = readyMember(pool, tmpl, "pool-a", "10.0.0.9").Status
	if err := a.Status().Update(context.Background(), sb); err != nil {
		t.Fatal(err)
	}
	observeSandboxes(t, a, r.Index)
	clk.Step(interimReportDelay / 2)
	a.Journal()
	reconcileClaim(t, r)

	got := getClaim(t, a).Status
	if got.Sandbox.Name != "pool-a" || !meta.IsStatusConditionTrue(got.Conditions, agentsv1beta1.ConditionReady) {
		t.Errorf("claim status %+v, want Ready naming pool-a", got)
	}
	if diff := cmp.Diff([]string{"patch SandboxClaim/c/status"}, a.Journal()); diff != "" {
		t.Errorf("second reconcile's writes (-want +got):\n%s", diff)
	}
	if n := r.activity.unmetClaims(client.ObjectKeyFromObject(pool), clk.Now()); n != 0 {
		t.Errorf("the claim Ready: the pool's unmet claims: %d, want 0", n)
	}
	bound := claimSandboxes(t, a, "claim-uid")
	if len(bound) != 1 || bound[0].Labels[agentsv1beta1.LabelLaunchType] != agentsv1beta1.LaunchTypeWarm {
		t.Errorf("the claim's Sandboxes: %v, want pool-a, launch-type warm", bound)
	}
}

// A claim says nothing for interimReportDelay from its first sight, however it is served: one
// that waits out its grace for its pool's members and then cold-starts is reported, not Ready
// and naming its Sandbox, when that delay ends, not its grace plus the delay later, and its
// status is written once on the way.
func TestAClaimsFirstReportIsDueFromItsFirstSight(t *testing.T) {
	tmpl := testTemplate()
	a := newFakeAPI(t, tmpl, testPool(2), testClaim(tmpl)) // no member yet: the pool is to create two
	clk := clocktesting.NewFakeClock(planNow)
	r := newClaimReconciler(t, a, clk)
	r.ColdStartGrace = interimReportDelay / 2
	res := reconcileClaim(t, r) // waits for the pool's members
	if res.RequeueAfter != r.ColdStartGrace {
		t.Fatalf("requeued after %s, want the grace %s", res.RequeueAfter, r.ColdStartGrace)
	}
	clk.Step(r.ColdStartGrace)
	a.Journal()
	res = reconcileClaim(t, r) // the grace is over: cold start
	if sbs := claimSandboxes(t, a, "claim-uid"); len(sbs) != 1 {
		t.Fatalf("the claim's Sandboxes after its grace: %d, want 1 cold-started", len(sbs))
	}
	if st := getClaim(t, a).Status; len(st.Conditions) != 0 || st.Sandbox.Name != "" {
		t.Errorf("status %+v before interimReportDelay from the claim's first sight, want nothing", st)
	}
	if want := interimReportDelay - r.ColdStartGrace; res.RequeueAfter != want {
		t.Errorf("requeued after %s, want %s: the first report is due interimReportDelay after the claim's first sight", res.RequeueAfter, want)
	}
	clk.Step(res.RequeueAfter)
	reconcileClaim(t, r)
	st := getClaim(t, a).Status
	ready := meta.FindStatusCondition(st.Conditions, agentsv1beta1.ConditionReady)
	if st.Sandbox.Name != "c" || ready == nil || ready.Status != metav1.ConditionFalse || ready.Reason != extv1beta1.ReasonSandboxNotReady {
		t.Errorf("status %+v, want not Ready (SandboxNotReady) naming Sandbox c", st)
	}
	var statusWrites int
	for _, w := range a.Journal() {
		if w == "patch SandboxClaim/c/status" {
			statusWrites++
		}
	}
	if statusWrites != 1 {
		t.Errorf("claim status writes from the cold start to the first report: %d, want 1", statusWrites)
	}
}

// A claim that finds no member to take waits its grace for the members its pool is about to
// create, unless it came amid other claims of its pool (within the refill's quiet period):
// those took the members there were, the pool starts more only a few at a time, and the
// claim cold-starts at once rather than wait out its grace for them.
func TestClaimAmidOthersDoesNotWaitForMembersToBeCreated(t *testing.T) {
	for name, tc := range map[string]struct {
		lastClaim  time.Duration // before planNow; negative: none
		wantReason string
		wantCold   bool
	}{
		"the first claim in a while waits for the pool":   {lastClaim: -1, wantReason: extv1beta1.ReasonSandboxCreatePending},
		"a claim after a pause waits for the pool":        {lastClaim: 5 * time.Second, wantReason: extv1beta1.ReasonSandboxCreatePending},
		"a claim amid others cold-starts without waiting": {lastClaim: 200 * time.Millisecond, wantCold: true},
	} {
		t.Run(name, func(t *testing.T) {
			tmpl := testTemplate()
			a := newFakeAPI(t, tmpl, testPool(2), testClaim(tmpl)) // no member yet: the pool is to create two
			r := newClaimReconciler(t, a, clocktesting.NewFakeClock(planNow))
			r.BookkeepingDelay = time.Second
			r.ColdStartGrace = 2 * interimReportDelay // a wait that outlasts the first report's hold
			if tc.lastClaim >= 0 {
				r.activity.touch(types.NamespacedName{Namespace: "ns", Name: "pool"}, planNow.Add(-tc.lastClaim))
			}
			clk := r.Clock.(*clocktesting.FakeClock)
			res := reconcileClaim(t, r)
			if tc.wantReason != "" {
				// A wait is reported only once it has lasted interimReportDelay: most end
				// sooner, and the claim's status is then written once, Ready.
				if ready := meta.FindStatusCondition(getClaim(t, a).Status.Conditions, agentsv1beta1.ConditionReady); ready != nil {
					t.Errorf("Ready = %+v at once, want nothing reported before %s", ready, interimReportDelay)
				}
				if res.RequeueAfter <= 0 || res.RequeueAfter > interimReportDelay {
					t.Errorf("requeued after %s, want within %s, to report the wait", res.RequeueAfter, interimReportDelay)
				}
				clk.Step(interimReportDelay)
				reconcileClaim(t, r)
			}
			sbs := claimSandboxes(t, a, "claim-uid")
			if cold := len(sbs) == 1; cold != tc.wantCold {
				t.Fatalf("cold-started: %v, want %v (%v)", cold, tc.wantCold, a.Journal())
			}
			// A claim cold-started because its pool had nothing to give tells the pool's
			// refill it fell short by one (poolActivity.shortfall).
			if n, want := r.activity.unmetClaims(types.NamespacedName{Namespace: "ns", Name: "pool"}, planNow), map[bool]int{true: 1}[tc.wantCold]; n != want {
				t.Errorf("the pool's unmet claims: %d, want %d", n, want)
			}
			if tc.wantReason != "" {
				ready := meta.FindStatusCondition(getClaim(t, a).Status.Conditions, agentsv1beta1.ConditionReady)
				if ready == nil || ready.Reason != tc.wantReason {
					t.Errorf("Ready = %+v, want reason %q", ready, tc.wantReason)
				}
			}
		})
	}
}
