package webhooks

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"slices"
	"sort"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	tenancyv1alpha1 "github.com/sandgate-dev/sandgate/api/tenancy/v1alpha1"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
	"github.com/sandgate-dev/sandgate/internal/fairshare"
	"github.com/sandgate-dev/sandgate/internal/ledger"
)

// ClaimPolicies is admission's side of ClaimPolicies (docs/fair-share.md): the claim stamper
// calls Admit for every new claim it accepts. In a namespace without a policy it reads one
// cached list and returns: no write, no API read.
type ClaimPolicies struct {
	// Cache lists the namespace's policies and reads its claims and ledgers.
	Cache client.Reader
	// APIReader reads a ledger when a claim may be a reinvocation of its own admission.
	APIReader client.Reader
	// Reserver writes the reservations.
	Reserver *ledger.Reserver
	Metrics  *fairshare.Metrics
	// ReinvocationWindow is how old a reservation may be for a claim carrying its ID to be
	// taken for the same create, admitted again (0 means DefaultReinvocationWindow).
	ReinvocationWindow time.Duration
	// StaleWait bounds how long a claim whose policy changed under its admission is decided
	// again on the cache's newer copy before admission gives up (0 means DefaultStaleWait).
	StaleWait time.Duration
	// Rates are this replica's admission-rate buckets.
	Rates fairshare.RateLimits
}

// DefaultReinvocationWindow bounds the time between two invocations of the stamping webhook
// for one create: the API server's own request timeout.
const DefaultReinvocationWindow = time.Minute

// annotationsPath is metadata.annotations, the parent of the keys admission records.
var annotationsPath = field.NewPath("metadata", "annotations")

// Admit checks a new claim against every ClaimPolicy of its namespace, and reserves it in the
// ledger of each policy with a limit that applies to it. It records the creator's groups and
// the reservation's ID on the claim. A claim beyond a limit is refused with 429 Too Many
// Requests, naming the policy, the limit, the usage and what to do; a ledger that cannot be
// written fails the create (503 or 500): the limit is never passed unchecked.
func (a *ClaimPolicies) Admit(ctx context.Context, req admission.Request, c *extv1beta1.SandboxClaim) (err error) {
	if a == nil {
		return nil
	}
	policies, err := a.policies(ctx, req.Namespace)
	if err != nil || len(policies) == 0 {
		return err
	}
	start := time.Now()
	groupsPath := annotationsPath.Key(tenancyv1alpha1.AnnotationCreatorGroups)
	groups := fairshare.RecordedGroups(req.UserInfo.Groups, policies)
	if supplied, ok := c.Annotations[tenancyv1alpha1.AnnotationCreatorGroups]; ok && supplied != groups {
		return invalid(claimGK, c.Name, field.ErrorList{field.Invalid(groupsPath, supplied,
			"set by admission to the groups of the identity that creates the claim; leave it unset")})
	}
	if groups != "" {
		c.Annotations[tenancyv1alpha1.AnnotationCreatorGroups] = groups
	}
	id := fairshare.Identity{User: req.UserInfo.Username, Groups: req.UserInfo.Groups}
	dryRun := req.DryRun != nil && *req.DryRun
	taken, err := a.takeRates(req, c, policies, id, dryRun, start)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			a.Rates.Refund(taken) // not admitted after all: its tokens are the next claim's
		}
	}()
	supplied, hasReservation := c.Annotations[tenancyv1alpha1.AnnotationReservation]
	reservationPath := annotationsPath.Key(tenancyv1alpha1.AnnotationReservation)
	deadline := time.Now().Add(a.staleWait())
	for {
		charges := chargesOf(policies, id, c.Spec.WarmPoolRef.Name)
		switch {
		case len(charges) == 0 && hasReservation:
			return invalid(claimGK, c.Name, field.ErrorList{field.Invalid(reservationPath, supplied,
				"set by admission to the claim's reservation in its ClaimPolicies' ledgers; leave it unset")})
		case len(charges) == 0:
			return nil
		case dryRun:
			// A dry run reserves nothing (the webhook has no side effects on dry runs) but gets
			// the answer a create would get now.
			return a.dryRun(ctx, req.Namespace, c, charges)
		case hasReservation:
			if a.reinvoked(ctx, req, c, supplied, charges) {
				return nil
			}
			return invalid(claimGK, c.Name, field.ErrorList{field.Invalid(reservationPath, supplied,
				"set by admission to the claim's reservation in its ClaimPolicies' ledgers; leave it unset")})
		}
		err = a.reserve(ctx, req, c, charges)
		if errors.Is(err, ledger.ErrStale) && time.Now().Before(deadline) {
			// The policy changed a moment ago: decide again on the cache's newer copy.
			if policies, err = a.waitForPolicies(ctx, req.Namespace); err != nil {
				return err
			}
			continue
		}
		result := fairshare.ResultAdmitted
		switch {
		case apierrors.IsTooManyRequests(err):
			result = fairshare.ResultRefused
		case errors.Is(err, ledger.ErrStale):
			err = apierrors.NewServiceUnavailable(fmt.Sprintf("the ClaimPolicies of namespace %s changed while the claim was admitted; retry (%v)", req.Namespace, err))
			result = fairshare.ResultError
		case err != nil:
			result = fairshare.ResultError
		}
		a.Metrics.Admission(result, time.Since(start))
		return err
	}
}

