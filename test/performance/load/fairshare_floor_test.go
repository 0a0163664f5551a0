package load

import (
	"testing"
	"time"
)

func TestFloorGateAdmitsAsThePolicy(t *testing.T) {
	t.Run("limit on claims at once", func(t *testing.T) {
		g := newFloorGate("ns", FairSharePolicy{BMaxClaims: 2})
		for i := range 2 {
			if !g.admit() {
				t.Fatalf("refused claim %d within B's limit of 2", i+1)
			}
		}
		if g.admit() {
			t.Fatal("admitted a third claim beyond B's limit of 2")
		}
		g.release()
		if !g.admit() {
			t.Fatal("refused a claim after one was released")
		}
	})
	t.Run("admission rate", func(t *testing.T) {
		g := newFloorGate("ns", FairSharePolicy{BMaxClaims: 100, BRatePerMinute: 60, BRateBurst: 3})
		now := time.Unix(1000, 0)
		g.rates.Now = func() time.Time { return now }
		for i := range 3 {
			if !g.admit() {
				t.Fatalf("refused claim %d within the bucket of 3", i+1)
			}
		}
		if g.admit() {
			t.Fatal("admitted a fourth claim at once beyond the bucket of 3")
		}
		if g.held != 3 {
			t.Fatalf("a refused claim holds a slot: %d held, want 3", g.held)
		}
		now = now.Add(time.Second)
		if !g.admit() {
			t.Fatal("refused a claim a second later at 60 a minute")
		}
	})
}

func TestFloorPoolSizeHoldsEveryClaimServed(t *testing.T) {
	cfg := FairShareConfig{Duration: time.Minute, ARate: 5, BBursts: 2, BBurst: 300, BRate: 50}
	if got := FloorPoolSize(cfg); got < 300+600 {
		t.Errorf("without a policy: pool %d, want at least A's 300 and B's 600 claims", got)
	}
	cfg.Policy = &FairSharePolicy{BMaxClaims: 50, BRatePerMinute: 300}
	// B's bursts last 6 s each: a bucket of 5 and 30 refilled, per burst.
	got := FloorPoolSize(cfg)
	if got < 300+2*(5+30) || got > 300+600 {
		t.Errorf("with B at 300 a minute: pool %d, want A's 300 claims, B's 70 and a few more", got)
	}
}
