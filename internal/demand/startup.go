package demand

import (
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// Member start-up: from a member's creation to its Ready.
const (
	// DefaultStartup is the start-up time planned with before any member of the pool was
	// measured.
	DefaultStartup = 5 * time.Second
	// StartupSamples is how many of the pool's most recent members the start-up time is
	// measured over.
	StartupSamples = 64
	// StartupPercentile is the percentile of those taken: most members start within it, a
	// few slow ones (a cold node, an image pull) do not make it.
	StartupPercentile = 90
)

// startupSamples are a pool's measured start-up times, the most recent StartupSamples by the
// time the member became Ready, and the members seen starting.
type startupSamples struct {
	starting map[types.UID]time.Time
	samples  []startupSample
}

type startupSample struct {
	ready time.Time
	took  time.Duration
}

// MemberStarting records that member uid of pool was created at created and is not Ready
// yet. The caller passes the time it saw the creation when it saw it as it happened (finer
// than the creationTimestamp's second), else the creationTimestamp.
func (r *Recorder) MemberStarting(pool types.NamespacedName, uid types.UID, created time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := &r.pool(pool).startup
	if s.starting == nil {
		s.starting = map[types.UID]time.Time{}
	}
	if _, seen := s.starting[uid]; !seen {
		s.starting[uid] = created
	}
}

// MemberReady records that member uid of pool, created at created (its creationTimestamp),
// became Ready at ready, and measures its start-up from the creation MemberStarting recorded
// when there is one.
func (r *Recorder) MemberReady(pool types.NamespacedName, uid types.UID, created, ready time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := &r.pool(pool).startup
	if seen, ok := s.starting[uid]; ok {
		created = seen
		delete(s.starting, uid)
	}
	if created.IsZero() || ready.IsZero() || ready.Before(created) {
		return
	}
	s.add(startupSample{ready: ready, took: ready.Sub(created)})
}

// MemberGone forgets member uid of pool (deleted, or claimed before it was Ready).
func (r *Recorder) MemberGone(pool types.NamespacedName, uid types.UID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if p := r.pools[pool]; p != nil {
		delete(p.startup.starting, uid)
	}
}

// add keeps sample if it is among the StartupSamples most recent.
func (s *startupSamples) add(sample startupSample) {
	if len(s.samples) < StartupSamples {
		s.samples = append(s.samples, sample)
		return
	}
	oldest := 0
	for i, x := range s.samples {
		if x.ready.Before(s.samples[oldest].ready) {
			oldest = i
		}
	}
	if sample.ready.After(s.samples[oldest].ready) {
		s.samples[oldest] = sample
	}
}

// percentile is the StartupPercentile of the samples (nearest rank) and their number;
// DefaultStartup without any.
func (s *startupSamples) percentile() (time.Duration, int) {
	n := len(s.samples)
	if n == 0 {
		return DefaultStartup, 0
	}
	took := make([]time.Duration, n)
	for i, x := range s.samples {
		took[i] = x.took
	}
	slices.Sort(took)
	rank := (StartupPercentile*n + 99) / 100 // ceil(p·n/100), 1-based
	return took[max(rank, 1)-1], n
}
