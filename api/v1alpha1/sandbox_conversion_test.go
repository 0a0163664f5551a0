package v1alpha1_test

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/randfill"

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

// sandboxFuzz makes the fields conversion maps by value hit those values often.
var sandboxFuzz = []any{
	func(s *agentsv1alpha1.SandboxSpec, c randfill.Continue) {
		c.FillNoCustom(s)
		s.Replicas = []*int32{nil, ptr.To[int32](0), ptr.To[int32](1), ptr.To(c.Int31())}[c.Intn(4)]
	},
	func(s *agentsv1alpha1.SandboxStatus, c randfill.Continue) {
		c.FillNoCustom(s)
		s.Replicas = []int32{0, 1, c.Int31()}[c.Intn(3)]
		if c.Bool() {
			s.Conditions = append(s.Conditions, metav1.Condition{Type: agentsv1beta1.ConditionPodScheduled, Status: metav1.ConditionTrue})
		}
	},
	func(m *agentsv1beta1.OperatingMode, c randfill.Continue) {
		*m = roundtrip.OneOf(c, "", agentsv1beta1.OperatingModeRunning, agentsv1beta1.OperatingModeSuspended)
	},
	func(s *agentsv1beta1.SandboxStatus, c randfill.Continue) {
		c.FillNoCustom(s)
		if c.Bool() {
			s.Conditions = append(s.Conditions, metav1.Condition{Type: agentsv1beta1.ConditionPodScheduled, Status: metav1.ConditionFalse})
		}
	},
}

func TestSandboxV1alpha1RoundTripsThroughV1beta1(t *testing.T) {
	roundtrip.Test(t, 1, func() *agentsv1alpha1.Sandbox { return &agentsv1alpha1.Sandbox{} }, alphaToBeta, betaToAlpha, sandboxFuzz...)
}

func TestSandboxV1beta1RoundTripsThroughV1alpha1(t *testing.T) {
	roundtrip.Test(t, 2, func() *agentsv1beta1.Sandbox { return &agentsv1beta1.Sandbox{} }, betaToAlpha, alphaToBeta, sandboxFuzz...)
}

// What a v1alpha1 client reads for a v1beta1 Sandbox, and what its writes mean.
func TestSandboxReplicasAreTheOperatingMode(t *testing.T) {
	cases := map[string]struct {
		replicas *int32
		wantMode agentsv1beta1.OperatingMode
	}{
		"1 runs":     {ptr.To[int32](1), agentsv1beta1.OperatingModeRunning},
		"0 suspends": {ptr.To[int32](0), agentsv1beta1.OperatingModeSuspended},
		"unset is unset (the schema defaults it to 1)": {nil, ""},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			alpha := &agentsv1alpha1.Sandbox{Spec: agentsv1alpha1.SandboxSpec{Replicas: tc.replicas}}
			beta, err := alphaToBeta(alpha)
			if err != nil {
				t.Fatal(err)
			}
			if beta.Spec.OperatingMode != tc.wantMode {
				t.Errorf("operatingMode = %q, want %q", beta.Spec.OperatingMode, tc.wantMode)
			}
			if len(beta.Annotations) != 0 {
				t.Errorf("v1beta1 annotations = %v, want none: nothing is lost", beta.Annotations)
			}
			back, err := betaToAlpha(beta)
			if err != nil {
				t.Fatal(err)
			}
			if !ptr.Equal(back.Spec.Replicas, tc.replicas) {
				t.Errorf("replicas read back = %v, want %v", ptr.Deref(back.Spec.Replicas, -1), ptr.Deref(tc.replicas, -1))
			}
		})
	}
}

func TestSandboxStatusReplicasCountThePod(t *testing.T) {
	beta := &agentsv1beta1.Sandbox{Status: agentsv1beta1.SandboxStatus{NodeName: "node-1", Selector: "x=y"}}
	alpha, err := betaToAlpha(beta)
	if err != nil {
		t.Fatal(err)
	}
	if alpha.Status.Replicas != 0 {
		t.Errorf("status.replicas without a pod = %d, want 0", alpha.Status.Replicas)
	}
	beta.Status.Conditions = []metav1.Condition{{Type: agentsv1beta1.ConditionPodScheduled, Status: metav1.ConditionTrue}}
	if alpha, err = betaToAlpha(beta); err != nil {
		t.Fatal(err)
	}
	if alpha.Status.Replicas != 1 || alpha.Status.LabelSelector != "x=y" {
		t.Errorf("status = %+v, want replicas 1 and selector x=y (the scale subresource's)", alpha.Status)
	}
}

// Saved values must never override what the object says now: a v1alpha1 replicas kept on a
// Sandbox that v1beta1 has since suspended is stale.
func TestSandboxSavedV1alpha1FieldsYieldToLaterChanges(t *testing.T) {
	alpha := &agentsv1alpha1.Sandbox{Spec: agentsv1alpha1.SandboxSpec{Replicas: ptr.To[int32](7)}}
	beta, err := alphaToBeta(alpha)
	if err != nil {
		t.Fatal(err)
	}
	if beta.Spec.OperatingMode != agentsv1beta1.OperatingModeRunning || beta.Annotations[agentsv1alpha1.AnnotationV1alpha1Fields] == "" {
		t.Fatalf("replicas 7: operatingMode %q, annotations %v; want Running, with 7 kept", beta.Spec.OperatingMode, beta.Annotations)
	}
	if back, _ := betaToAlpha(beta); ptr.Deref(back.Spec.Replicas, -1) != 7 {
		t.Fatalf("replicas read back = %v, want 7", ptr.Deref(back.Spec.Replicas, -1))
	}
	beta.Spec.OperatingMode = agentsv1beta1.OperatingModeSuspended
	back, err := betaToAlpha(beta)
	if err != nil {
		t.Fatal(err)
	}
	if ptr.Deref(back.Spec.Replicas, -1) != 0 {
		t.Errorf("replicas of a suspended Sandbox = %v, want 0", ptr.Deref(back.Spec.Replicas, -1))
	}
	if _, ok := back.Annotations[agentsv1alpha1.AnnotationV1alpha1Fields]; ok {
		t.Errorf("the v1alpha1 object shows the v1beta1 object's bookkeeping: %v", back.Annotations)
	}
}
