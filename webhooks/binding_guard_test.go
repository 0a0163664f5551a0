package webhooks_test

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/sandgate-dev/sandgate/api"
	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	"github.com/sandgate-dev/sandgate/api/policy"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
	"github.com/sandgate-dev/sandgate/internal/testing/builders"
	"github.com/sandgate-dev/sandgate/webhooks"
)

// stampedClaim starts claim name of pool "pool" with uid, stamped with hash ("" for none).
func stampedClaim(name string, uid types.UID, hash string) *builders.ClaimWrapper {
	w := builders.MakeClaim(name, "ns", "pool").UID(uid)
	if hash != "" {
		w.Annotation(agentsv1beta1.AnnotationSandboxTemplateHash, hash)
	}
	return w
}

// boundTo returns sb bound to claim as the binding patch leaves it: the claim-uid label and
// the claim as the only owner (the pool's reference goes).
func boundTo(sb *agentsv1beta1.Sandbox, claim *extv1beta1.SandboxClaim, label, owner bool) *agentsv1beta1.Sandbox {
	sb = sb.DeepCopy()
	if label {
		sb.Labels[agentsv1beta1.LabelClaimUID] = string(claim.UID)
	}
	if owner {
		sb.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(claim, extv1beta1.GroupVersion.WithKind("SandboxClaim"))}
	}
	return sb
}

// guardFixture is a template, its pool and a member built from it as the pool controller
// builds one: the blueprint policy.TemplateBlueprint, the labels, the pool's controller
// reference.
type guardFixture struct {
	tmpl   *extv1beta1.SandboxTemplate
	pool   *extv1beta1.SandboxWarmPool
	hash   string
	member *agentsv1beta1.Sandbox
}

func newGuardFixture() guardFixture {
	tmpl := builders.MakeTemplate("tmpl", "ns").Obj()
	pool := builders.MakePool("pool", "ns", "tmpl").UID("pool-uid").Obj()
	hash := policy.TemplateHash(tmpl)
	return guardFixture{tmpl: tmpl, pool: pool, hash: hash, member: memberOf(pool, policy.TemplateBlueprint(tmpl), hash)}
}

func memberOf(pool *extv1beta1.SandboxWarmPool, bp agentsv1beta1.SandboxBlueprint, label string) *agentsv1beta1.Sandbox {
	return builders.MakeSandbox("m", "ns").UID("member-uid").Blueprint(bp).
		Label(agentsv1beta1.LabelSandboxTemplateHash, label).Label(agentsv1beta1.LabelWarmPoolSandbox, agentsv1beta1.NameHash(pool.Name)).
		ControlledBy(pool, extv1beta1.GroupVersion.WithKind("SandboxWarmPool")).Obj()
}

