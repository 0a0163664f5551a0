package webhooks_test

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionv1 "k8s.io/api/admission/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/sandgate-dev/sandgate/api"
	"github.com/sandgate-dev/sandgate/test/builders"
	"github.com/sandgate-dev/sandgate/test/policycases"
	"github.com/sandgate-dev/sandgate/webhooks"
)

// Admission applies the claim injection rule of the one table the rule's and the claim
// controller's tests iterate too (test/policycases): a claim is refused with 422 exactly when
// the case has problems, naming exactly their fields, so that admission and controller never
// disagree on a claim.
func TestClaimCreateAppliesTheClaimRule(t *testing.T) {
	for name, tc := range policycases.Cases() {
		t.Run(name, func(t *testing.T) {
			reader := fake.NewClientBuilder().WithScheme(api.NewScheme()).WithObjects(
				tc.Template, builders.MakePool(policycases.Pool, policycases.Namespace, tc.Template.Name).Obj(),
			).Build()
			w := &webhooks.ClaimWebhook{Cache: reader, APIReader: reader, OperatorUser: operatorUser}

			err := w.Default(request(someUser, admissionv1.Create), tc.Claim.DeepCopy())

			wantCode := int32(200)
			if len(tc.WantErrors) > 0 {
				wantCode = 422
			}
			if diff := cmp.Diff(wantCode, code(err)); diff != "" {
				t.Fatalf("status code (-want +got):\n%s\nerror: %v", diff, err)
			}
			if diff := cmp.Diff(tc.WantErrors, causes(err)); diff != "" {
				t.Errorf("refused fields (-want +got):\n%s", diff)
			}
		})
	}
}

// causes are the field errors an admission error carries, as the API server returns them.
func causes(err error) []policycases.FieldError {
	var status apierrors.APIStatus
	if !errors.As(err, &status) || status.Status().Details == nil {
		return nil
	}
	var out []policycases.FieldError
	for _, c := range status.Status().Details.Causes {
		out = append(out, policycases.FieldError{Type: field.ErrorType(c.Type), Field: c.Field})
	}
	return out
}
