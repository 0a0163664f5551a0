package webhooks

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	tenancyv1alpha1 "github.com/sandgate-dev/sandgate/api/tenancy/v1alpha1"
	"github.com/sandgate-dev/sandgate/internal/fairshare"
)

var claimPolicyGK = tenancyv1alpha1.GroupVersion.WithKind("ClaimPolicy").GroupKind()

// ClaimPolicyWebhook defaults and validates ClaimPolicies.
type ClaimPolicyWebhook struct {
	// Cache reads the namespace's pools, for warnings only; nil warns of nothing.
	Cache client.Reader
}

var (
	_ admission.Defaulter[*tenancyv1alpha1.ClaimPolicy] = ClaimPolicyWebhook{}
	_ admission.Validator[*tenancyv1alpha1.ClaimPolicy] = ClaimPolicyWebhook{}
)

// Default applies DefaultClaimPolicy.
func (ClaimPolicyWebhook) Default(_ context.Context, p *tenancyv1alpha1.ClaimPolicy) error {
	DefaultClaimPolicy(p)
	return nil
}

// ValidateCreate applies ValidateClaimPolicy, and warns of the pools the policy names that
// the namespace does not have.
func (w ClaimPolicyWebhook) ValidateCreate(ctx context.Context, p *tenancyv1alpha1.ClaimPolicy) (admission.Warnings, error) {
	if err := invalid(claimPolicyGK, p.Name, ValidateClaimPolicy(p)); err != nil {
		return nil, err
	}
	return w.warnings(ctx, p), nil
}

// ValidateUpdate applies ValidateClaimPolicy to what the update introduces.
func (w ClaimPolicyWebhook) ValidateUpdate(ctx context.Context, oldP, newP *tenancyv1alpha1.ClaimPolicy) (admission.Warnings, error) {
	if err := invalid(claimPolicyGK, newP.Name, RatchetUpdate(ValidateClaimPolicy(newP), ValidateClaimPolicy(oldP))); err != nil {
		return nil, err
	}
	return w.warnings(ctx, newP), nil
}

// ValidateDelete admits every deletion.
func (ClaimPolicyWebhook) ValidateDelete(context.Context, *tenancyv1alpha1.ClaimPolicy) (admission.Warnings, error) {
	return nil, nil
}

// warnings names the pools the policy limits or shares that the namespace does not have (a
// misspelt name limits nothing) and the pools whose tenants' guarantees add up to more than
// the pool's replicas (some guarantee can never be met).
func (w ClaimPolicyWebhook) warnings(ctx context.Context, p *tenancyv1alpha1.ClaimPolicy) admission.Warnings {
	if w.Cache == nil {
		return nil
	}
	guaranteed := map[string]int32{}
	for _, t := range p.Spec.Tenants {
		for _, s := range t.WarmShares {
			guaranteed[s.PoolName] += s.Guaranteed
		}
	}
	var out admission.Warnings
	for _, pool := range fairshare.NamedPools(p) {
		var swp extv1beta1.SandboxWarmPool
		if err := w.Cache.Get(ctx, types.NamespacedName{Namespace: p.Namespace, Name: pool}, &swp); err != nil {
			out = append(out, fmt.Sprintf("SandboxWarmPool %s/%s not found: the policy's limits and shares of it apply once it exists", p.Namespace, pool))
			continue
		}
		if g := guaranteed[pool]; swp.Spec.Replicas != nil && g > *swp.Spec.Replicas {
			out = append(out, fmt.Sprintf("the tenants' guaranteed warm shares of pool %s add up to %d, more than its %d replicas: some guarantee cannot be met", pool, g, *swp.Spec.Replicas))
		}
	}
	return out
}

// DefaultClaimPolicy fills what the CRD schema cannot: a ServiceAccount subject without a
// namespace names one of the policy's namespace. whenBeyondWarmShare defaults to ServeCold
// (the schema's default too, for clients of Go callers).
func DefaultClaimPolicy(p *tenancyv1alpha1.ClaimPolicy) {
	if p.Spec.WhenBeyondWarmShare == "" {
		p.Spec.WhenBeyondWarmShare = tenancyv1alpha1.ServeCold
	}
	defaultAdmissionRate(p.Spec.AdmissionRate)
	for i := range p.Spec.Tenants {
		defaultAdmissionRate(p.Spec.Tenants[i].AdmissionRate)
		for j := range p.Spec.Tenants[i].Subjects {
			if s := &p.Spec.Tenants[i].Subjects[j]; s.Kind == tenancyv1alpha1.SubjectServiceAccount && s.Namespace == "" {
				s.Namespace = p.Namespace
			}
		}
	}
}