func TestBindingGuard(t *testing.T) {
	f := newGuardFixture()
	member := f.member
	claim := stampedClaim("c1", "uid-1", f.hash).Obj()
	other := stampedClaim("c2", "uid-2", f.hash).Obj()
	unstamped := stampedClaim("c3", "uid-3", "").Obj()
	ghost := stampedClaim("ghost", "uid-404", f.hash).Obj()
	withMetadata := stampedClaim("c4", "uid-4", f.hash).PodLabel("user", "u1").Obj()
	withEnv := stampedClaim("c5", "uid-5", f.hash).Env("A", "1", "").Obj()
	boundElsewhere := stampedClaim("c6", "uid-6", f.hash).StatusSandbox("another").Obj()

	otherVersion := builders.MakeTemplate("tmpl", "ns").Image("registry.example/agent:2").Obj()
	stale := memberOf(f.pool, policy.TemplateBlueprint(otherVersion), policy.TemplateHash(otherVersion))
	// A member whose blueprint was edited (another image) while its label still says the
	// claim's version: the guard looks at what the Sandbox is.
	lying := memberOf(f.pool, policy.TemplateBlueprint(otherVersion), f.hash)
	earlierPool := builders.MakePool("pool", "ns", "tmpl").UID("earlier-pool-uid").Obj()
	orphan := memberOf(earlierPool, policy.TemplateBlueprint(f.tmpl), f.hash)
	used := member.DeepCopy()
	used.Labels[agentsv1beta1.LabelLaunchType] = agentsv1beta1.LaunchTypeWarm
	mixed := boundTo(boundTo(member, other, true, false), claim, false, true)
	withLabel := func(sb *agentsv1beta1.Sandbox, k, v string) *agentsv1beta1.Sandbox {
		sb = sb.DeepCopy()
		sb.Spec.PodTemplate.ObjectMeta.Labels[k] = v
		return sb
	}

	for _, tc := range []struct {
		name     string
		user     string
		old, new *agentsv1beta1.Sandbox
		// cached is what the manager's cache holds (nil: the cache misses every claim).
		cached   []client.Object
		wantCode int32
		wantMsg  []string
	}{
		{name: "operator binds a member of the claim's version", user: operatorUser, old: member, new: boundTo(member, claim, true, true), wantCode: 200},
		{name: "the claim found only in the API server", user: operatorUser, old: member, new: boundTo(member, claim, true, true), cached: []client.Object{}, wantCode: 200},
		{name: "the binding adds the claim's pod metadata", user: operatorUser, old: member,
			new: boundTo(withLabel(member, "user", "u1"), withMetadata, true, true), wantCode: 200},
		{name: "the binding changes the spec otherwise", user: operatorUser, old: member,
			new: boundTo(withLabel(member, "user", "u2"), withMetadata, true, true), wantCode: 403, wantMsg: []string{"changes the Sandbox's spec"}},
		{name: "a user binds", user: someUser, old: member, new: boundTo(member, claim, true, true), wantCode: 403,
			wantMsg: []string{"ns/m", "c1", f.hash, operatorUser, someUser}},
		{name: "a user sets the claim-uid label", user: someUser, old: member, new: boundTo(member, claim, true, false), wantCode: 403},
		{name: "operator binds a stale member", user: operatorUser, old: stale, new: boundTo(stale, claim, true, true), wantCode: 403,
			wantMsg: []string{"ns/m", "c1", f.hash, policy.TemplateHash(otherVersion)}},
		{name: "operator binds a member whose label lies about its blueprint", user: operatorUser, old: lying, new: boundTo(lying, claim, true, true),
			wantCode: 403, wantMsg: []string{"blueprint hashes to " + policy.TemplateHash(otherVersion)}},
		{name: "operator binds a member of an earlier pool of the same name", user: operatorUser, old: orphan, new: boundTo(orphan, claim, true, true),
			wantCode: 403, wantMsg: []string{"earlier pool"}},
		{name: "operator binds a used sandbox", user: operatorUser, old: used, new: boundTo(used, claim, true, true), wantCode: 403,
			wantMsg: []string{"bound to a claim before"}},
		{name: "operator binds a sandbox that is no pool member", user: operatorUser, old: boundTo(member, claim, false, true),
			new: boundTo(member, claim, true, true), wantCode: 403},
		{name: "operator binds a member to a claim with env", user: operatorUser, old: member, new: boundTo(member, withEnv, true, true),
			wantCode: 403, wantMsg: []string{"cold start"}},
		{name: "operator binds a second sandbox to a claim", user: operatorUser, old: member, new: boundTo(member, boundElsewhere, true, true),
			wantCode: 403, wantMsg: []string{"bound to Sandbox another already"}},
		{name: "operator rebinds", user: operatorUser, old: boundTo(member, other, true, true), new: boundTo(member, claim, true, true), wantCode: 403,
			wantMsg: []string{"already bound", "uid-2"}},
		{name: "operator binds by label only", user: operatorUser, old: member, new: boundTo(member, claim, true, false), wantCode: 403},
		{name: "label and owner name different claims", user: operatorUser, old: member, new: mixed, wantCode: 403},
		{name: "claim does not exist", user: operatorUser, old: member, new: boundTo(member, ghost, true, true), wantCode: 403,
			wantMsg: []string{"does not exist"}},
		{name: "claim not stamped", user: operatorUser, old: member, new: boundTo(member, unstamped, true, true), wantCode: 403,
			wantMsg: []string{"no template-hash stamp"}},
		{name: "a user unbinds", user: someUser, old: boundTo(member, claim, true, true), new: member, wantCode: 403},
		{name: "operator unbinds", user: operatorUser, old: boundTo(member, claim, true, true), new: boundTo(member, claim, false, false), wantCode: 200},
		{name: "a user removes the ownerReference only", user: someUser, old: boundTo(member, claim, true, true), new: boundTo(member, claim, true, false), wantCode: 403},
		{name: "the garbage collector orphans the sandbox of a deleted claim", user: "system:kube-controller-manager",
			old: boundTo(member, ghost, true, true), new: func() *agentsv1beta1.Sandbox {
				sb := boundTo(member, ghost, true, true)
				sb.OwnerReferences = nil
				return sb
			}(), wantCode: 200},
		{name: "a user orphans the sandbox of a deleted claim", user: someUser,
			old: boundTo(member, ghost, true, true), new: func() *agentsv1beta1.Sandbox {
				sb := boundTo(member, ghost, true, true)
				sb.OwnerReferences = nil
				return sb
			}(), wantCode: 403, wantMsg: []string{"a claim's deletion ends its Sandbox"}},
		{name: "a user edits a bound sandbox", user: someUser, old: boundTo(member, claim, true, true),
			new: func() *agentsv1beta1.Sandbox {
				sb := boundTo(member, claim, true, true)
				sb.Spec.OperatingMode = agentsv1beta1.OperatingModeSuspended
				return sb
			}(), wantCode: 200},
		{name: "a user edits a pool member", user: someUser, old: member,
			new: func() *agentsv1beta1.Sandbox {
				sb := member.DeepCopy()
				sb.Spec.PodTemplate.Spec.Containers[0].Image = "attacker.example/evil:1"
				return sb
			}(), wantCode: 403, wantMsg: []string{"change the spec of a member"}},
		{name: "a user suspends a pool member", user: someUser, old: member,
			new: func() *agentsv1beta1.Sandbox {
				sb := member.DeepCopy()
				sb.Spec.OperatingMode = agentsv1beta1.OperatingModeSuspended
				return sb
			}(), wantCode: 403},
		{name: "a user relabels a pool member", user: someUser, old: member,
			new: func() *agentsv1beta1.Sandbox {
				sb := member.DeepCopy()
				sb.Labels[agentsv1beta1.LabelSandboxTemplateHash] = "0123456789abcdef"
				return sb
			}(), wantCode: 403, wantMsg: []string{agentsv1beta1.LabelSandboxTemplateHash}},
		{name: "a user takes a member out of its pool", user: someUser, old: member,
			new: func() *agentsv1beta1.Sandbox {
				sb := member.DeepCopy()
				sb.OwnerReferences = nil
				return sb
			}(), wantCode: 200},
		{name: "a user puts a sandbox into a pool", user: someUser,
			old: func() *agentsv1beta1.Sandbox {
				sb := member.DeepCopy()
				sb.OwnerReferences = nil
				return sb
			}(), new: member, wantCode: 403, wantMsg: []string{"member of a SandboxWarmPool"}},
		{name: "the operator changes a member", user: operatorUser, old: member, new: lying, wantCode: 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			apiReader := fakeClient(claim, other, unstamped, withMetadata, withEnv, boundElsewhere, f.pool, f.tmpl)
			cache := client.Reader(apiReader)
			if tc.cached != nil {
				cache = fakeClient(tc.cached...)
			}
			w := &webhooks.BindingGuard{Cache: cache, APIReader: apiReader, OperatorUser: operatorUser}
			_, err := w.ValidateUpdate(request(tc.user, admissionv1.Update), tc.old, tc.new)
			if diff := cmp.Diff(tc.wantCode, code(err)); diff != "" {
				t.Fatalf("status code (-want +got):\n%s\nerror: %v", diff, err)
			}
			for _, part := range tc.wantMsg {
				if !strings.Contains(err.Error(), part) {
					t.Errorf("message %q lacks %q", err.Error(), part)
				}
			}
		})
	}
}

