package webhooks_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	tenancyv1alpha1 "github.com/sandgate-dev/sandgate/api/tenancy/v1alpha1"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
	"github.com/sandgate-dev/sandgate/internal/testing/builders"
	"github.com/sandgate-dev/sandgate/webhooks"
)

func TestValidateTemplate(t *testing.T) {
	for _, tc := range []struct {
		name string
		tmpl *extv1beta1.SandboxTemplate
		want []string
	}{
		{name: "valid", tmpl: builders.MakeTemplate("t", "ns").PodLabel("app", "x").PodAnnotation("app.kubernetes.io/name", "y").
			VolumeClaimTemplate("data", "1Gi").Obj()},
		{name: "reserved label", tmpl: builders.MakeTemplate("t", "ns").PodLabel(agentsv1beta1.LabelClaimUID, "x").Obj(),
			want: []string{"Forbidden spec.podTemplate.metadata.labels[agents.x-k8s.io/claim-uid]"}},
		{name: "reserved extensions annotation", tmpl: builders.MakeTemplate("t", "ns").PodAnnotation("extensions.agents.x-k8s.io/x", "y").Obj(),
			want: []string{"Forbidden spec.podTemplate.metadata.annotations[extensions.agents.x-k8s.io/x]"}},
		{name: "reserved kubernetes.io and k8s.io", tmpl: builders.MakeTemplate("t", "ns").PodLabel("kubernetes.io/a", "x").PodAnnotation("k8s.io/b", "y").Obj(),
			want: []string{"Forbidden spec.podTemplate.metadata.labels[kubernetes.io/a]", "Forbidden spec.podTemplate.metadata.annotations[k8s.io/b]"}},
		{name: "invalid label value", tmpl: builders.MakeTemplate("t", "ns").PodLabel("app", "not a value").Obj(),
			want: []string{"Invalid value spec.podTemplate.metadata.labels"}},
		{name: "volume claim template name", tmpl: builders.MakeTemplate("t", "ns").VolumeClaimTemplate("Data_1", "1Gi").Obj(),
			want: []string{"Invalid value spec.volumeClaimTemplates[0].metadata.name"}},
		{name: "duplicate volume claim templates", tmpl: builders.MakeTemplate("t", "ns").VolumeClaimTemplate("data", "1Gi").VolumeClaimTemplate("data", "2Gi").Obj(),
			want: []string{"Duplicate value spec.volumeClaimTemplates[1].metadata.name"}},
		{name: "unnamed volume claim template", tmpl: builders.MakeTemplate("t", "ns").VolumeClaimTemplate("", "1Gi").Obj(),
			want: []string{"Required value spec.volumeClaimTemplates[0].metadata.name"}},
		{name: "unknown env policy", tmpl: builders.MakeTemplate("t", "ns").EnvVarsInjectionPolicy("Sometimes").Obj(),
			want: []string{"Unsupported value spec.envVarsInjectionPolicy"}},
		{name: "unknown volume policy", tmpl: builders.MakeTemplate("t", "ns").VolumeClaimTemplatesPolicy("Maybe").Obj(),
			want: []string{"Unsupported value spec.volumeClaimTemplatesPolicy"}},
		{name: "unknown network policy management", tmpl: builders.MakeTemplate("t", "ns").NetworkPolicyManagement("Partly").Obj(),
			want: []string{"Unsupported value spec.networkPolicyManagement"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, summary(webhooks.ValidateTemplate(tc.tmpl))); diff != "" {
				t.Errorf("ValidateTemplate (-want +got):\n%s", diff)
			}
		})
	}
}

func TestValidateSandbox(t *testing.T) {
	for _, tc := range []struct {
		name string
		sb   *agentsv1beta1.Sandbox
		want []string
	}{
		{name: "valid", sb: builders.MakeSandbox("s", "ns").PodLabel("app", "x").Obj()},
		{name: "reserved pod label", sb: builders.MakeSandbox("s", "ns").PodLabel(agentsv1beta1.LabelSandboxTemplateHash, "x").Obj(),
			want: []string{"Forbidden spec.podTemplate.metadata.labels[agents.x-k8s.io/sandbox-template-hash]"}},
		{name: "unknown operating mode", sb: builders.MakeSandbox("s", "ns").OperatingMode("Paused").Obj(),
			want: []string{"Unsupported value spec.operatingMode"}},
		{name: "unknown shutdown policy", sb: builders.MakeSandbox("s", "ns").ShutdownPolicy("Archive").Obj(),
			want: []string{"Unsupported value spec.shutdownPolicy"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, summary(webhooks.ValidateSandbox(tc.sb))); diff != "" {
				t.Errorf("ValidateSandbox (-want +got):\n%s", diff)
			}
		})
	}
}