func (a *ClaimPolicies) staleWait() time.Duration {
	if a.StaleWait > 0 {
		return a.StaleWait
	}
	return DefaultStaleWait
}

// DefaultStaleWait bounds how long admission retries a claim whose policy changed under it.
const DefaultStaleWait = 2 * time.Second

// policies are the namespace's ClaimPolicies from the cache, by name.
func (a *ClaimPolicies) policies(ctx context.Context, ns string) ([]tenancyv1alpha1.ClaimPolicy, error) {
	var list tenancyv1alpha1.ClaimPolicyList
	if err := a.Cache.List(ctx, &list, client.InNamespace(ns)); err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("listing the ClaimPolicies of namespace %s: %w", ns, err))
	}
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].Name < list.Items[j].Name })
	return list.Items, nil
}

// waitForPolicies reads the policies again after a short pause, for the cache to catch up.
func (a *ClaimPolicies) waitForPolicies(ctx context.Context, ns string) ([]tenancyv1alpha1.ClaimPolicy, error) {
	select {
	case <-ctx.Done():
		return nil, apierrors.NewServiceUnavailable(fmt.Sprintf("the ClaimPolicies of namespace %s changed while the claim was admitted; retry", ns))
	case <-time.After(25 * time.Millisecond):
	}
	return a.policies(ctx, ns)
}

// chargesOf are the claim's charges in the policies with a limit that applies to it.
func chargesOf(policies []tenancyv1alpha1.ClaimPolicy, id fairshare.Identity, pool string) []charge {
	var out []charge
	for i := range policies {
		if ch := fairshare.ChargeOf(&policies[i], id, pool); ch.Ledger != "" {
			out = append(out, charge{Charge: ch, policy: &policies[i]})
		}
	}
	return out
}

// charge is a claim's charge in one policy.
type charge struct {
	fairshare.Charge
	policy *tenancyv1alpha1.ClaimPolicy
}

