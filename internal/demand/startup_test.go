package demand

import (
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// Without a measured member the start-up time is DefaultStartup.
func TestStartupDefaultsUntilMeasured(t *testing.T) {
	r, _ := newTestRecorder()
	if e := r.Estimate(poolA); e.Startup != DefaultStartup || e.StartupSamples != 0 {
		t.Errorf("got %s over %d samples, want the default %s", e.Startup, e.StartupSamples, DefaultStartup)
	}
}

// A member seen as it was created is measured from that moment (finer than its
// creationTimestamp's second); one seen only later (after a failover) from its
// creationTimestamp to its Ready transition.
func TestStartupMeasuresFromTheCreationSeen(t *testing.T) {
	r, _ := newTestRecorder()
	created := t0.Add(-2 * time.Second)
	r.MemberStarting(poolA, "seen", created.Add(700*time.Millisecond))
	r.MemberReady(poolA, "seen", created, t0)
	if e := r.Estimate(poolA); e.Startup != 1300*time.Millisecond {
		t.Errorf("seen at creation: %s, want 1.3s", e.Startup)
	}
	r2, _ := newTestRecorder()
	r2.MemberReady(poolA, "listed", created, t0)
	if e := r2.Estimate(poolA); e.Startup != 2*time.Second {
		t.Errorf("listed after the fact: %s, want 2s", e.Startup)
	}
}

// The start-up time is the 90th percentile of the most recent StartupSamples members: a few
// slow members do not move it, many do; old samples give way to new ones.
func TestStartupIsARecentPercentile(t *testing.T) {
	r, _ := newTestRecorder()
	ready := t0
	add := func(d time.Duration) {
		ready = ready.Add(time.Second)
		r.MemberReady(poolA, types.UID(fmt.Sprint(ready.UnixNano())), ready.Add(-d), ready)
	}
	for range 95 {
		add(time.Second)
	}
	for range 5 {
		add(30 * time.Second) // outliers
	}
	if e := r.Estimate(poolA); e.Startup != time.Second || e.StartupSamples != StartupSamples {
		t.Errorf("5 outliers in %d: %s over %d samples, want 1s over %d", StartupSamples, e.Startup, e.StartupSamples, StartupSamples)
	}
	for range StartupSamples {
		add(3 * time.Second)
	}
	if e := r.Estimate(poolA); e.Startup != 3*time.Second {
		t.Errorf("after a slower generation of members: %s, want 3s", e.Startup)
	}
	// An older sample delivered late (a listing after a failover) does not displace newer ones.
	r.MemberReady(poolA, "old", t0.Add(-time.Hour), t0)
	if e := r.Estimate(poolA); e.Startup != 3*time.Second {
		t.Errorf("after an old sample: %s, want 3s", e.Startup)
	}
}

// A member that goes before it is Ready is not measured.
func TestStartupForgetsMembersThatGo(t *testing.T) {
	r, _ := newTestRecorder()
	r.MemberStarting(poolA, "m", t0.Add(-time.Minute))
	r.MemberGone(poolA, "m")
	r.MemberReady(poolA, "m", t0.Add(-time.Second), t0)
	if e := r.Estimate(poolA); e.Startup != time.Second {
		t.Errorf("got %s, want 1s from the creationTimestamp (the forgotten start ignored)", e.Startup)
	}
}
