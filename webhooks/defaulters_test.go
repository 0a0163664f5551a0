package webhooks_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/ptr"

	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	"github.com/sandgate-dev/sandgate/internal/testing/builders"
	"github.com/sandgate-dev/sandgate/webhooks"
)

func TestDefaults(t *testing.T) {
	pool := builders.MakePool("p", "ns", "t").Obj()
	pool.Spec.Replicas = nil
	pool.Spec.UpdateStrategy.Type = ""
	webhooks.DefaultPool(pool)
	if diff := cmp.Diff(extv1beta1.SandboxWarmPoolSpec{
		Replicas:           ptr.To[int32](1),
		SandboxTemplateRef: extv1beta1.SandboxTemplateRef{Name: "t"},
		UpdateStrategy:     extv1beta1.UpdateStrategy{Type: extv1beta1.OnReplenishUpdateStrategy},
	}, pool.Spec); diff != "" {
		t.Errorf("DefaultPool (-want +got):\n%s", diff)
	}

	tmpl := builders.MakeTemplate("t", "ns").Obj()
	webhooks.DefaultTemplate(tmpl)
	if diff := cmp.Diff([]string{"Managed", "Disallowed", "Disallowed"}, []string{
		string(tmpl.Spec.NetworkPolicyManagement), string(tmpl.Spec.EnvVarsInjectionPolicy), string(tmpl.Spec.VolumeClaimTemplatesPolicy),
	}); diff != "" {
		t.Errorf("DefaultTemplate (-want +got):\n%s", diff)
	}

	sb := builders.MakeSandbox("s", "ns").Obj()
	webhooks.DefaultSandbox(sb)
	if diff := cmp.Diff([]string{"Retain", "Running"}, []string{string(sb.Spec.ShutdownPolicy), string(sb.Spec.OperatingMode)}); diff != "" {
		t.Errorf("DefaultSandbox (-want +got):\n%s", diff)
	}

	claim := builders.MakeClaim("c", "ns", "p").TTLSecondsAfterFinished(5).Obj()
	claim.Spec.Lifecycle.ShutdownPolicy = ""
	webhooks.DefaultClaim(claim)
	if got := claim.Spec.Lifecycle.ShutdownPolicy; got != extv1beta1.ClaimShutdownPolicyRetain {
		t.Errorf("DefaultClaim: shutdownPolicy = %q, want Retain", got)
	}
	noLifecycle := builders.MakeClaim("c", "ns", "p").Obj()
	webhooks.DefaultClaim(noLifecycle)
	if noLifecycle.Spec.Lifecycle != nil {
		t.Errorf("DefaultClaim added a lifecycle: %+v", noLifecycle.Spec.Lifecycle)
	}
}
