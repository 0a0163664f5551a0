package fairshare

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	tenancyv1alpha1 "github.com/sandgate-dev/sandgate/api/tenancy/v1alpha1"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
	"github.com/sandgate-dev/sandgate/internal/testing/builders"
)

func TestTenantOfIsTheFirstTenantThatNamesTheCreator(t *testing.T) {
	p := builders.MakeClaimPolicy("quotas", "ns").
		Tenant(builders.MakeTenant("alpha").User("alice").Group("team-a")).
		Tenant(builders.MakeTenant("beta").Group("team-b").Group("team-a")).
		Tenant(builders.MakeTenant("bots").ServiceAccount("", "runner").ServiceAccount("ci", "runner")).Obj()
	cases := map[string]struct {
		id   Identity
		want string
	}{
		"a user subject":                             {Identity{User: "alice"}, "alpha"},
		"a group subject":                            {Identity{User: "bob", Groups: []string{"system:authenticated", "team-b"}}, "beta"},
		"two tenants name it: the first":             {Identity{User: "carol", Groups: []string{"team-a"}}, "alpha"},
		"a service account of the policy's ns":       {Identity{User: "system:serviceaccount:ns:runner"}, "bots"},
		"a service account of a named ns":            {Identity{User: "system:serviceaccount:ci:runner"}, "bots"},
		"a service account of another ns":            {Identity{User: "system:serviceaccount:other:runner"}, ""},
		"a user named like a service account's name": {Identity{User: "runner"}, ""},
		"nobody named":                               {Identity{User: "mallory", Groups: []string{"system:authenticated"}}, ""},
		"no identity recorded":                       {Identity{}, ""},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := TenantOf(p, tc.id); got != tc.want {
				t.Errorf("TenantOf(%+v) = %q, want %q", tc.id, got, tc.want)
			}
		})
	}
}

func TestIdentityOfReadsWhatAdmissionRecorded(t *testing.T) {
	c := builders.MakeClaim("c", "ns", "pool").
		Annotation(agentsv1beta1.AnnotationCreator, "bob").
		Annotation(tenancyv1alpha1.AnnotationCreatorGroups, "system:authenticated,team-b").Obj()
	want := Identity{User: "bob", Groups: []string{"system:authenticated", "team-b"}}
	if diff := cmp.Diff(want, IdentityOf(c)); diff != "" {
		t.Errorf("IdentityOf (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(Identity{}, IdentityOf(builders.MakeClaim("old", "ns", "pool").Obj())); diff != "" {
		t.Errorf("a claim admitted before identities were recorded (-want +got):\n%s", diff)
	}
}

func TestRecordedGroupsKeepThoseAPolicyNamesFirst(t *testing.T) {
	policies := []tenancyv1alpha1.ClaimPolicy{*builders.MakeClaimPolicy("p", "ns").Tenant(builders.MakeTenant("t").Group("zz-named")).Obj()}
	many := []string{"zz-named"}
	for i := 0; i < 100; i++ {
		many = append(many, "g"+string(rune('a'+i%26))+string(rune('a'+i/26)))
	}
	cases := map[string]struct {
		groups []string
		want   string
	}{
		"sorted, deduplicated":   {[]string{"b", "a", "b"}, "a,b"},
		"none":                   {nil, ""},
		"a comma cannot be kept": {[]string{"a,b", "c"}, "c"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := RecordedGroups(tc.groups, policies); got != tc.want {
				t.Errorf("RecordedGroups(%v) = %q, want %q", tc.groups, got, tc.want)
			}
		})
	}
	got := IdentityOf(builders.MakeClaim("c", "ns", "p").Annotation(tenancyv1alpha1.AnnotationCreatorGroups, RecordedGroups(many, policies)).Obj())
	if len(got.Groups) != tenancyv1alpha1.MaxCreatorGroups {
		t.Errorf("recorded %d groups of %d, want %d", len(got.Groups), len(many), tenancyv1alpha1.MaxCreatorGroups)
	}
	if TenantOf(&policies[0], got) != "t" {
		t.Errorf("the group a policy names was dropped from %v", got.Groups)
	}
}