// reserve reserves the claim in each charge's ledger, one policy after the other. On a refusal
// or an error it releases what it reserved.
func (a *ClaimPolicies) reserve(ctx context.Context, req admission.Request, c *extv1beta1.SandboxClaim, charges []charge) error {
	id, err := newReservationID()
	if err != nil {
		return apierrors.NewInternalError(err)
	}
	// A claim with only generateName is named here, as the API server would name it after
	// admission (the prefix and five random characters), so that its reservation names its
	// claim: a reinvocation of this create is then a create of that very name (reinvoked),
	// while without a name any number of claims could carry one reservation, each taken for
	// the reinvocation of the create that made it.
	name := c.Name
	if name == "" && c.GenerateName != "" {
		name = generatedName(c.GenerateName)
	}
	var reserved []types.NamespacedName
	release := func() {
		for _, l := range reserved {
			a.Reserver.Release(l, id)
		}
	}
	for _, ch := range charges {
		key := types.NamespacedName{Namespace: req.Namespace, Name: ch.Ledger}
		p, chg := ch.policy, ch.Charge
		res := a.Reserver.Reserve(ctx, ledger.Request{Ledger: key, Policy: p, Charge: chg,
			Reservation: tenancyv1alpha1.Reservation{ID: id, Claim: name, Tenant: chg.Tenant, Pool: c.Spec.WarmPoolRef.Name, Creator: req.UserInfo.Username},
		})
		switch {
		case res.Err != nil:
			release()
			if apierrors.IsServiceUnavailable(res.Err) || errors.Is(res.Err, ledger.ErrStale) {
				return res.Err
			}
			if transient(res.Err) {
				return usageNotRecordedInTime(key, res.Err)
			}
			return apierrors.NewInternalError(fmt.Errorf("the claim's usage could not be recorded, so it is not admitted: %w", res.Err))
		case len(res.Exceeded) > 0:
			release()
			for _, e := range res.Exceeded {
				a.Metrics.Refused(req.Namespace, p.Name, chg.Tenant, e.Limit)
			}
			return refusal(c, p, res.Exceeded)
		}
		reserved = append(reserved, key)
	}
	c.Annotations[tenancyv1alpha1.AnnotationReservation] = id
	c.Name = name
	return nil
}

// transient reports a failed ledger write that a retry may well meet: the write or the
// admission call ran out of time, or the API server was too busy to take it.
func transient(err error) bool {
	var netErr net.Error
	return errors.Is(err, context.DeadlineExceeded) || apierrors.IsTimeout(err) || apierrors.IsServerTimeout(err) ||
		apierrors.IsTooManyRequests(err) || (errors.As(err, &netErr) && netErr.Timeout())
}

// usageNotRecordedInTime answers a claim whose reservation in ledger key could not be written in
// time: 503 Service Unavailable, which clients' retry logic recognises, where a 500 would say the
// server is broken when it was only busy (the soak's restarted API server, 44 times at 20
// claims/s). No retryAfterSeconds, as for the limits' 429: client-go would retry inside the
// caller's create, all of them in step into the API server that just timed out. The claim was
// not created; a reservation the timed-out write may still have made is released, or ends at
// --claim-reservation-ttl.
func usageNotRecordedInTime(key types.NamespacedName, err error) error {
	return apierrors.NewServiceUnavailable(fmt.Sprintf(
		"the claim's usage could not be recorded in ClaimLedger %s in time, so it is not admitted; retry (%v)", key, err))
}

// takeRates takes the claim's tokens of the admission rates of policies (a dry run only
// checks them): a claim whose bucket is empty is refused at once, before any reservation, and
// counted in a ledger of the policy when it has one (where the policy's status reads its
// refusals).
func (a *ClaimPolicies) takeRates(req admission.Request, c *extv1beta1.SandboxClaim,
	policies []tenancyv1alpha1.ClaimPolicy, id fairshare.Identity, dryRun bool, start time.Time) (fairshare.Taken, error) {
	var charges []fairshare.RateCharge
	for i := range policies {
		charges = append(charges, fairshare.RateChargesOf(&policies[i], id)...)
	}
	if len(charges) == 0 {
		return nil, nil
	}
	// The refused charge's policy, found only for a refusal: admitted claims need none.
	policyOf := func(r *fairshare.RateRefusal) *tenancyv1alpha1.ClaimPolicy {
		return &policies[slices.IndexFunc(policies, func(p tenancyv1alpha1.ClaimPolicy) bool { return p.Name == r.Policy })]
	}
	if dryRun {
		if refused := a.Rates.Check(charges); refused != nil {
			return nil, rateRefusal(c, policyOf(refused), refused)
		}
		return nil, nil
	}
	taken, refused := a.Rates.Take(charges)
	if refused == nil {
		return taken, nil
	}
	p := policyOf(refused)
	a.Metrics.Refused(req.Namespace, p.Name, refused.Tenant, refused.Limit)
	if l := refusalLedger(p, id, c.Spec.WarmPoolRef.Name); l != "" && a.Reserver != nil {
		a.Reserver.CountRefusal(types.NamespacedName{Namespace: req.Namespace, Name: l}, refused.Tenant)
	}
	a.Metrics.Admission(fairshare.ResultRefused, time.Since(start))
	return nil, rateRefusal(c, p, refused)
}