// defaultAdmissionRate sets a rate's burst to one second's worth of it, at least 1, so that
// the policy shows the bucket admission keeps.
func defaultAdmissionRate(r *tenancyv1alpha1.AdmissionRate) {
	if r != nil && r.Burst == nil && r.ClaimsPerMinute > 0 {
		b := fairshare.RateBurst(r)
		r.Burst = &b
	}
}

// ValidateClaimPolicy checks a ClaimPolicy:
//   - its name is a DNS label (its ledgers are named <policy> and <policy>.<tenant>);
//   - limits are between 0 and MaxLimit; lists are within their bounds; pool names are valid
//     object names, once per list;
//   - tenants have unique DNS-label names other than "unnamed", at least one subject each,
//     and no subject names an identity another tenant names already (a creator counts against
//     one tenant of a policy: it would silently be the first's);
//   - subjects are well-formed: a known kind, a name, a namespace only for a ServiceAccount,
//     and valid service account and namespace names;
//   - a warm share's guaranteed is at most its max, and at most what the tenant's own limits
//     let it hold (its maxClaims, its perPool of the pool), and the guarantees of a pool add up
//     to at most the namespace's limits of it (maxClaims, perPool): a guarantee that can never
//     be met would keep members from the other tenants for ever;
//   - whenBeyondWarmShare is ServeCold or Wait;
//   - an admission rate's claimsPerMinute is between 1 and MaxClaimsPerMinute, its burst
//     between 1 and MaxLimit.
func ValidateClaimPolicy(p *tenancyv1alpha1.ClaimPolicy) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Label(p.Name) {
		errs = append(errs, field.Invalid(field.NewPath("metadata", "name"), p.Name, msg+" (a ClaimPolicy's ledgers are named after it)"))
	}
	spec := field.NewPath("spec")
	errs = append(errs, validateLimit(p.Spec.MaxClaims, spec.Child("maxClaims"))...)
	errs = append(errs, validatePoolLimits(p.Spec.PerPool, spec.Child("perPool"))...)
	errs = append(errs, validateAdmissionRate(p.Spec.AdmissionRate, spec.Child("admissionRate"))...)
	errs = append(errs, enum(string(p.Spec.WhenBeyondWarmShare), spec.Child("whenBeyondWarmShare"),
		tenancyv1alpha1.ServeCold, tenancyv1alpha1.Wait)...)
	tenants := spec.Child("tenants")
	if len(p.Spec.Tenants) > tenancyv1alpha1.MaxTenants {
		errs = append(errs, field.TooMany(tenants, len(p.Spec.Tenants), tenancyv1alpha1.MaxTenants))
	}
	names := map[string]bool{}
	subjects := map[string]string{} // subject key -> the tenant that names it
	guaranteed := map[string]int32{}
	for i := range p.Spec.Tenants {
		t := &p.Spec.Tenants[i]
		tp := tenants.Index(i)
		errs = append(errs, validateTenantName(t.Name, names, tp.Child("name"))...)
		errs = append(errs, validateSubjects(t, p.Namespace, subjects, tp.Child("subjects"))...)
		errs = append(errs, validateLimit(t.MaxClaims, tp.Child("maxClaims"))...)
		errs = append(errs, validatePoolLimits(t.PerPool, tp.Child("perPool"))...)
		errs = append(errs, validateAdmissionRate(t.AdmissionRate, tp.Child("admissionRate"))...)
		errs = append(errs, validateWarmShares(t, tp.Child("warmShares"))...)
		for _, s := range t.WarmShares {
			guaranteed[s.PoolName] += s.Guaranteed
		}
	}
	pools := make([]string, 0, len(guaranteed))
	for pool := range guaranteed {
		pools = append(pools, pool)
	}
	sort.Strings(pools)
	for _, pool := range pools {
		g := guaranteed[pool]
		if i := poolLimitIndex(p.Spec.PerPool, pool); i >= 0 && g > p.Spec.PerPool[i].MaxClaims {
			errs = append(errs, field.Invalid(spec.Child("perPool").Index(i).Child("maxClaims"), p.Spec.PerPool[i].MaxClaims,
				fmt.Sprintf("the tenants' guaranteed warm shares of pool %s add up to %d: the namespace's claims of it could never hold them all", pool, g)))
		}
		if p.Spec.MaxClaims != nil && g > *p.Spec.MaxClaims {
			errs = append(errs, field.Invalid(spec.Child("maxClaims"), *p.Spec.MaxClaims,
				fmt.Sprintf("the tenants' guaranteed warm shares of pool %s add up to %d: the namespace's claims could never hold them all", pool, g)))
		}
	}
	return errs
}

