package performance

import (
	"strings"
	"testing"
	"time"

	"github.com/sandgate-dev/sandgate/test/performance/report"
)

// Every flag that cannot run is named, all at once.
func TestFairShareFlagsValidate(t *testing.T) {
	if err := fairShareFlags.validate(); err != nil {
		t.Errorf("the defaults: %v", err)
	}
	bad := fairShareFlags
	bad.Arms, bad.Profile, bad.Pool, bad.ARate, bad.AHold, bad.AGuaranteed = "alone,both", "slow", 0, 0, -time.Second, 3
	err := bad.validate()
	if err == nil {
		t.Fatal("bad flags validated")
	}
	for _, want := range []string{`unknown arm "both"`, `--fair-share-profile "slow"`, "--fair-share-pool 0", "--fair-share-a-rate 0",
		"want none negative", "--fair-share-a-guaranteed 3: want at most the pool (0)"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
}

// The policy arm's defaults: A guaranteed what it holds at its rate and what it claims during a
// pod start-up (at least half again what it holds), within the pool; B limited to half the
// pool and admitted at A's rate; B's bursts three times the pool. The alone arm has no B,
// only the policy arm a policy.
func TestFairShareArms(t *testing.T) {
	s := fairShareFlags
	s.Pool, s.ARate, s.AHold = 100, 5, 5*time.Second
	if p := s.policy(); p.AGuaranteed != 38 || p.BMaxClaims != 50 || p.BRatePerMinute != 300 || p.BRateBurst != 0 {
		t.Errorf("policy %+v, want A guaranteed 38 (25 held, half again), B at most 50, admitted at A's rate (300 a minute)", p)
	}
	s.Startup = 8 * time.Second
	if p := s.policy(); p.AGuaranteed != 65 {
		t.Errorf("guaranteed %d with 8 s start-ups, want 65 (25 held, 40 claimed during a start-up)", p.AGuaranteed)
	}
	s.Pool = 50
	s.ARate = 100
	if p := s.policy(); p.AGuaranteed != 50 {
		t.Errorf("guaranteed %d, want the pool's 50", p.AGuaranteed)
	}
	s.AGuaranteed, s.BMax = 7, 9
	if p := s.policy(); p.AGuaranteed != 7 || p.BMaxClaims != 9 || p.BWarmMax != nil {
		t.Errorf("policy %+v, want the flags' 7 and 9, no warm maximum for B", p)
	}
	s.BWarmMax = 0
	if p := s.policy(); p.BWarmMax == nil || *p.BWarmMax != 0 {
		t.Errorf("B's warm maximum %v, want the flag's 0", p.BWarmMax)
	}
	s.BAdmissionRate, s.BAdmissionBurst = 0, 0
	if p := s.policy(); p.BRatePerMinute != 0 {
		t.Errorf("B's admission rate %d with the flag's 0, want none", p.BRatePerMinute)
	}
	s.BAdmissionRate, s.BAdmissionBurst = 120, 4
	if p := s.policy(); p.BRatePerMinute != 120 || p.BRateBurst != 4 {
		t.Errorf("B's admission rate %d burst %d, want the flags' 120 and 4", p.BRatePerMinute, p.BRateBurst)
	}
	o := Options{}
	for arm, want := range map[string]struct {
		bursts                   int
		policy, forbidden, floor bool
	}{report.ArmAlone: {0, false, false, false}, report.ArmNoPolicy: {s.BBursts, false, false, false}, report.ArmPolicy: {s.BBursts, true, false, false},
		report.ArmForbidden:  {s.BBursts, false, true, false},
		report.ArmFloorAlone: {0, false, false, true}, report.ArmFloorPolicy: {s.BBursts, true, false, true}} {
		cfg := s.config(arm, o)
		if cfg.BBursts != want.bursts || (cfg.Policy != nil) != want.policy || cfg.BBurst != 150 || cfg.BForbidden != want.forbidden || cfg.Floor != want.floor {
			t.Errorf("%s: %d bursts of %d, policy %v, B forbidden %t, floor %t; want %d bursts of 150, policy %t, forbidden %t, floor %t",
				arm, cfg.BBursts, cfg.BBurst, cfg.Policy, cfg.BForbidden, cfg.Floor, want.bursts, want.policy, want.forbidden, want.floor)
		}
		if err := cfg.Validate(); err != nil {
			t.Errorf("%s: %v", arm, err)
		}
	}
	// The floor binds a fresh member for each claim (its replacements are never bound): both
	// floor arms get a pool that holds A's claims and all of B's the policy can admit, in each
	// burst its bucket (4) and what its rate (2/s) refills while the burst (150 at 50/s) lasts.
	alone, policy := s.config(report.ArmFloorAlone, o), s.config(report.ArmFloorPolicy, o)
	if alone.PoolSize != policy.PoolSize {
		t.Errorf("floor arms' pools %d and %d, want the same", alone.PoolSize, policy.PoolSize)
	}
	// And a few more (5%), not all of B's 300 creates.
	least := int32(alone.AClaims() + s.BBursts*(4+2*3))
	if most := least*21/20 + 20; policy.PoolSize < least || policy.PoolSize > most {
		t.Errorf("floor pool %d, want from %d (A's %d claims and B's admissible) to %d",
			policy.PoolSize, least, alone.AClaims(), most)
	}
	// No limit on B's claims: a policy with B's rate alone, which keeps no ledger.
	s.BMax = -1
	if p := s.policy(); p.BMaxClaims != 0 {
		t.Errorf("B's limit %d with the flag's -1, want none", p.BMaxClaims)
	}
}