func TestValidatePool(t *testing.T) {
	for _, tc := range []struct {
		name string
		pool *extv1beta1.SandboxWarmPool
		want []string
	}{
		{name: "valid", pool: builders.MakePool("p", "ns", "tmpl").Replicas(0).Obj()},
		{name: "no template", pool: builders.MakePool("p", "ns", "").Obj(),
			want: []string{"Required value spec.sandboxTemplateRef.name"}},
		{name: "template name not DNS-1123", pool: builders.MakePool("p", "ns", "My_Template").Obj(),
			want: []string{"Invalid value spec.sandboxTemplateRef.name"}},
		{name: "negative replicas", pool: builders.MakePool("p", "ns", "t").Replicas(-1).Obj(),
			want: []string{"Invalid value spec.replicas"}},
		{name: "unknown update strategy", pool: builders.MakePool("p", "ns", "t").UpdateStrategy("Rolling").Obj(),
			want: []string{"Unsupported value spec.updateStrategy.type"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, summary(webhooks.ValidatePool(tc.pool))); diff != "" {
				t.Errorf("ValidatePool (-want +got):\n%s", diff)
			}
		})
	}
}

func TestValidateClaim(t *testing.T) {
	for _, tc := range []struct {
		name  string
		claim *extv1beta1.SandboxClaim
		want  []string
	}{
		{name: "valid", claim: builders.MakeClaim("c", "ns", "pool").Env("A", "1", "main").PodLabel("team", "x").
			VolumeClaimTemplate("scratch", "1Gi").TTLSecondsAfterFinished(0).ShutdownPolicy(extv1beta1.ClaimShutdownPolicyDelete).Obj()},
		{name: "ttl without shutdown time is fine", claim: builders.MakeClaim("c", "ns", "pool").TTLSecondsAfterFinished(60).Obj()},
		{name: "no pool", claim: builders.MakeClaim("c", "ns", "").Obj(),
			want: []string{"Required value spec.warmPoolRef.name"}},
		{name: "pool name not DNS-1123", claim: builders.MakeClaim("c", "ns", "Pool.").Obj(),
			want: []string{"Invalid value spec.warmPoolRef.name"}},
		{name: "reserved additional label", claim: builders.MakeClaim("c", "ns", "pool").PodLabel(agentsv1beta1.LabelClaimUID, "x").Obj(),
			want: []string{"Forbidden spec.additionalPodMetadata.labels[agents.x-k8s.io/claim-uid]"}},
		{name: "reserved additional annotation", claim: builders.MakeClaim("c", "ns", "pool").PodAnnotation("kubernetes.io/x", "y").Obj(),
			want: []string{"Forbidden spec.additionalPodMetadata.annotations[kubernetes.io/x]"}},
		{name: "env name", claim: builders.MakeClaim("c", "ns", "pool").Env("1=A", "1", "").Obj(),
			want: []string{"Invalid value spec.env[0].name"}},
		{name: "env without name", claim: builders.MakeClaim("c", "ns", "pool").Env("", "1", "").Obj(),
			want: []string{"Required value spec.env[0].name"}},
		{name: "env container name", claim: builders.MakeClaim("c", "ns", "pool").Env("A", "1", "Main").Obj(),
			want: []string{"Invalid value spec.env[0].containerName"}},
		{name: "duplicate env", claim: builders.MakeClaim("c", "ns", "pool").Env("A", "1", "").Env("A", "2", "").Obj(),
			want: []string{"Duplicate value spec.env[1].name"}},
		{name: "same env for two containers", claim: builders.MakeClaim("c", "ns", "pool").Env("A", "1", "a").Env("A", "2", "b").Obj()},
		{name: "volume claim template name", claim: builders.MakeClaim("c", "ns", "pool").VolumeClaimTemplate("x.y", "1Gi").Obj(),
			want: []string{"Invalid value spec.volumeClaimTemplates[0].metadata.name"}},
		{name: "negative ttl", claim: builders.MakeClaim("c", "ns", "pool").TTLSecondsAfterFinished(-1).Obj(),
			want: []string{"Invalid value spec.lifecycle.ttlSecondsAfterFinished"}},
		{name: "unknown shutdown policy", claim: builders.MakeClaim("c", "ns", "pool").ShutdownPolicy("Later").Obj(),
			want: []string{"Unsupported value spec.lifecycle.shutdownPolicy"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, summary(webhooks.ValidateClaim(tc.claim))); diff != "" {
				t.Errorf("ValidateClaim (-want +got):\n%s", diff)
			}
		})
	}
}

