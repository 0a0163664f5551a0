package fairshare

import (
	"testing"

	tenancyv1alpha1 "github.com/sandgate-dev/sandgate/api/tenancy/v1alpha1"
	"github.com/sandgate-dev/sandgate/internal/testing/builders"
)

// The warm-share decision table: who may take a ready member of pool python.
func TestDecideWarm(t *testing.T) {
	p := builders.MakeClaimPolicy("shares", "ns").WhenBeyondWarmShare(tenancyv1alpha1.Wait).
		Tenant(builders.MakeTenant("prod").User("p").WarmShare("python", 3, -1)).
		Tenant(builders.MakeTenant("batch").User("b").WarmShare("python", 1, 2)).
		Tenant(builders.MakeTenant("other").User("o").WarmShare("go", 5, 5)).Obj()
	cases := map[string]struct {
		tenant   string
		held     map[string]int32
		ready    int32
		starting int32
		warm     bool
		take     WarmTake
	}{
		"within its own guarantee, whatever the others need": {"batch", map[string]int32{"batch": 0}, 1, 0, true, TakeAny},
		"within its own guarantee, only starting members":    {"batch", map[string]int32{"batch": 0}, 0, 1, true, TakeAny},
		"at its max":                                             {"batch", map[string]int32{"batch": 2}, 10, 0, false, TakeAny},
		"beyond its guarantee, members to spare":                 {"batch", map[string]int32{"batch": 1}, 4, 0, true, TakeAny},
		"beyond its guarantee, members kept for prod":            {"batch", map[string]int32{"batch": 1}, 3, 0, false, TakeAny},
		"beyond its guarantee, prod's kept ready, starting ones": {"batch", map[string]int32{"batch": 1}, 3, 1, true, TakeStarting},
		"beyond its guarantee, ready and starting to spare":      {"batch", map[string]int32{"batch": 1}, 4, 5, true, TakeAny},
		"beyond its guarantee, all kept, ready or starting":      {"batch", map[string]int32{"batch": 1}, 1, 2, false, TakeAny},
		"prod's guarantee met: no member kept":                   {"batch", map[string]int32{"batch": 1, "prod": 3}, 1, 0, true, TakeAny},
		"prod within its guarantee":                              {"prod", map[string]int32{"batch": 2}, 1, 0, true, TakeAny},
		"prod beyond its guarantee, batch's kept":                {"prod", map[string]int32{"prod": 3}, 1, 0, false, TakeAny},
		"prod beyond its guarantee, no max":                      {"prod", map[string]int32{"prod": 7, "batch": 1}, 1, 0, true, TakeAny},
		"unnamed, members to spare":                              {"", map[string]int32{"prod": 1, "batch": 1}, 3, 0, true, TakeAny},
		"unnamed, members kept for others":                       {"", map[string]int32{"prod": 1, "batch": 1}, 2, 0, false, TakeAny},
		"unnamed, ready kept for others, one starting":           {"", map[string]int32{"prod": 1, "batch": 1}, 2, 1, true, TakeStarting},
		"a tenant with a share of another pool only":             {"other", map[string]int32{}, 4, 0, false, TakeAny},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			take, got := DecideWarm(p, "python", WarmState{Tenant: tc.tenant, Held: tc.held, Ready: tc.ready, Starting: tc.starting})
			if (got == nil) != tc.warm {
				t.Fatalf("DecideWarm warm = %t (%+v), want %t", got == nil, got, tc.warm)
			}
			if got == nil && take != tc.take {
				t.Errorf("DecideWarm take = %d, want %d", take, tc.take)
			}
			if got != nil && (got.Action != tenancyv1alpha1.Wait || got.Policy != "shares" || got.Message == "") {
				t.Errorf("DecideWarm = %+v: want the policy, its action and a message", got)
			}
		})
	}
	if _, got := DecideWarm(builders.MakeClaimPolicy("p", "ns").Tenant(builders.MakeTenant("a").User("a").WarmShare("python", 0, 0)).Obj(),
		"python", WarmState{Tenant: "a", Ready: 1}); got == nil || got.Action != tenancyv1alpha1.ServeCold {
		t.Errorf("a policy without whenBeyondWarmShare: %+v, want ServeCold", got)
	}
}
