package reconcilers

import "k8s.io/apimachinery/pkg/types"

// A raise of a pool's replicas is not a refill. The refill waits for claims to pause, and is
// bounded while they keep coming, because it replaces members claims took and competes with
// their writes; but replicas rise when someone asks for capacity ahead of demand — a person, an
// HPA, or the WarmPoolAutoscaler, which raises them the moment a burst starts arriving at
// admission. Deferring those members until the burst pauses would defer them past the claims
// they were asked for. So the members a raise adds are created at once (at the pool's refill
// rate, in batches), and only the members claims take are refilled the careful way.
//
// The growth of a pool is how many of its missing members are owed to raises: each raise adds
// its size, a cut takes its size back, creates pay it down, and it never exceeds what the pool
// is missing (members that came back, or claims that took fewer, owe nothing).

// grown records pool's replicas and returns its growth: the missing members (of missing) owed
// to raises of its replicas. The first look at a pool owes nothing: its first fill is not
// deferred anyway.
func (p *refillPacing) grown(pool types.NamespacedName, replicas, missing int) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	last, seen := p.replicas[pool]
	p.replicas[pool] = replicas
	g := p.growth[pool]
	if seen {
		g += replicas - last
	}
	g = min(max(g, 0), max(missing, 0))
	if g == 0 {
		delete(p.growth, pool)
	} else {
		p.growth[pool] = g
	}
	return g
}

// grew pays n creates down from pool's growth.
func (p *refillPacing) grew(pool types.NamespacedName, n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if g := p.growth[pool] - n; g > 0 {
		p.growth[pool] = g
	} else {
		delete(p.growth, pool)
	}
}