func validateLimit(v *int32, fldPath *field.Path) field.ErrorList {
	if v == nil || (*v >= 0 && *v <= tenancyv1alpha1.MaxLimit) {
		return nil
	}
	return field.ErrorList{field.Invalid(fldPath, *v, fmt.Sprintf("must be between 0 and %d", tenancyv1alpha1.MaxLimit))}
}

func validateAdmissionRate(r *tenancyv1alpha1.AdmissionRate, fldPath *field.Path) field.ErrorList {
	if r == nil {
		return nil
	}
	var errs field.ErrorList
	if r.ClaimsPerMinute < 1 || r.ClaimsPerMinute > tenancyv1alpha1.MaxClaimsPerMinute {
		errs = append(errs, field.Invalid(fldPath.Child("claimsPerMinute"), r.ClaimsPerMinute,
			fmt.Sprintf("must be between 1 and %d", tenancyv1alpha1.MaxClaimsPerMinute)))
	}
	if b := r.Burst; b != nil && (*b < 1 || *b > tenancyv1alpha1.MaxLimit) {
		errs = append(errs, field.Invalid(fldPath.Child("burst"), *b, fmt.Sprintf("must be between 1 and %d", tenancyv1alpha1.MaxLimit)))
	}
	return errs
}

func validatePoolLimits(limits []tenancyv1alpha1.PoolLimit, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(limits) > tenancyv1alpha1.MaxPoolLimits {
		errs = append(errs, field.TooMany(fldPath, len(limits), tenancyv1alpha1.MaxPoolLimits))
	}
	seen := map[string]bool{}
	for i, l := range limits {
		errs = append(errs, validatePoolName(l.PoolName, seen, fldPath.Index(i).Child("poolName"))...)
		v := l.MaxClaims
		errs = append(errs, validateLimit(&v, fldPath.Index(i).Child("maxClaims"))...)
	}
	return errs
}

func validatePoolName(name string, seen map[string]bool, fldPath *field.Path) field.ErrorList {
	errs := ValidateReferenceName(name, fldPath)
	if seen[name] {
		errs = append(errs, field.Duplicate(fldPath, name))
	}
	seen[name] = true
	return errs
}

func validateTenantName(name string, seen map[string]bool, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Label(name) {
		errs = append(errs, field.Invalid(fldPath, name, msg))
	}
	if name == tenancyv1alpha1.UnnamedTenant {
		errs = append(errs, field.Invalid(fldPath, name, "is the name of the creators no tenant names"))
	}
	if seen[name] {
		errs = append(errs, field.Duplicate(fldPath, name))
	}
	seen[name] = true
	return errs
}