// bound is c with its agents.x-k8s.io/sandbox-name annotation set to sandbox.
func bound(c *extv1beta1.SandboxClaim, sandbox string) *extv1beta1.SandboxClaim {
	if c.Annotations == nil {
		c.Annotations = map[string]string{}
	}
	c.Annotations[agentsv1beta1.AnnotationSandboxName] = sandbox
	return c
}

func TestValidateClaimUpdate(t *testing.T) {
	stamped := func(pool, hash string) *extv1beta1.SandboxClaim {
		w := builders.MakeClaim("c", "ns", pool)
		if hash != "" {
			w.Annotation(agentsv1beta1.AnnotationSandboxTemplateHash, hash)
		}
		return w.Obj()
	}
	// observed sets the first-observed times admission stamps ("" leaves one unset).
	observed := func(c *extv1beta1.SandboxClaim, webhook, controller string) *extv1beta1.SandboxClaim {
		for k, v := range map[string]string{agentsv1beta1.AnnotationWebhookFirstObservedAt: webhook, agentsv1beta1.AnnotationControllerFirstObservedAt: controller} {
			if v != "" {
				c.Annotations[k] = v
			}
		}
		return c
	}
	for _, tc := range []struct {
		name     string
		old, new *extv1beta1.SandboxClaim
		operator bool
		want     []string
	}{
		{name: "nothing changed", old: stamped("p", "aaa"), new: stamped("p", "aaa")},
		{name: "pool changed", old: stamped("p", "aaa"), new: stamped("q", "aaa"), operator: true,
			want: []string{"Invalid value spec.warmPoolRef"}},
		{name: "stamp changed by a user", old: stamped("p", "aaa"), new: stamped("p", "bbb"),
			want: []string{"Invalid value metadata.annotations[agents.x-k8s.io/sandbox-template-hash]"}},
		{name: "stamp removed by a user", old: stamped("p", "aaa"), new: stamped("p", ""),
			want: []string{"Invalid value metadata.annotations[agents.x-k8s.io/sandbox-template-hash]"}},
		{name: "stamp added by a user", old: stamped("p", ""), new: stamped("p", "aaa"),
			want: []string{"Invalid value metadata.annotations[agents.x-k8s.io/sandbox-template-hash]"}},
		{name: "stamp added by the operator", old: stamped("p", ""), new: stamped("p", "aaa"), operator: true},
		{name: "admission time changed by a user", old: observed(stamped("p", "aaa"), "2026-11-27T03:00:00Z", "2026-11-27T03:00:00Z"),
			new:  observed(stamped("p", "aaa"), "0001-01-01T00:00:00Z", "2026-11-27T03:00:00Z"),
			want: []string{"Invalid value metadata.annotations[agents.x-k8s.io/webhook-first-observed-at]"}},
		{name: "admission times removed by a user", old: observed(stamped("p", "aaa"), "2026-11-27T03:00:00Z", "2026-11-27T03:00:00Z"),
			new: stamped("p", "aaa"),
			want: []string{
				"Invalid value metadata.annotations[agents.x-k8s.io/webhook-first-observed-at]",
				"Invalid value metadata.annotations[agents.x-k8s.io/controller-first-observed-at]",
			}},
		{name: "controller time added by a user to a claim admitted without", old: stamped("p", "aaa"),
			new:  observed(stamped("p", "aaa"), "", "0001-01-01T00:00:00Z"),
			want: []string{"Invalid value metadata.annotations[agents.x-k8s.io/controller-first-observed-at]"}},
		{name: "admission times kept by a user", old: observed(stamped("p", "aaa"), "2026-11-27T03:00:00Z", "2026-11-27T03:00:00Z"),
			new: observed(stamped("p", "aaa"), "2026-11-27T03:00:00Z", "2026-11-27T03:00:00Z")},
		{name: "binding named by a user", old: stamped("p", "aaa"), new: bound(stamped("p", "aaa"), "someone-elses"),
			want: []string{"Invalid value metadata.annotations[agents.x-k8s.io/sandbox-name]"}},
		{name: "binding changed by a user", old: bound(stamped("p", "aaa"), "c"), new: bound(stamped("p", "aaa"), "someone-elses"),
			want: []string{"Invalid value metadata.annotations[agents.x-k8s.io/sandbox-name]"}},
		{name: "binding removed by a user", old: bound(stamped("p", "aaa"), "c"), new: stamped("p", "aaa"),
			want: []string{"Invalid value metadata.annotations[agents.x-k8s.io/sandbox-name]"}},
		{name: "binding recorded by the operator", old: stamped("p", "aaa"), new: bound(stamped("p", "aaa"), "c"), operator: true},
		{name: "binding corrected by the operator", old: bound(stamped("p", "aaa"), "x"), new: bound(stamped("p", "aaa"), "c"), operator: true},
		{name: "creator's groups changed, by the operator too", old: counted(stamped("p", "aaa"), "team-a", "r1"), new: counted(stamped("p", "aaa"), "team-b", "r1"), operator: true,
			want: []string{"Invalid value metadata.annotations[policy.sandgate.dev/creator-groups]"}},
		{name: "creator's groups removed", old: counted(stamped("p", "aaa"), "team-a", "r1"), new: counted(stamped("p", "aaa"), "", "r1"),
			want: []string{"Invalid value metadata.annotations[policy.sandgate.dev/creator-groups]"}},
		{name: "creator's groups added", old: stamped("p", "aaa"), new: counted(stamped("p", "aaa"), "team-b", ""),
			want: []string{"Invalid value metadata.annotations[policy.sandgate.dev/creator-groups]"}},
		{name: "reservation changed", old: counted(stamped("p", "aaa"), "team-a", "r1"), new: counted(stamped("p", "aaa"), "team-a", "r2"),
			want: []string{"Invalid value metadata.annotations[policy.sandgate.dev/reservation]"}},
		{name: "reservation removed", old: counted(stamped("p", "aaa"), "team-a", "r1"), new: counted(stamped("p", "aaa"), "team-a", ""),
			want: []string{"Invalid value metadata.annotations[policy.sandgate.dev/reservation]"}},
		{name: "what policies count by, kept", old: counted(stamped("p", "aaa"), "team-a", "r1"), new: counted(stamped("p", "aaa"), "team-a", "r1")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, summary(webhooks.ValidateClaimUpdate(tc.new, tc.old, tc.operator))); diff != "" {
				t.Errorf("ValidateClaimUpdate (-want +got):\n%s", diff)
			}
		})
	}
}

