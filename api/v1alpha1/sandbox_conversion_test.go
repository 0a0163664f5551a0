package v1alpha1_test

import (
	"testing"

	"github.com/sandgate-dev/sandgate/api/internal/roundtrip"
	agentsv1alpha1 "github.com/sandgate-dev/sandgate/api/v1alpha1"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
)

func alphaToBeta(in *agentsv1alpha1.Sandbox) (*agentsv1beta1.Sandbox, error) {
	out := &agentsv1beta1.Sandbox{}
	return out, in.ConvertTo(out)
}

func betaToAlpha(in *agentsv1beta1.Sandbox) (*agentsv1alpha1.Sandbox, error) {
	out := &agentsv1alpha1.Sandbox{}
	return out, out.ConvertFrom(in)
}

func TestSandboxV1alpha1RoundTripsThroughV1beta1(t *testing.T) {
	roundtrip.Test(t, 1, func() *agentsv1alpha1.Sandbox { return &agentsv1alpha1.Sandbox{} }, alphaToBeta, betaToAlpha)
}

func TestSandboxV1beta1RoundTripsThroughV1alpha1(t *testing.T) {
	roundtrip.Test(t, 2, func() *agentsv1beta1.Sandbox { return &agentsv1beta1.Sandbox{} }, betaToAlpha, alphaToBeta)
}