// A Sandbox created bound to a claim (a cold start) is admitted only from the operator, and
// only when it is exactly what the claim's template builds for the claim.
func TestColdStartGuard(t *testing.T) {
	f := newGuardFixture()
	allowEnv := builders.MakeTemplate("tmpl", "ns").EnvVarsInjectionPolicy(extv1beta1.EnvVarsInjectionAllowed).Obj()
	envHash := policy.TemplateHash(allowEnv)
	claim := stampedClaim("c1", "uid-1", envHash).Env("A", "1", "").Obj()
	stale := stampedClaim("c2", "uid-2", "0123456789abcdef").Obj()
	bound := stampedClaim("c3", "uid-3", envHash).StatusSandbox("c3").Obj()

	coldFor := func(c *extv1beta1.SandboxClaim, edit func(*agentsv1beta1.SandboxBlueprint)) *agentsv1beta1.Sandbox {
		bp, errs := policy.ClaimBlueprint(allowEnv, c)
		if len(errs) > 0 {
			t.Fatal(errs)
		}
		if edit != nil {
			edit(&bp)
		}
		return boundTo(builders.MakeSandbox("cold", "ns").Label(agentsv1beta1.LabelSandboxTemplateHash, envHash).Blueprint(bp).Obj(), c, true, true)
	}
	for _, tc := range []struct {
		name     string
		user     string
		sb       *agentsv1beta1.Sandbox
		wantCode int32
		wantMsg  []string
	}{
		{name: "the operator's cold start", user: operatorUser, sb: coldFor(claim, nil), wantCode: 200},
		{name: "a user's", user: someUser, sb: coldFor(claim, nil), wantCode: 403, wantMsg: []string{someUser}},
		{name: "not what the template builds", user: operatorUser, wantCode: 403, wantMsg: []string{"is not what template tmpl"},
			sb: coldFor(claim, func(bp *agentsv1beta1.SandboxBlueprint) {
				bp.PodTemplate.Spec.Containers[0].Image = "attacker.example/evil:1"
			})},
		{name: "a claim stamped with another version", user: operatorUser, sb: coldFor(stale, nil), wantCode: 403, wantMsg: []string{"restamped"}},
		{name: "a claim bound already", user: operatorUser, sb: coldFor(bound, nil), wantCode: 403, wantMsg: []string{"bound to Sandbox c3 already"}},
		{name: "a user creates a pool member", user: someUser, sb: f.member, wantCode: 403, wantMsg: []string{"member of a SandboxWarmPool"}},
		{name: "a user creates a sandbox with the pool's labels", user: someUser, wantCode: 403, wantMsg: []string{agentsv1beta1.LabelWarmPoolSandbox},
			sb: builders.MakeSandbox("lookalike", "ns").Label(agentsv1beta1.LabelWarmPoolSandbox, agentsv1beta1.NameHash("pool")).Obj()},
		{name: "the operator creates a pool member", user: operatorUser, sb: f.member, wantCode: 200},
		{name: "a user creates a sandbox of their own", user: someUser, sb: builders.MakeSandbox("mine", "ns").Obj(), wantCode: 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pool := f.pool.DeepCopy()
			reader := fakeClient(claim, stale, bound, pool, allowEnv)
			w := &webhooks.BindingGuard{Cache: reader, APIReader: reader, OperatorUser: operatorUser}
			_, err := w.ValidateCreate(request(tc.user, admissionv1.Create), tc.sb)
			if diff := cmp.Diff(tc.wantCode, code(err)); diff != "" {
				t.Fatalf("status code (-want +got):\n%s\nerror: %v", diff, err)
			}
			for _, part := range tc.wantMsg {
				if !strings.Contains(err.Error(), part) {
					t.Errorf("message %q lacks %q", err.Error(), part)
				}
			}
		})
	}
}