// refusalLedger is the ledger of p a claim's refusal is counted in: the claim's own, else any
// of p's (the status sums refusals by tenant over them all); "" when p keeps none (a policy
// with rates and warm shares only: its rate refusals are in the metric only).
func refusalLedger(p *tenancyv1alpha1.ClaimPolicy, id fairshare.Identity, pool string) string {
	if ch := fairshare.ChargeOf(p, id, pool); ch.Ledger != "" {
		return ch.Ledger
	}
	if ls := fairshare.Ledgers(p); len(ls) > 0 {
		return fairshare.LedgerName(p.Name, ls[0].Tenant)
	}
	return ""
}

// rateRefusal is the error of a claim beyond an admission rate of policy p: 429 Too Many
// Requests saying when the next claim can be admitted, in the message only, for the reason
// refusal gives (client-go would retry inside the caller's Create, every refused client at the
// same moment).
func rateRefusal(c *extv1beta1.SandboxClaim, p *tenancyv1alpha1.ClaimPolicy, r *fairshare.RateRefusal) error {
	path := field.NewPath("metadata", "namespace")
	if r.Limit == tenancyv1alpha1.LimitTenantAdmissionRate {
		path = annotationsPath.Key(agentsv1beta1.AnnotationCreator)
	}
	at := fmt.Sprintf("%s are admitted at most %d a minute, %d at once, and the next may be admitted in %.1fs",
		r.Describe(), r.PerMinute, r.Burst, max(r.Wait.Seconds(), 0.1))
	return policyRefusal(c, p, fmt.Sprintf(": %s (%s); retry then, or ask your platform team to raise the rate", at, r.Path),
		[]metav1.StatusCause{{Type: metav1.CauseType(field.ErrorTypeForbidden), Field: path.String(), Message: fmt.Sprintf("%s (ClaimPolicy %s, %s)", at, p.Name, r.Path)}})
}

// generatedName is a name from generateName as the API server makes one (storage/names): the
// prefix, cut to leave room, and five random characters of the same alphabet.
func generatedName(prefix string) string {
	const maxPrefix = validation.DNS1123LabelMaxLength - 5
	if len(prefix) > maxPrefix {
		prefix = prefix[:maxPrefix]
	}
	return prefix + utilrand.String(5)
}

// dryRun answers a dry run: the limits the claim would exceed now, from the cached ledgers.
func (a *ClaimPolicies) dryRun(ctx context.Context, ns string, c *extv1beta1.SandboxClaim, charges []charge) error {
	for _, ch := range charges {
		l := &tenancyv1alpha1.ClaimLedger{}
		if err := a.Cache.Get(ctx, types.NamespacedName{Namespace: ns, Name: ch.Ledger}, l); err != nil {
			continue // not counted yet: a create would wait for it
		}
		if ex := fairshare.Exceed(ch.policy, fairshare.LedgerCounts(ch.policy, l), ch.Charge); len(ex) > 0 {
			return refusal(c, ch.policy, ex)
		}
	}
	return nil
}

