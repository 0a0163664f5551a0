package webhooks_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	"github.com/sandgate-dev/sandgate/webhooks"
)

// A value out of range for its Go field is a 422 naming the field, not a bare decode error.
func TestDecodeErrors(t *testing.T) {
	got := webhooks.DecodeErrors([]byte(`{"spec":{"replicas":2147483648}}`), &extv1beta1.SandboxWarmPool{})
	if diff := cmp.Diff([]string{"Invalid value spec.replicas"}, summary(got)); diff != "" {
		t.Errorf("pool (-want +got):\n%s", diff)
	}
	got = webhooks.DecodeErrors([]byte(`{"spec":{"lifecycle":{"ttlSecondsAfterFinished":9223372036854775807}}}`), &extv1beta1.SandboxClaim{})
	if diff := cmp.Diff([]string{"Invalid value spec.lifecycle.ttlSecondsAfterFinished"}, summary(got)); diff != "" {
		t.Errorf("claim (-want +got):\n%s", diff)
	}
	if got := webhooks.DecodeErrors([]byte(`{"spec":{"replicas":3}}`), &extv1beta1.SandboxWarmPool{}); len(got) > 0 {
		t.Errorf("a valid object: %v", got)
	}
}