// A stale cache entry (an older claim of the same name) is not trusted: the API server's
// claim decides.
func TestBindingGuardReadsThroughStaleCache(t *testing.T) {
	f := newGuardFixture()
	claim := stampedClaim("c1", "uid-new", f.hash).Obj()
	w := &webhooks.BindingGuard{
		Cache:        fakeClient(stampedClaim("c1", "uid-old", staleHash).Obj()),
		APIReader:    fakeClient(claim, f.pool),
		OperatorUser: operatorUser,
	}
	if _, err := w.ValidateUpdate(request(operatorUser, admissionv1.Update), f.member, boundTo(f.member, claim, true, true)); err != nil {
		t.Errorf("binding refused: %v", err)
	}
}

// The operator stamps a claim (or restamps it: its template version is gone) and creates its
// Sandbox at once: a cache that does not show the stamp yet does not refuse that cold start (it
// cost a 403 and a retry with backoff); the API server's claim decides, and a claim it shows
// unstamped, stamped with another version or replaced by another of that name is refused.
func TestColdStartGuardReadsAStampThroughTheCache(t *testing.T) {
	f := newGuardFixture()
	stamped := stampedClaim("c1", "uid-1", f.hash).Obj()
	bp, errs := policy.ClaimBlueprint(f.tmpl, stamped)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	sb := boundTo(builders.MakeSandbox("c1", "ns").Label(agentsv1beta1.LabelSandboxTemplateHash, f.hash).Blueprint(bp).Obj(), stamped, true, true)
	unstamped := stampedClaim("c1", "uid-1", "").Obj()
	old := stampedClaim("c1", "uid-1", staleHash).Obj()
	for _, tc := range []struct {
		name          string
		user          string
		cache, server *extv1beta1.SandboxClaim
		wantCode      int32
		// wantClaimReads is how often the API server is asked for the claim.
		wantClaimReads int
	}{
		{name: "stamped on the API server, not in the cache yet", cache: unstamped, server: stamped, wantCode: 200, wantClaimReads: 1},
		{name: "restamped on the API server, not in the cache yet", cache: old, server: stamped, wantCode: 200, wantClaimReads: 1},
		{name: "unstamped on the API server too", cache: unstamped, server: unstamped, wantCode: 403, wantClaimReads: 1},
		{name: "stamped with another version on the API server too", cache: old, server: old, wantCode: 403, wantClaimReads: 1},
		{name: "another claim of that name on the API server", cache: old, server: stampedClaim("c1", "uid-2", f.hash).Obj(), wantCode: 403, wantClaimReads: 1},
		{name: "the cache shows the stamp", cache: stamped, server: stamped, wantCode: 200, wantClaimReads: 0},
		// Nobody else's binding can be admitted: a tenant's request makes the guard read no
		// claim from the API server, whatever its labels say.
		{name: "a tenant's cold start", user: someUser, cache: unstamped, server: stamped, wantCode: 403, wantClaimReads: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			claimReads := 0
			server := fakeClientBuilder(tc.server, f.pool.DeepCopy(), f.tmpl.DeepCopy()).
				WithInterceptorFuncs(interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
					if _, ok := obj.(*extv1beta1.SandboxClaim); ok {
						claimReads++
					}
					return c.Get(ctx, key, obj, opts...)
				}}).Build()
			w := &webhooks.BindingGuard{
				Cache:        fakeClient(tc.cache, f.pool.DeepCopy(), f.tmpl.DeepCopy()),
				APIReader:    server,
				OperatorUser: operatorUser,
			}
			user := tc.user
			if user == "" {
				user = operatorUser
			}
			_, err := w.ValidateCreate(request(user, admissionv1.Create), sb)
			if diff := cmp.Diff(tc.wantCode, code(err)); diff != "" {
				t.Errorf("status code (-want +got):\n%s\nerror: %v", diff, err)
			}
			if claimReads != tc.wantClaimReads {
				t.Errorf("the claim was read from the API server %d times, want %d", claimReads, tc.wantClaimReads)
			}
		})
	}
}

