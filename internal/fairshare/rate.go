package fairshare

import (
	"fmt"
	"math"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"

	tenancyv1alpha1 "github.com/sandgate-dev/sandgate/api/tenancy/v1alpha1"
)

// A ClaimPolicy's admission rates (spec.admissionRate, a tenant's admissionRate) are token
// buckets kept in memory by each replica that serves admission: a rate is a bound on how fast
// the API server is asked to do a tenant's work, not a count that must be exact, so it costs
// no write. A claim takes one token from each bucket that applies to it, all or none; one
// refused for another limit afterwards gets its tokens back.

// RateCharge is one bucket a claim takes a token from.
type RateCharge struct {
	// Limit is LimitAdmissionRate or LimitTenantAdmissionRate, the refusal metric's label.
	Limit string
	// Path is the rate's field in the policy.
	Path *field.Path
	// Policy and Tenant say whose bucket it is (Tenant "" for the namespace's).
	Policy, Tenant string
	// PerMinute and Burst are the rate and the bucket's size.
	PerMinute, Burst int32
	key              rateKey
}

// rateKey names a bucket: the policy's UID makes a recreated policy start with a full one.
type rateKey struct {
	namespace, policy string
	uid               types.UID
	tenant            string
	namespaceWide     bool
}

// RateChargesOf are the buckets a claim by identity id takes from in policy p: its tenant's,
// then the namespace's.
func RateChargesOf(p *tenancyv1alpha1.ClaimPolicy, id Identity) []RateCharge {
	var out []RateCharge
	spec := field.NewPath("spec")
	tenant := TenantOf(p, id)
	if i := tenantIndex(p, tenant); i >= 0 && p.Spec.Tenants[i].AdmissionRate != nil {
		out = append(out, rateCharge(p, tenant, false, p.Spec.Tenants[i].AdmissionRate,
			tenancyv1alpha1.LimitTenantAdmissionRate, spec.Child("tenants").Index(i).Child("admissionRate")))
	}
	if p.Spec.AdmissionRate != nil {
		out = append(out, rateCharge(p, tenant, true, p.Spec.AdmissionRate, tenancyv1alpha1.LimitAdmissionRate, spec.Child("admissionRate")))
	}
	return out
}

func rateCharge(p *tenancyv1alpha1.ClaimPolicy, tenant string, namespaceWide bool, r *tenancyv1alpha1.AdmissionRate, limit string, path *field.Path) RateCharge {
	c := RateCharge{Limit: limit, Path: path, Policy: p.Name, Tenant: tenant, PerMinute: r.ClaimsPerMinute, Burst: RateBurst(r),
		key: rateKey{namespace: p.Namespace, policy: p.Name, uid: p.UID, namespaceWide: namespaceWide}}
	if !namespaceWide {
		c.key.tenant = tenant
	}
	return c
}

// RateBurst is r's burst, defaulted: one second's worth of the rate, at least 1.
func RateBurst(r *tenancyv1alpha1.AdmissionRate) int32 {
	if r.Burst != nil {
		return *r.Burst
	}
	return max(1, int32(math.Ceil(float64(r.ClaimsPerMinute)/60)))
}

// RateRefusal is a claim refused for a rate: the charge whose bucket was empty, and how long
// until it holds a token again.
type RateRefusal struct {
	RateCharge
	Wait time.Duration
}

// Describe says whose claims the rate counts, for a person.
func (r RateRefusal) Describe() string {
	if r.Limit == tenancyv1alpha1.LimitTenantAdmissionRate {
		return fmt.Sprintf("tenant %s's claims", r.Tenant)
	}
	return "the namespace's claims"
}

// RateLimits are one replica's admission-rate buckets. The zero value is ready; it is safe
// for concurrent use.
type RateLimits struct {
	// Now is the clock; nil is time.Now.
	Now func() time.Time

	mu        sync.Mutex
	buckets   map[rateKey]*bucket
	lastSweep time.Time
}

// bucket is one rate's tokens at last, and the rate and size it had then.
type bucket struct {
	tokens, perSecond, burst float64
	last                     time.Time
}

// Taken are the tokens a claim took, for Refund.
type Taken []RateCharge

func (r *RateLimits) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// Take takes one token from each charge's bucket, or none: it returns the first charge whose
// bucket is empty, with the time until it refills one.
func (r *RateLimits) Take(charges []RateCharge) (Taken, *RateRefusal) {
	if len(charges) == 0 {
		return nil, nil
	}
	now := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sweep(now)
	for _, c := range charges {
		if b := r.bucket(c, now); b.tokens < 1 {
			return nil, &RateRefusal{RateCharge: c, Wait: b.wait()}
		}
	}
	for _, c := range charges {
		r.buckets[c.key].tokens--
	}
	return charges, nil
}

// Check answers what Take would, without taking anything (a dry run).
func (r *RateLimits) Check(charges []RateCharge) *RateRefusal {
	now := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range charges {
		stored, ok := r.buckets[c.key]
		if !ok {
			continue // a bucket not made yet is full
		}
		b := *stored
		b.refill(c, now)
		if b.tokens < 1 {
			return &RateRefusal{RateCharge: c, Wait: b.wait()}
		}
	}
	return nil
}

// Refund gives back the tokens of a claim that was not admitted after all.
func (r *RateLimits) Refund(t Taken) {
	if len(t) == 0 {
		return
	}
	now := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range t {
		if b, ok := r.buckets[c.key]; ok {
			b.refill(c, now)
			b.tokens = min(b.tokens+1, b.burst)
		}
	}
}

// bucket is c's bucket refilled to now, made full when it is new; r.mu is held.
func (r *RateLimits) bucket(c RateCharge, now time.Time) *bucket {
	if r.buckets == nil {
		r.buckets = map[rateKey]*bucket{}
	}
	b, ok := r.buckets[c.key]
	if !ok {
		b = &bucket{tokens: float64(c.Burst), last: now}
		r.buckets[c.key] = b
	}
	b.refill(c, now)
	return b
}

// refill brings b to now under c's rate and burst (a burst lowered since holds less).
func (b *bucket) refill(c RateCharge, now time.Time) {
	b.perSecond, b.burst = float64(c.PerMinute)/60, float64(c.Burst)
	b.advance(now)
}

func (b *bucket) advance(now time.Time) {
	if elapsed := now.Sub(b.last).Seconds(); elapsed > 0 {
		b.tokens, b.last = b.tokens+elapsed*b.perSecond, now
	}
	b.tokens = min(b.tokens, b.burst)
}

// wait is how long until b holds a token.
func (b *bucket) wait() time.Duration {
	return time.Duration((1 - b.tokens) / b.perSecond * float64(time.Second))
}

// sweepEvery is how often the buckets are looked over for full ones, to drop: a full bucket
// is the same as none (one is made full when first used), so the buckets of a deleted policy,
// or of a tenant quiet for long enough, go within a minute of being full again.
const sweepEvery = time.Minute

// sweep drops the full buckets; r.mu is held.
func (r *RateLimits) sweep(now time.Time) {
	if now.Sub(r.lastSweep) < sweepEvery {
		return
	}
	r.lastSweep = now
	for k, b := range r.buckets {
		if b.advance(now); b.tokens >= b.burst {
			delete(r.buckets, k)
		}
	}
}
