package webhooks_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/yaml"

	"github.com/sandgate-dev/sandgate/api"
	tenancyv1alpha1 "github.com/sandgate-dev/sandgate/api/tenancy/v1alpha1"
	"github.com/sandgate-dev/sandgate/internal/testing/builders"
	"github.com/sandgate-dev/sandgate/webhooks"
)

func TestValidateClaimPolicy(t *testing.T) {
	policy := func() *builders.ClaimPolicyWrapper { return builders.MakeClaimPolicy("quotas", "ns") }
	cases := map[string]struct {
		policy *tenancyv1alpha1.ClaimPolicy
		want   []string
	}{
		"team quotas": {policy: policy().MaxClaims(20).PerPool("python", 10).
			Tenant(builders.MakeTenant("team-a").Group("team-a").MaxClaims(8).PerPool("python", 5).WarmShare("python", 2, 4)).
			Tenant(builders.MakeTenant("bots").ServiceAccount("", "runner").ServiceAccount("ci", "runner")).Obj()},
		"a policy name with a dot": {policy: builders.MakeClaimPolicy("a.b", "ns").Obj(),
			want: []string{"Invalid value metadata.name"}},
		"limits out of range": {policy: policy().MaxClaims(-1).PerPool("python", 10001).Obj(),
			want: []string{"Invalid value spec.maxClaims", "Invalid value spec.perPool[0].maxClaims"}},
		"a pool named twice": {policy: policy().PerPool("python", 1).PerPool("python", 2).Obj(),
			want: []string{"Duplicate value spec.perPool[1].poolName"}},
		"an invalid pool name": {policy: policy().PerPool("Python_1", 1).Obj(),
			want: []string{"Invalid value spec.perPool[0].poolName"}},
		"tenant names": {policy: policy().
			Tenant(builders.MakeTenant("unnamed").User("a")).Tenant(builders.MakeTenant("Team A").User("b")).
			Tenant(builders.MakeTenant("x").User("c")).Tenant(builders.MakeTenant("x").User("d")).Obj(),
			want: []string{"Invalid value spec.tenants[0].name", "Invalid value spec.tenants[1].name", "Duplicate value spec.tenants[3].name"}},
		"a tenant without subjects": {policy: policy().Tenant(builders.MakeTenant("a")).Obj(),
			want: []string{"Required value spec.tenants[0].subjects"}},
		"a subject two tenants name": {policy: policy().Tenant(builders.MakeTenant("a").Group("devs")).Tenant(builders.MakeTenant("b").Group("devs")).Obj(),
			want: []string{"Duplicate value spec.tenants[1].subjects[0]"}},
		"the same service account written two ways": {policy: policy().Tenant(builders.MakeTenant("a").ServiceAccount("", "bot")).
			Tenant(builders.MakeTenant("b").ServiceAccount("ns", "bot")).Obj(),
			want: []string{"Duplicate value spec.tenants[1].subjects[0]"}},
		"malformed subjects": {policy: func() *tenancyv1alpha1.ClaimPolicy {
			p := policy().Tenant(builders.MakeTenant("a").User("")).Obj()
			p.Spec.Tenants[0].Subjects = append(p.Spec.Tenants[0].Subjects,
				tenancyv1alpha1.Subject{Kind: "Robot", Name: "r"},
				tenancyv1alpha1.Subject{Kind: tenancyv1alpha1.SubjectUser, Name: "u", Namespace: "ns"},
				tenancyv1alpha1.Subject{Kind: tenancyv1alpha1.SubjectServiceAccount, Name: "Bad_Name", Namespace: "Bad_NS"},
				tenancyv1alpha1.Subject{Kind: tenancyv1alpha1.SubjectGroup, Name: "a,b"})
			return p
		}(), want: []string{"Required value spec.tenants[0].subjects[0].name", "Unsupported value spec.tenants[0].subjects[1].kind",
			"Forbidden spec.tenants[0].subjects[2].namespace", "Invalid value spec.tenants[0].subjects[3].name",
			"Invalid value spec.tenants[0].subjects[3].namespace", "Invalid value spec.tenants[0].subjects[4].name"}},
		"guaranteed above max": {policy: policy().Tenant(builders.MakeTenant("a").User("a").WarmShare("python", 3, 2)).Obj(),
			want: []string{"Invalid value spec.tenants[0].warmShares[0].guaranteed"}},
		"guaranteed above the tenant's limits": {policy: policy().Tenant(builders.MakeTenant("a").User("a").MaxClaims(5).PerPool("python", 2).
			WarmShare("python", 3, -1).WarmShare("go", 6, -1)).Obj(),
			want: []string{"Invalid value spec.tenants[0].warmShares[0].guaranteed", "Invalid value spec.tenants[0].warmShares[1].guaranteed"}},
		"guarantees above the namespace's limits": {policy: policy().MaxClaims(3).PerPool("python", 2).
			Tenant(builders.MakeTenant("a").User("a").WarmShare("python", 2, -1)).
			Tenant(builders.MakeTenant("b").User("b").WarmShare("python", 2, -1)).Obj(),
			want: []string{"Invalid value spec.perPool[0].maxClaims", "Invalid value spec.maxClaims"}},
		"an unknown action": {policy: policy().WhenBeyondWarmShare("Queue").Obj(),
			want: []string{"Unsupported value spec.whenBeyondWarmShare"}},
		"admission rates": {policy: policy().AdmissionRate(600, 20).Tenant(builders.MakeTenant("a").User("a").AdmissionRate(30, 0)).Obj()},
		"admission rates out of range": {policy: policy().AdmissionRate(0, 10001).
			Tenant(builders.MakeTenant("a").User("a").AdmissionRate(600001, -1)).Obj(),
			want: []string{"Invalid value spec.admissionRate.claimsPerMinute", "Invalid value spec.admissionRate.burst",
				"Invalid value spec.tenants[0].admissionRate.claimsPerMinute"}},
		"a burst of 0": {policy: func() *tenancyv1alpha1.ClaimPolicy {
			p := policy().Tenant(builders.MakeTenant("a").User("a").AdmissionRate(60, 1)).Obj()
			*p.Spec.Tenants[0].AdmissionRate.Burst = 0
			return p
		}(), want: []string{"Invalid value spec.tenants[0].admissionRate.burst"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, summary(webhooks.ValidateClaimPolicy(tc.policy))); diff != "" {
				t.Errorf("ValidateClaimPolicy (-want +got):\n%s", diff)
			}
		})
	}
}

