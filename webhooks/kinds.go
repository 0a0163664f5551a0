package webhooks

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
)

var (
	templateGK = extv1beta1.GroupVersion.WithKind("SandboxTemplate").GroupKind()
	poolGK     = extv1beta1.GroupVersion.WithKind("SandboxWarmPool").GroupKind()
)

// TemplateWebhook defaults and validates SandboxTemplates.
type TemplateWebhook struct{}

var (
	_ admission.Defaulter[*extv1beta1.SandboxTemplate] = TemplateWebhook{}
	_ admission.Validator[*extv1beta1.SandboxTemplate] = TemplateWebhook{}
)

// Default applies DefaultTemplate.
func (TemplateWebhook) Default(_ context.Context, t *extv1beta1.SandboxTemplate) error {
	DefaultTemplate(t)
	return nil
}

// ValidateCreate applies ValidateTemplate.
func (TemplateWebhook) ValidateCreate(_ context.Context, t *extv1beta1.SandboxTemplate) (admission.Warnings, error) {
	return nil, invalid(templateGK, t.Name, ValidateTemplate(t))
}

// ValidateUpdate applies ValidateTemplate to what the update introduces.
func (TemplateWebhook) ValidateUpdate(_ context.Context, oldT, newT *extv1beta1.SandboxTemplate) (admission.Warnings, error) {
	return nil, invalid(templateGK, newT.Name, RatchetUpdate(ValidateTemplate(newT), ValidateTemplate(oldT)))
}

// ValidateDelete admits every deletion.
func (TemplateWebhook) ValidateDelete(context.Context, *extv1beta1.SandboxTemplate) (admission.Warnings, error) {
	return nil, nil
}

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

// invalid wraps a non-empty error list as a 422 Invalid; nil for an empty one.
func invalid(gk schema.GroupKind, name string, errs field.ErrorList) error {
	if len(errs) == 0 {
		return nil
	}
	return apierrors.NewInvalid(gk, name, errs)
}

// isOperator reports whether the admission request in ctx comes from the operator.
func isOperator(ctx context.Context, operatorUser string) bool {
	req, err := admission.RequestFromContext(ctx)
	return err == nil && operatorUser != "" && req.UserInfo.Username == operatorUser
}
