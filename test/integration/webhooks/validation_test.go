//go:build integration

package webhooks_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
	"github.com/sandgate-dev/sandgate/internal/testing/builders"
)

// Every validation rule refuses a bad object with 422 Invalid at the offending field, through
// the API server as kubectl would see it.
func TestValidationRejects(t *testing.T) {
	e := setup(t)
	// Templates with each injection policy, and pools on them, for the claims' policy rules.
	for name, p := range map[string][2]string{
		"closed":    {"", ""},
		"allowed":   {string(extv1beta1.EnvVarsInjectionAllowed), string(extv1beta1.VolumeClaimTemplatesAllowed)},
		"overrides": {string(extv1beta1.EnvVarsInjectionOverrides), string(extv1beta1.VolumeClaimTemplatesOverrides)},
	} {
		tmpl := builders.MakeTemplate(name, e.ns).Env(builders.DefaultContainer, "SET", "x").VolumeClaimTemplate("data", "1Gi").
			EnvVarsInjectionPolicy(extv1beta1.EnvVarsInjectionPolicy(p[0])).
			VolumeClaimTemplatesPolicy(extv1beta1.VolumeClaimTemplatesPolicy(p[1])).Obj()
		e.create(e.admin, tmpl)
		e.create(e.admin, builders.MakePool(name, e.ns, name).Obj())
	}
	e.create(e.admin, builders.MakeTemplate("labelled", e.ns).PodLabel("sandbox.users.io/team", "a").Obj())
	e.create(e.admin, builders.MakePool("labelled", e.ns, "labelled").Obj())
	claim := func(name, pool string) *builders.ClaimWrapper { return builders.MakeClaim(name, e.ns, pool) }

	for _, tc := range []struct {
		name      string
		obj       client.Object
		wantField string
	}{
		{name: "template reserved label", obj: builders.MakeTemplate("t1", e.ns).PodLabel(agentsv1beta1.LabelClaimUID, "x").Obj(),
			wantField: "spec.podTemplate.metadata.labels[agents.x-k8s.io/claim-uid]"},
		{name: "template reserved extensions annotation", obj: builders.MakeTemplate("t2", e.ns).PodAnnotation("extensions.agents.x-k8s.io/x", "y").Obj(),
			wantField: "spec.podTemplate.metadata.annotations[extensions.agents.x-k8s.io/x]"},
		{name: "template reserved kubernetes.io label", obj: builders.MakeTemplate("t3", e.ns).PodLabel("kubernetes.io/x", "y").Obj(),
			wantField: "spec.podTemplate.metadata.labels[kubernetes.io/x]"},
		{name: "template reserved k8s.io annotation", obj: builders.MakeTemplate("t4", e.ns).PodAnnotation("k8s.io/x", "y").Obj(),
			wantField: "spec.podTemplate.metadata.annotations[k8s.io/x]"},
		{name: "template volume claim template name", obj: builders.MakeTemplate("t5", e.ns).VolumeClaimTemplate("Data_1", "1Gi").Obj(),
			wantField: "spec.volumeClaimTemplates[0].metadata.name"},
		{name: "template duplicate volume claim template", obj: builders.MakeTemplate("t6", e.ns).VolumeClaimTemplate("d", "1Gi").VolumeClaimTemplate("d", "1Gi").Obj(),
			wantField: "spec.volumeClaimTemplates[1].metadata.name"},
		{name: "sandbox reserved pod label", obj: builders.MakeSandbox("s1", e.ns).PodLabel(agentsv1beta1.LabelSandboxTemplateHash, "x").Obj(),
			wantField: "spec.podTemplate.metadata.labels[agents.x-k8s.io/sandbox-template-hash]"},
		{name: "sandbox volume claim template name", obj: builders.MakeSandbox("s2", e.ns).VolumeClaimTemplate("a.b", "1Gi").Obj(),
			wantField: "spec.volumeClaimTemplates[0].metadata.name"},
		{name: "pool template reference not a name", obj: builders.MakePool("p1", e.ns, "My_Template").Obj(),
			wantField: "spec.sandboxTemplateRef.name"},
		{name: "pool without template reference", obj: builders.MakePool("p2", e.ns, "").Obj(),
			wantField: "spec.sandboxTemplateRef.name"},
		{name: "pool negative replicas", obj: builders.MakePool("p3", e.ns, "closed").Replicas(-1).Obj(),
			wantField: "spec.replicas"},
		{name: "claim pool reference not a name", obj: claim("c1", "Pool_1").Obj(),
			wantField: "spec.warmPoolRef.name"},
		{name: "claim reserved additional label", obj: claim("c2", "allowed").PodLabel(agentsv1beta1.LabelClaimUID, "x").Obj(),
			wantField: "spec.additionalPodMetadata.labels[agents.x-k8s.io/claim-uid]"},
		{name: "claim reserved additional annotation", obj: claim("c3", "allowed").PodAnnotation("kubernetes.io/x", "y").Obj(),
			wantField: "spec.additionalPodMetadata.annotations[kubernetes.io/x]"},
		{name: "claim env name", obj: claim("c4", "allowed").Env("1A", "v", "").Obj(),
			wantField: "spec.env[0].name"},
		{name: "claim duplicate env", obj: claim("c5", "allowed").Env("A", "1", "").Env("A", "2", "").Obj(),
			wantField: "spec.env[1].name"},
		{name: "claim env for a container the template lacks", obj: claim("c6", "allowed").Env("A", "1", "sidecar").Obj(),
			wantField: "spec.env[0].containerName"},
		{name: "claim env where the template disallows it", obj: claim("c7", "closed").Env("A", "1", "").Obj(),
			wantField: "spec.env"},
		{name: "claim env override where only additions are allowed", obj: claim("c8", "allowed").Env("SET", "1", "").Obj(),
			wantField: "spec.env[0].name"},
		{name: "claim volume claim templates where the template disallows them", obj: claim("c9", "closed").VolumeClaimTemplate("scratch", "1Gi").Obj(),
			wantField: "spec.volumeClaimTemplates"},
		{name: "claim volume claim template replaced where only additions are allowed", obj: claim("c10", "allowed").VolumeClaimTemplate("data", "1Gi").Obj(),
			wantField: "spec.volumeClaimTemplates[0].metadata.name"},
		{name: "claim volume claim template name", obj: claim("c11", "overrides").VolumeClaimTemplate("x.y", "1Gi").Obj(),
			wantField: "spec.volumeClaimTemplates[0].metadata.name"},
		{name: "claim negative ttl", obj: claim("c12", "closed").TTLSecondsAfterFinished(-1).Obj(),
			wantField: "spec.lifecycle.ttlSecondsAfterFinished"},
		{name: "claim pod annotation of a kubernetes.io subdomain", obj: claim("c13", "closed").PodAnnotation("container.apparmor.security.beta.kubernetes.io/main", "unconfined").Obj(),
			wantField: "spec.additionalPodMetadata.annotations[container.apparmor.security.beta.kubernetes.io/main]"},
		{name: "claim pod label changing the template's", obj: claim("c14", "labelled").PodLabel("sandbox.users.io/team", "b").Obj(),
			wantField: "spec.additionalPodMetadata.labels[sandbox.users.io/team]"},
		{name: "pool replicas over the bound", obj: builders.MakePool("p4", e.ns, "closed").Replicas(extv1beta1.MaxWarmPoolReplicas + 1).Obj(),
			wantField: "spec.replicas"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			expectInvalid(NewWithT(t), e.user.Create(context.Background(), tc.obj), tc.wantField)
		})
	}

	// The same claims are fine where the template's policy allows them.
	for _, ok := range []client.Object{
		claim("ok1", "allowed").Env("A", "1", builders.DefaultContainer).VolumeClaimTemplate("scratch", "1Gi").TTLSecondsAfterFinished(0).Obj(),
		claim("ok2", "overrides").Env("SET", "1", "").VolumeClaimTemplate("data", "2Gi").Obj(),
		builders.MakeTemplate("ok3", e.ns).PodLabel("app.kubernetes.io/name", "x").Obj(),
		claim("ok4", "labelled").PodLabel("sandbox.users.io/team", "a").PodLabel("sandbox.users.io/user", "u1").Obj(),
	} {
		e.create(e.user, ok)
	}
}

// An update is refused for a problem it introduces, with the same 422.
func TestValidationOnUpdate(t *testing.T) {
	e := setup(t)
	tmpl := builders.MakeTemplate("t", e.ns).Obj()
	e.create(e.admin, tmpl)
	patch := map[string]any{"spec": map[string]any{"podTemplate": map[string]any{
		"metadata": map[string]any{"labels": map[string]any{agentsv1beta1.LabelClaimUID: "x"}},
	}}}
	expectInvalid(e.g, mergePatch(e.ctx(), e.user, tmpl, patch), "spec.podTemplate.metadata.labels[agents.x-k8s.io/claim-uid]")
	pool := builders.MakePool("p", e.ns, "t").Obj()
	e.create(e.admin, pool)
	expectInvalid(e.g, mergePatch(e.ctx(), e.user, pool, map[string]any{"spec": map[string]any{"sandboxTemplateRef": map[string]any{"name": "Not_A_Name"}}}),
		"spec.sandboxTemplateRef.name")
}