// reinvoked reports whether a claim carrying reservation id is this very create, admitted
// again because a later mutating webhook changed it (reinvocationPolicy IfNeeded): then its
// first admission reserved it already, and reserving it again would count it twice. It is
// when the ledger of its first charge (read from the API server: the first admission wrote it
// a moment ago) holds that reservation, made within ReinvocationWindow for the same creator
// and claim name, and no claim the cache shows carries it. Anything else is a client that set
// the annotation, which is refused. A claim without a name never is: admission named every
// claim it reserved (reserve), so a reinvocation carries that name.
func (a *ClaimPolicies) reinvoked(ctx context.Context, req admission.Request, c *extv1beta1.SandboxClaim, id string, charges []charge) bool {
	l := &tenancyv1alpha1.ClaimLedger{}
	if a.APIReader.Get(ctx, types.NamespacedName{Namespace: req.Namespace, Name: charges[0].Ledger}, l) != nil {
		return false
	}
	if c.Name == "" {
		return false
	}
	window := a.ReinvocationWindow
	if window == 0 {
		window = DefaultReinvocationWindow
	}
	found := false
	for _, r := range l.Status.Reservations {
		if r.ID == id && r.Creator == req.UserInfo.Username && r.Claim == c.Name && time.Since(r.At.Time) < window {
			found = true
		}
	}
	if !found {
		return false
	}
	var claims extv1beta1.SandboxClaimList
	if err := a.Cache.List(ctx, &claims, client.InNamespace(req.Namespace)); err != nil {
		return false
	}
	for _, other := range claims.Items {
		if other.Annotations[tenancyv1alpha1.AnnotationReservation] == id {
			return false
		}
	}
	return true
}

func newReservationID() (string, error) {
	b := make([]byte, 12)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("making a reservation ID: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// refusal is the error of a claim beyond limits of policy p: 429 Too Many Requests without a
// retry delay. 429 because the claim is valid and the same create succeeds once the usage is
// below the limit (a 422 says a retry never helps, and ResourceQuota's 403 reads as missing
// RBAC); without retryAfterSeconds because client-go retries a 429 carrying Retry-After by
// itself, up to ten times, inside the caller's Create: the public SDK's CreateSandbox would
// hang for the retries instead of returning the refusal. Each limit is a cause naming the
// claim's field it counts by (the creator for a tenant's limits, the pool for a pool's, the
// namespace for the namespace's).
func refusal(c *extv1beta1.SandboxClaim, p *tenancyv1alpha1.ClaimPolicy, exceeded []fairshare.Exceeded) error {
	var causes []metav1.StatusCause
	var msgs []string
	for _, e := range exceeded {
		path := field.NewPath("metadata", "namespace")
		switch {
		case e.Pool != "":
			path = field.NewPath("spec", "warmPoolRef", "name")
		case e.Tenant != "":
			path = annotationsPath.Key(agentsv1beta1.AnnotationCreator)
		}
		at := fmt.Sprintf("%s are at their limit, %d of %d", e.Describe(), e.Used, e.Max)
		causes = append(causes, metav1.StatusCause{Type: metav1.CauseType(field.ErrorTypeForbidden), Field: path.String(),
			Message: fmt.Sprintf("%s (ClaimPolicy %s, %s)", at, p.Name, e.Path)})
		msgs = append(msgs, fmt.Sprintf("%s (%s)", at, e.Path))
	}
	return policyRefusal(c, p, fmt.Sprintf(" (claims being created count too): %s; delete one of them, or ask your platform team to raise the limit",
		strings.Join(msgs, "; ")), causes)
}

// policyRefusal is 429 Too Many Requests for claim c, refused by policy p for what follows
// the policy's name in the message.
func policyRefusal(c *extv1beta1.SandboxClaim, p *tenancyv1alpha1.ClaimPolicy, reason string, causes []metav1.StatusCause) error {
	return claimRefusal(c, fmt.Sprintf("by ClaimPolicy %s/%s%s", p.Namespace, p.Name, reason), 0, causes)
}
