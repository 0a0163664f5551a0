package reconcilers

import (
	"time"

	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
)

// A claim's timestamp annotations are written by whoever creates the claim:
// client-first-requested-at by the client (the SDKs stamp it just before their create call),
// webhook-first-observed-at and controller-first-observed-at by admission in the same create
// request (a client's values are overwritten there, and only the operator may change them
// afterwards). The platform's startup histograms are fed from them, so a value a tenant
// picks (year 1 makes a 292-year observation) would skew every platform-wide percentile.
// They are read only within MaxClaimTimestampSkew of the claim's creationTimestamp, which
// the API server sets; a value outside is ignored, never clamped: the real time is unknown.
//
// Why a minute either way: every honest writer stamps within one create call of the
// creationTimestamp, so what separates them is the call's latency and the clocks' offset
// (NTP keeps nodes well under a second apart; creationTimestamp is truncated to the second).
// A client whose create took over a minute (retrying an unavailable API server) measured the
// outage, not the platform's startup. Within the window a tenant can shift its own claims'
// observations by at most a minute, against the histograms' top bucket of four.

// MaxClaimTimestampSkew is how far a claim's timestamp annotations may lie from its
// creationTimestamp and still be read.
const MaxClaimTimestampSkew = time.Minute

// claimTimestamp returns the RFC3339Nano time of the claim's annotation key when it is within
// MaxClaimTimestampSkew of the claim's creationTimestamp; false when it is absent,
// unparsable, out of that range, or the claim has no creationTimestamp to bound it by.
func claimTimestamp(claim *extv1beta1.SandboxClaim, key string) (time.Time, bool) {
	at, err := time.Parse(time.RFC3339Nano, claim.Annotations[key])
	created := claim.CreationTimestamp.Time
	if err != nil || created.IsZero() ||
		at.Before(created.Add(-MaxClaimTimestampSkew)) || at.After(created.Add(MaxClaimTimestampSkew)) {
		return time.Time{}, false
	}
	return at, true
}
