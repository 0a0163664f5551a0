package reconcilers

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// policyMeter holds what the claim controller served under each policy's tenants since the
// policy controller last wrote it into the policy's status: counts of this process's, added to
// the status's own, so that the status keeps them across restarts and fail-overs (a leader that
// dies loses what it counted and did not write yet).
type policyMeter struct {
	mu     sync.Mutex
	counts map[meterKey]*meterCount
}

type meterKey struct {
	policy types.NamespacedName
	tenant string
}

type meterCount struct{ warmHits, coldStarts int64 }

func newPolicyMeter() *policyMeter { return &policyMeter{counts: map[meterKey]*meterCount{}} }

// served counts one claim served under policy ns/policy as tenant.
func (m *policyMeter) served(ns, policy, tenant string, warm bool) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	k := meterKey{types.NamespacedName{Namespace: ns, Name: policy}, tenant}
	c := m.counts[k]
	if c == nil {
		c = &meterCount{}
		m.counts[k] = c
	}
	if warm {
		c.warmHits++
	} else {
		c.coldStarts++
	}
}

// pending returns the counts of policy not written yet, by tenant.
func (m *policyMeter) pending(policy types.NamespacedName) map[string]meterCount {
	out := map[string]meterCount{}
	if m == nil {
		return out
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for k, c := range m.counts {
		if k.policy == policy {
			out[k.tenant] = *c
		}
	}
	return out
}

// written subtracts counts the policy's status now holds.
func (m *policyMeter) written(policy types.NamespacedName, counts map[string]meterCount) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for tenant, w := range counts {
		k := meterKey{policy, tenant}
		if c := m.counts[k]; c != nil {
			c.warmHits -= w.warmHits
			c.coldStarts -= w.coldStarts
			if c.warmHits == 0 && c.coldStarts == 0 {
				delete(m.counts, k)
			}
		}
	}
}

// forget drops a deleted policy's counts.
func (m *policyMeter) forget(policy types.NamespacedName) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for k := range m.counts {
		if k.policy == policy {
			delete(m.counts, k)
		}
	}
}

// seenReservations are the reservation IDs the claim informer showed on a claim, with when:
// a reservation seen is spent, whether its claim still exists or not (created and deleted
// between two counts). An ID is kept as long as a reservation of it can be in a ledger.
//
// It also keeps the names of the claims seen: a reservation of a named claim whose create was
// refused as AlreadyExists is told by another claim of its name, which may be gone by the
// time the leader looks.
type seenReservations struct {
	mu    sync.Mutex
	ids   map[string]time.Time
	names map[types.NamespacedName]time.Time
	keep  time.Duration
	last  time.Time
}

func newSeenReservations(keep time.Duration) *seenReservations {
	return &seenReservations{ids: map[string]time.Time{}, names: map[types.NamespacedName]time.Time{}, keep: keep}
}

// seeClaim records a claim the informer showed: its reservation and its name.
func (s *seenReservations) seeClaim(nn types.NamespacedName, id string, now time.Time) {
	s.mu.Lock()
	s.names[nn] = now
	s.mu.Unlock()
	s.see(id, now)
}

// seenName reports whether a claim nn was seen.
func (s *seenReservations) seenName(nn types.NamespacedName) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.names[nn]
	return ok
}

// see records id (of a claim the informer showed) at now; it drops IDs older than keep, at
// most once per keep.
func (s *seenReservations) see(id string, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.ids[id]; !ok && id != "" {
		s.ids[id] = now
	}
	if now.Sub(s.last) > s.keep {
		for k, at := range s.ids {
			if now.Sub(at) > s.keep {
				delete(s.ids, k)
			}
		}
		for k, at := range s.names {
			if now.Sub(at) > s.keep {
				delete(s.names, k)
			}
		}
		s.last = now
	}
}

func (s *seenReservations) has(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.ids[id]
	return ok
}