// validateSubjects checks a tenant's subjects; seen maps every subject of the tenants before
// it to the tenant that names it.
func validateSubjects(t *tenancyv1alpha1.Tenant, ns string, seen map[string]string, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(t.Subjects) == 0 {
		errs = append(errs, field.Required(fldPath, "a tenant names at least one User, Group or ServiceAccount"))
	}
	if len(t.Subjects) > tenancyv1alpha1.MaxSubjects {
		errs = append(errs, field.TooMany(fldPath, len(t.Subjects), tenancyv1alpha1.MaxSubjects))
	}
	for i, s := range t.Subjects {
		sp := fldPath.Index(i)
		switch s.Kind {
		case tenancyv1alpha1.SubjectUser, tenancyv1alpha1.SubjectGroup:
			if s.Namespace != "" {
				errs = append(errs, field.Forbidden(sp.Child("namespace"), "only a ServiceAccount subject has a namespace"))
			}
			if strings.Contains(s.Name, ",") && s.Kind == tenancyv1alpha1.SubjectGroup {
				errs = append(errs, field.Invalid(sp.Child("name"), s.Name, "a group a claim records may not hold a comma"))
			}
		case tenancyv1alpha1.SubjectServiceAccount:
			for _, msg := range validation.IsDNS1123Subdomain(s.Name) {
				errs = append(errs, field.Invalid(sp.Child("name"), s.Name, msg))
			}
			if s.Namespace != "" {
				for _, msg := range validation.IsDNS1123Label(s.Namespace) {
					errs = append(errs, field.Invalid(sp.Child("namespace"), s.Namespace, msg))
				}
			}
		default:
			errs = append(errs, field.NotSupported(sp.Child("kind"), s.Kind,
				[]string{string(tenancyv1alpha1.SubjectUser), string(tenancyv1alpha1.SubjectGroup), string(tenancyv1alpha1.SubjectServiceAccount)}))
		}
		if s.Name == "" {
			errs = append(errs, field.Required(sp.Child("name"), ""))
			continue
		}
		key := subjectKey(s, ns)
		if other, ok := seen[key]; ok {
			errs = append(errs, field.Duplicate(sp, fmt.Sprintf("%s %s (tenant %s names it: a creator counts against one tenant)", s.Kind, s.Name, other)))
			continue
		}
		seen[key] = t.Name
	}
	return errs
}

// subjectKey identifies the identity a subject names.
func subjectKey(s tenancyv1alpha1.Subject, ns string) string {
	if s.Kind == tenancyv1alpha1.SubjectServiceAccount {
		if s.Namespace != "" {
			ns = s.Namespace
		}
		return "User/system:serviceaccount:" + ns + ":" + s.Name
	}
	return string(s.Kind) + "/" + s.Name
}

// validateWarmShares checks a tenant's shares against their max and the tenant's own limits.
func validateWarmShares(t *tenancyv1alpha1.Tenant, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(t.WarmShares) > tenancyv1alpha1.MaxWarmShares {
		errs = append(errs, field.TooMany(fldPath, len(t.WarmShares), tenancyv1alpha1.MaxWarmShares))
	}
	seen := map[string]bool{}
	for i, s := range t.WarmShares {
		sp := fldPath.Index(i)
		errs = append(errs, validatePoolName(s.PoolName, seen, sp.Child("poolName"))...)
		g := s.Guaranteed
		errs = append(errs, validateLimit(&g, sp.Child("guaranteed"))...)
		errs = append(errs, validateLimit(s.Max, sp.Child("max"))...)
		switch {
		case s.Max != nil && s.Guaranteed > *s.Max:
			errs = append(errs, field.Invalid(sp.Child("guaranteed"), s.Guaranteed, fmt.Sprintf("must be at most max (%d)", *s.Max)))
		case t.MaxClaims != nil && s.Guaranteed > *t.MaxClaims:
			errs = append(errs, field.Invalid(sp.Child("guaranteed"), s.Guaranteed,
				fmt.Sprintf("must be at most the tenant's maxClaims (%d): the tenant could never hold it", *t.MaxClaims)))
		}
		if j := poolLimitIndex(t.PerPool, s.PoolName); j >= 0 && s.Guaranteed > t.PerPool[j].MaxClaims {
			errs = append(errs, field.Invalid(sp.Child("guaranteed"), s.Guaranteed,
				fmt.Sprintf("must be at most the tenant's perPool limit of pool %s (%d): the tenant could never hold it", s.PoolName, t.PerPool[j].MaxClaims)))
		}
	}
	return errs
}

func poolLimitIndex(limits []tenancyv1alpha1.PoolLimit, pool string) int {
	for i, l := range limits {
		if l.PoolName == pool {
			return i
		}
	}
	return -1
}
