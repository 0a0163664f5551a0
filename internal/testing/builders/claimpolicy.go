package builders

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	tenancyv1alpha1 "github.com/sandgate-dev/sandgate/api/tenancy/v1alpha1"
)

// ClaimPolicyWrapper builds a ClaimPolicy.
type ClaimPolicyWrapper struct {
	tenancyv1alpha1.ClaimPolicy
}

// MakeClaimPolicy starts a ClaimPolicy with no limits.
func MakeClaimPolicy(name, ns string) *ClaimPolicyWrapper {
	return &ClaimPolicyWrapper{tenancyv1alpha1.ClaimPolicy{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}}
}

// Obj returns the ClaimPolicy.
func (w *ClaimPolicyWrapper) Obj() *tenancyv1alpha1.ClaimPolicy { return &w.ClaimPolicy }

// MaxClaims sets spec.maxClaims.
func (w *ClaimPolicyWrapper) MaxClaims(n int32) *ClaimPolicyWrapper {
	w.Spec.MaxClaims = ptr.To(n)
	return w
}

// PerPool adds a limit of the namespace's claims of pool.
func (w *ClaimPolicyWrapper) PerPool(pool string, n int32) *ClaimPolicyWrapper {
	w.Spec.PerPool = append(w.Spec.PerPool, tenancyv1alpha1.PoolLimit{PoolName: pool, MaxClaims: n})
	return w
}

// WhenBeyondWarmShare sets spec.whenBeyondWarmShare.
func (w *ClaimPolicyWrapper) WhenBeyondWarmShare(a tenancyv1alpha1.WarmShareAction) *ClaimPolicyWrapper {
	w.Spec.WhenBeyondWarmShare = a
	return w
}

// Tenant adds a tenant (built with MakeTenant).
func (w *ClaimPolicyWrapper) Tenant(t *TenantWrapper) *ClaimPolicyWrapper {
	w.Spec.Tenants = append(w.Spec.Tenants, t.Tenant)
	return w
}

// TenantWrapper builds a tenant of a ClaimPolicy.
type TenantWrapper struct {
	tenancyv1alpha1.Tenant
}

// MakeTenant starts a tenant with no subjects and no limits.
func MakeTenant(name string) *TenantWrapper {
	return &TenantWrapper{tenancyv1alpha1.Tenant{Name: name}}
}

// Obj returns the tenant.
func (w *TenantWrapper) Obj() *tenancyv1alpha1.Tenant { return &w.Tenant }

// User adds a User subject.
func (w *TenantWrapper) User(name string) *TenantWrapper {
	w.Subjects = append(w.Subjects, tenancyv1alpha1.Subject{Kind: tenancyv1alpha1.SubjectUser, Name: name})
	return w
}

// Group adds a Group subject.
func (w *TenantWrapper) Group(name string) *TenantWrapper {
	w.Subjects = append(w.Subjects, tenancyv1alpha1.Subject{Kind: tenancyv1alpha1.SubjectGroup, Name: name})
	return w
}

// ServiceAccount adds a ServiceAccount subject (ns "" is the policy's namespace).
func (w *TenantWrapper) ServiceAccount(ns, name string) *TenantWrapper {
	w.Subjects = append(w.Subjects, tenancyv1alpha1.Subject{Kind: tenancyv1alpha1.SubjectServiceAccount, Name: name, Namespace: ns})
	return w
}

// MaxClaims sets the tenant's maxClaims.
func (w *TenantWrapper) MaxClaims(n int32) *TenantWrapper {
	w.Tenant.MaxClaims = ptr.To(n)
	return w
}

// PerPool adds a limit of the tenant's claims of pool.
func (w *TenantWrapper) PerPool(pool string, n int32) *TenantWrapper {
	w.Tenant.PerPool = append(w.Tenant.PerPool, tenancyv1alpha1.PoolLimit{PoolName: pool, MaxClaims: n})
	return w
}

// WarmShare adds a share of pool's warm members; max < 0 leaves the maximum unset.
func (w *TenantWrapper) WarmShare(pool string, guaranteed, max int32) *TenantWrapper {
	s := tenancyv1alpha1.WarmShare{PoolName: pool, Guaranteed: guaranteed}
	if max >= 0 {
		s.Max = ptr.To(max)
	}
	w.WarmShares = append(w.WarmShares, s)
	return w
}

// AdmissionRate sets the tenant's admission rate; burst 0 leaves it to its default.
func (w *TenantWrapper) AdmissionRate(perMinute, burst int32) *TenantWrapper {
	w.Tenant.AdmissionRate = admissionRate(perMinute, burst)
	return w
}

// AdmissionRate sets spec.admissionRate; burst 0 leaves it to its default.
func (w *ClaimPolicyWrapper) AdmissionRate(perMinute, burst int32) *ClaimPolicyWrapper {
	w.Spec.AdmissionRate = admissionRate(perMinute, burst)
	return w
}

func admissionRate(perMinute, burst int32) *tenancyv1alpha1.AdmissionRate {
	r := &tenancyv1alpha1.AdmissionRate{ClaimsPerMinute: perMinute}
	if burst > 0 {
		r.Burst = ptr.To(burst)
	}
	return r
}