// counted sets what ClaimPolicies count a claim by: its creator's groups and its reservation
// ("" leaves one unset).
func counted(c *extv1beta1.SandboxClaim, groups, reservation string) *extv1beta1.SandboxClaim {
	for k, v := range map[string]string{tenancyv1alpha1.AnnotationCreatorGroups: groups, tenancyv1alpha1.AnnotationReservation: reservation} {
		if v != "" {
			c.Annotations[k] = v
		}
	}
	return c
}

func TestRatchetUpdate(t *testing.T) {
	old := builders.MakeTemplate("t", "ns").PodLabel("kubernetes.io/legacy", "x").Obj()
	for _, tc := range []struct {
		name string
		new  *extv1beta1.SandboxTemplate
		want []string
	}{
		{name: "old problem kept", new: builders.MakeTemplate("t", "ns").PodLabel("kubernetes.io/legacy", "x").Image("other").Obj()},
		{name: "new problem", new: builders.MakeTemplate("t", "ns").PodLabel("kubernetes.io/legacy", "x").PodLabel("k8s.io/new", "y").Obj(),
			want: []string{"Forbidden spec.podTemplate.metadata.labels[k8s.io/new]"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := webhooks.RatchetUpdate(webhooks.ValidateTemplate(tc.new), webhooks.ValidateTemplate(old))
			if diff := cmp.Diff(tc.want, summary(got)); diff != "" {
				t.Errorf("RatchetUpdate (-want +got):\n%s", diff)
			}
		})
	}
}