// The guard refuses a second Sandbox for a claim whose status does not show the first one
// yet, however it finds the first: through the cache's indexes.SandboxClaimUID index (the
// operator's setup), or by label from the API server when the cache cannot answer.
func TestBindingGuardFindsTheClaimsOtherSandbox(t *testing.T) {
	f := newGuardFixture()
	claim := stampedClaim("c1", "uid-1", f.hash).Obj()
	first := boundTo(f.member, claim, true, true)
	first.Name = "first"
	objects := []client.Object{claim, f.pool, f.tmpl, first}
	// Only the cache holds the first Sandbox: the guard finds it through the index.
	indexed := fakeClient(objects...)
	withoutFirst := fakeClient(claim, f.pool, f.tmpl)
	// A cache without the index cannot answer: the API server does.
	unindexed := fake.NewClientBuilder().WithScheme(api.NewScheme()).WithObjects(objects...).Build()
	for name, w := range map[string]*webhooks.BindingGuard{
		"index":      {Cache: indexed, APIReader: withoutFirst},
		"API server": {Cache: unindexed, APIReader: fakeClient(objects...)},
	} {
		t.Run(name, func(t *testing.T) {
			w.OperatorUser = operatorUser
			_, err := w.ValidateUpdate(request(operatorUser, admissionv1.Update), f.member, boundTo(f.member, claim, true, true))
			if code(err) != 403 || !strings.Contains(err.Error(), "bound to Sandbox first already") {
				t.Fatalf("got %d %v, want 403: the claim is bound to Sandbox first already", code(err), err)
			}
		})
	}
}

// BenchmarkBindingGuardAdmission is the operator's share of a warm binding's admission round
// trip: the guard decodes the member before and after the bind patch and checks it against
// the claim's stamp.
func BenchmarkBindingGuardAdmission(b *testing.B) {
	fx := newGuardFixture()
	claim := stampedClaim("c1", "uid-1", fx.hash).Obj()
	reader := fakeClient(claim, fx.pool, fx.tmpl)
	hook := admission.WithValidator(api.NewScheme(), &webhooks.BindingGuard{Cache: reader, APIReader: reader, OperatorUser: operatorUser})
	body := review(b, admissionv1.Update, operatorUser, boundTo(fx.member, claim, true, true), fx.member)
	serve(b, hook, body)
}
