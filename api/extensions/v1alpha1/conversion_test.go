package v1alpha1_test

import (
	"testing"

	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/conversion"
	"sigs.k8s.io/randfill"

	extv1alpha1 "github.com/sandgate-dev/sandgate/api/extensions/v1alpha1"
	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	"github.com/sandgate-dev/sandgate/api/internal/roundtrip"
)

// up and down convert between a v1alpha1 object and its v1beta1 hub, into fresh objects.
func up[A conversion.Convertible, H conversion.Hub](newHub func() H) func(A) (H, error) {
	return func(in A) (H, error) {
		out := newHub()
		return out, in.ConvertTo(out)
	}
}

func down[A conversion.Convertible, H conversion.Hub](newAlpha func() A) func(H) (A, error) {
	return func(in H) (A, error) {
		out := newAlpha()
		return out, out.ConvertFrom(in)
	}
}

// fuzz makes the fields conversion maps by value hit those values often.
var fuzz = []any{
	func(p *extv1alpha1.WarmPoolPolicy, c randfill.Continue) {
		*p = roundtrip.OneOf(c, "", extv1alpha1.WarmPoolPolicyNone, extv1alpha1.WarmPoolPolicyDefault, "pool-a", "shadow-pool-t")
	},
	func(r *extv1alpha1.SandboxTemplateRef, c randfill.Continue) {
		r.Name = roundtrip.OneOf(c, "", "t", "pool-a")
	},
	func(r *extv1beta1.WarmPoolRef, c randfill.Continue) {
		r.Name = roundtrip.OneOf(c, "", "default", "none", "pool-a", "shadow-pool-", "shadow-pool-t")
	},
	func(s *extv1alpha1.SandboxWarmPoolSpec, c randfill.Continue) {
		c.FillNoCustom(s)
		switch c.Intn(3) {
		case 0:
			s.UpdateStrategy = nil
		case 1:
			s.UpdateStrategy = &extv1alpha1.UpdateStrategy{}
		}
	},
	func(s *extv1beta1.SandboxWarmPoolSpec, c randfill.Continue) {
		c.FillNoCustom(s)
		s.Replicas = []*int32{nil, ptr.To[int32](1), s.Replicas}[c.Intn(3)]
		if c.Bool() {
			s.UpdateStrategy = extv1beta1.UpdateStrategy{}
		}
	},
	func(p *extv1beta1.VolumeClaimTemplatesPolicy, c randfill.Continue) {
		*p = roundtrip.OneOf(c, "", extv1beta1.VolumeClaimTemplatesAllowed)
	},
}

func TestV1alpha1RoundTripsThroughV1beta1(t *testing.T) {
	t.Run("SandboxTemplate", func(t *testing.T) {
		newA, newH := func() *extv1alpha1.SandboxTemplate { return &extv1alpha1.SandboxTemplate{} }, func() *extv1beta1.SandboxTemplate { return &extv1beta1.SandboxTemplate{} }
		roundtrip.Test(t, 11, newA, up[*extv1alpha1.SandboxTemplate](newH), down[*extv1alpha1.SandboxTemplate, *extv1beta1.SandboxTemplate](newA), fuzz...)
	})
	t.Run("SandboxWarmPool", func(t *testing.T) {
		newA, newH := func() *extv1alpha1.SandboxWarmPool { return &extv1alpha1.SandboxWarmPool{} }, func() *extv1beta1.SandboxWarmPool { return &extv1beta1.SandboxWarmPool{} }
		roundtrip.Test(t, 12, newA, up[*extv1alpha1.SandboxWarmPool](newH), down[*extv1alpha1.SandboxWarmPool, *extv1beta1.SandboxWarmPool](newA), fuzz...)
	})
	t.Run("SandboxClaim", func(t *testing.T) {
		newA, newH := func() *extv1alpha1.SandboxClaim { return &extv1alpha1.SandboxClaim{} }, func() *extv1beta1.SandboxClaim { return &extv1beta1.SandboxClaim{} }
		roundtrip.Test(t, 13, newA, up[*extv1alpha1.SandboxClaim](newH), down[*extv1alpha1.SandboxClaim, *extv1beta1.SandboxClaim](newA), fuzz...)
	})
}

func TestV1beta1RoundTripsThroughV1alpha1(t *testing.T) {
	t.Run("SandboxTemplate", func(t *testing.T) {
		newA, newH := func() *extv1alpha1.SandboxTemplate { return &extv1alpha1.SandboxTemplate{} }, func() *extv1beta1.SandboxTemplate { return &extv1beta1.SandboxTemplate{} }
		roundtrip.Test(t, 21, newH, down[*extv1alpha1.SandboxTemplate, *extv1beta1.SandboxTemplate](newA), up[*extv1alpha1.SandboxTemplate](newH), fuzz...)
	})
	t.Run("SandboxWarmPool", func(t *testing.T) {
		newA, newH := func() *extv1alpha1.SandboxWarmPool { return &extv1alpha1.SandboxWarmPool{} }, func() *extv1beta1.SandboxWarmPool { return &extv1beta1.SandboxWarmPool{} }
		roundtrip.Test(t, 22, newH, down[*extv1alpha1.SandboxWarmPool, *extv1beta1.SandboxWarmPool](newA), up[*extv1alpha1.SandboxWarmPool](newH), fuzz...)
	})
	t.Run("SandboxClaim", func(t *testing.T) {
		newA, newH := func() *extv1alpha1.SandboxClaim { return &extv1alpha1.SandboxClaim{} }, func() *extv1beta1.SandboxClaim { return &extv1beta1.SandboxClaim{} }
		roundtrip.Test(t, 23, newH, down[*extv1alpha1.SandboxClaim, *extv1beta1.SandboxClaim](newA), up[*extv1alpha1.SandboxClaim](newH), fuzz...)
	})
}
