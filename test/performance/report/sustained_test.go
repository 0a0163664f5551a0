package report

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestWindowsGroupClaimsByCreateTime(t *testing.T) {
	cases := map[string]struct {
		samples []Sample
		want    []Window
	}{
		"no samples": {},
		"one window": {
			samples: []Sample{{AtSeconds: 0, Ms: 10, Warm: true}, {AtSeconds: 9.99, Ms: 30}},
			want:    []Window{{AtSeconds: 0, Claims: 2, P50Ms: 10, P99Ms: 30, WarmShare: 0.5}},
		},
		"an empty window in between is kept, so that a stall shows": {
			samples: []Sample{{AtSeconds: 1, Ms: 5, Warm: true}, {AtSeconds: 25, Ms: 7, Warm: true}, {AtSeconds: 20, Ms: 9}},
			want: []Window{
				{AtSeconds: 0, Claims: 1, P50Ms: 5, P99Ms: 5, WarmShare: 1},
				{AtSeconds: 10},
				{AtSeconds: 20, Claims: 2, P50Ms: 7, P99Ms: 9, WarmShare: 0.5},
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Windows(tc.samples, WindowSeconds)); diff != "" {
				t.Errorf("Windows (-want +got):\n%s", diff)
			}
		})
	}
}

func TestWarmShareIsTheShareOfWarmSamples(t *testing.T) {
	samples := []Sample{{Warm: true}, {Warm: true}, {}}
	if got, want := WarmShare(samples), 0.6667; got != want {
		t.Errorf("WarmShare = %v, want %v", got, want)
	}
	if got := WarmShare(nil); got != 0 {
		t.Errorf("WarmShare(nil) = %v, want 0", got)
	}
}

func TestRefillKeptUpOnlyWhenThePoolNeverRanDryAfterTheGrace(t *testing.T) {
	cases := map[string]struct {
		pool         []PoolPoint
		wantOK       bool
		wantMinReady int32
		wantDry      int
	}{
		"dry during the grace only": {
			pool:   []PoolPoint{{AtSeconds: 0, Ready: 10}, {AtSeconds: 5, Ready: 0}, {AtSeconds: 10, Ready: 3}, {AtSeconds: 20, Ready: 4}},
			wantOK: true, wantMinReady: 3,
		},
		"dry after the grace": {
			pool:         []PoolPoint{{AtSeconds: 11, Ready: 2}, {AtSeconds: 12, Ready: 0}, {AtSeconds: 13, Ready: 0}},
			wantMinReady: 0, wantDry: 2,
		},
		"dry after the last create does not count": {
			pool:   []PoolPoint{{AtSeconds: 15, Ready: 1}, {AtSeconds: 31, Ready: 0}},
			wantOK: true, wantMinReady: 1,
		},
		"no sample in the span": {pool: []PoolPoint{{AtSeconds: 1, Ready: 5}}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ok, minReady, dry := RefillKeptUp(tc.pool, RefillGraceSeconds, 30)
			if ok != tc.wantOK || minReady != tc.wantMinReady || dry != tc.wantDry {
				t.Errorf("RefillKeptUp = %v, %d, %d; want %v, %d, %d", ok, minReady, dry, tc.wantOK, tc.wantMinReady, tc.wantDry)
			}
		})
	}
}

func TestReadyWarmShareTakesOffClaimsServedFromStartingMembers(t *testing.T) {
	samples := []Sample{{Warm: true}, {Warm: true}, {Warm: true}, {}}
	for _, c := range []struct {
		starting int
		want     float64
	}{{-1, 0.75}, {0, 0.75}, {1, 0.5}, {9, 0}} {
		if got := ReadyWarmShare(samples, c.starting); got != c.want {
			t.Errorf("ReadyWarmShare(3 of 4 warm, %d starting) = %v, want %v", c.starting, got, c.want)
		}
	}
}
