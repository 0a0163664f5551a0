package webhooks

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
)

var poolGK = extv1beta1.GroupVersion.WithKind("SandboxWarmPool").GroupKind()

// PoolWebhook defaults and validates SandboxWarmPools.
type PoolWebhook struct{}

var (
	_ admission.Defaulter[*extv1beta1.SandboxWarmPool] = PoolWebhook{}
	_ admission.Validator[*extv1beta1.SandboxWarmPool] = PoolWebhook{}
)

// Default applies DefaultPool.
func (PoolWebhook) Default(_ context.Context, p *extv1beta1.SandboxWarmPool) error {
	DefaultPool(p)
	return nil
}

// ValidateCreate applies ValidatePool.
func (PoolWebhook) ValidateCreate(_ context.Context, p *extv1beta1.SandboxWarmPool) (admission.Warnings, error) {
	return nil, invalid(poolGK, p.Name, ValidatePool(p))
}

// ValidateUpdate applies ValidatePool to what the update introduces.
func (PoolWebhook) ValidateUpdate(_ context.Context, oldP, newP *extv1beta1.SandboxWarmPool) (admission.Warnings, error) {
	return nil, invalid(poolGK, newP.Name, RatchetUpdate(ValidatePool(newP), ValidatePool(oldP)))
}

// ValidateDelete admits every deletion.
func (PoolWebhook) ValidateDelete(context.Context, *extv1beta1.SandboxWarmPool) (admission.Warnings, error) {
	return nil, nil
}