// The sample a platform team starts from is valid, and its docs' examples are too.
func TestTheClaimPolicySampleIsValid(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "config", "samples", "policy_v1alpha1_claimpolicy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	p := &tenancyv1alpha1.ClaimPolicy{}
	if err := yaml.UnmarshalStrict(raw, p); err != nil {
		t.Fatalf("decoding the sample: %v", err)
	}
	p.Namespace = "ns"
	webhooks.DefaultClaimPolicy(p)
	if errs := webhooks.ValidateClaimPolicy(p); len(errs) > 0 {
		t.Errorf("the sample is invalid: %v", errs)
	}
}

func TestDefaultClaimPolicy(t *testing.T) {
	p := builders.MakeClaimPolicy("quotas", "team").Tenant(builders.MakeTenant("bots").ServiceAccount("", "runner").ServiceAccount("ci", "runner").User("u")).Obj()
	webhooks.DefaultClaimPolicy(p)
	want := []tenancyv1alpha1.Subject{
		{Kind: tenancyv1alpha1.SubjectServiceAccount, Name: "runner", Namespace: "team"},
		{Kind: tenancyv1alpha1.SubjectServiceAccount, Name: "runner", Namespace: "ci"},
		{Kind: tenancyv1alpha1.SubjectUser, Name: "u"},
	}
	if diff := cmp.Diff(want, p.Spec.Tenants[0].Subjects); diff != "" {
		t.Errorf("subjects (-want +got):\n%s", diff)
	}
	if p.Spec.WhenBeyondWarmShare != tenancyv1alpha1.ServeCold {
		t.Errorf("whenBeyondWarmShare = %q, want ServeCold", p.Spec.WhenBeyondWarmShare)
	}
	// An admission rate's burst defaults to a second's worth of the rate, at least 1; a burst
	// given stays.
	p = builders.MakeClaimPolicy("rates", "team").AdmissionRate(30, 0).
		Tenant(builders.MakeTenant("a").User("a").AdmissionRate(150, 0)).Tenant(builders.MakeTenant("b").User("b").AdmissionRate(150, 7)).Obj()
	webhooks.DefaultClaimPolicy(p)
	for path, got := range map[string]*int32{"spec.admissionRate": p.Spec.AdmissionRate.Burst,
		"spec.tenants[0].admissionRate": p.Spec.Tenants[0].AdmissionRate.Burst, "spec.tenants[1].admissionRate": p.Spec.Tenants[1].AdmissionRate.Burst} {
		want := map[string]int32{"spec.admissionRate": 1, "spec.tenants[0].admissionRate": 3, "spec.tenants[1].admissionRate": 7}[path]
		if got == nil || *got != want {
			t.Errorf("%s.burst = %v, want %d", path, got, want)
		}
	}
}

func TestClaimPolicyWarnsOfPoolsItCannotFind(t *testing.T) {
	c := fake.NewClientBuilder().WithScheme(api.NewScheme()).WithObjects(builders.MakePool("python", "ns", "tmpl").Replicas(3).Obj()).Build()
	w := webhooks.ClaimPolicyWebhook{Cache: c}
	p := builders.MakeClaimPolicy("quotas", "ns").PerPool("pyhton", 2).
		Tenant(builders.MakeTenant("a").User("a").WarmShare("python", 2, -1)).
		Tenant(builders.MakeTenant("b").User("b").WarmShare("python", 2, -1)).Obj()
	warnings, err := w.ValidateCreate(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"SandboxWarmPool ns/pyhton not found: the policy's limits and shares of it apply once it exists",
		"the tenants' guaranteed warm shares of pool python add up to 4, more than its 3 replicas: some guarantee cannot be met",
	}
	if diff := cmp.Diff(want, []string(warnings)); diff != "" {
		t.Errorf("warnings (-want +got):\n%s", diff)
	}
}
