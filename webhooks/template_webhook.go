package webhooks

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
)

var templateGK = extv1beta1.GroupVersion.WithKind("SandboxTemplate").GroupKind()

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
