package webhooks_test

import (
	"encoding/json"
	"testing"

	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	"github.com/sandgate-dev/sandgate/api/policy"
	"github.com/sandgate-dev/sandgate/internal/testing/builders"
	"github.com/sandgate-dev/sandgate/webhooks"
)

// The validation functions see whatever a client sends that the schema lets through: they must
// return errors, never panic. `go test` runs the seeds; `go test -fuzz FuzzValidateClaim`
// explores further.

func claimSeeds() []string {
	full := builders.MakeClaim("c", "ns", "pool").Env("A", "1", "main").Env("A", "2", "").PodLabel("agents.x-k8s.io/x", "y").
		PodAnnotation("k8s.io/a", "b").VolumeClaimTemplate("data", "1Gi").VolumeClaimTemplate("", "1Gi").TTLSecondsAfterFinished(-3).Obj()
	raw, _ := json.Marshal(full)
	return []string{
		string(raw),
		`{}`,
		`{"spec":{"warmPoolRef":{"name":""},"lifecycle":{}}}`,
		`{"spec":{"env":[{"name":"","containerName":"-"}],"volumeClaimTemplates":[{"metadata":{"name":"A_B"}}]}}`,
		`{"spec":{"additionalPodMetadata":{"labels":{"/":"","a/b/c":"\u0000"},"annotations":{"":""}}}}`,
		`{"metadata":{"annotations":{"agents.x-k8s.io/sandbox-template-hash":""}},"spec":{"lifecycle":{"ttlSecondsAfterFinished":-2147483648,"shutdownPolicy":"x"}}}`,
	}
}

func templateSeeds() []string {
	full := builders.MakeTemplate("t", "ns").Env("main", "SET", "x").PodLabel("kubernetes.io/a", "b").VolumeClaimTemplate("data", "1Gi").
		VolumeClaimTemplate("data", "1Gi").EnvVarsInjectionPolicy(extv1beta1.EnvVarsInjectionAllowed).Obj()
	raw, _ := json.Marshal(full)
	return []string{
		string(raw),
		`{}`,
		`{"spec":{"podTemplate":{"spec":{"containers":null,"initContainers":[{"name":""}]}}}}`,
		`{"spec":{"podTemplate":{"metadata":{"labels":{"":"","k8s.io/":"x"}}},"envVarsInjectionPolicy":"?","volumeClaimTemplatesPolicy":""}}`,
		`{"spec":{"volumeClaimTemplates":[{},{"metadata":{"name":"a"}},{"metadata":{"name":"a"}}]}}`,
	}
}

func FuzzValidateClaim(f *testing.F) {
	for _, s := range claimSeeds() {
		for _, t := range templateSeeds() {
			f.Add(s, t)
		}
	}
	f.Fuzz(func(t *testing.T, claimJSON, templateJSON string) {
		var c extv1beta1.SandboxClaim
		if err := json.Unmarshal([]byte(claimJSON), &c); err != nil {
			return
		}
		var tmpl extv1beta1.SandboxTemplate
		if err := json.Unmarshal([]byte(templateJSON), &tmpl); err != nil {
			return
		}
		webhooks.DefaultClaim(&c)
		_ = webhooks.ValidateClaim(&c)
		_ = policy.ValidateClaimAgainstTemplate(&c, &tmpl)
		_ = webhooks.ValidateClaimUpdate(&c, &c, false)
		_ = webhooks.RatchetUpdate(webhooks.ValidateClaim(&c), nil)
	})
}

func FuzzValidateTemplate(f *testing.F) {
	for _, s := range templateSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, templateJSON string) {
		var tmpl extv1beta1.SandboxTemplate
		if err := json.Unmarshal([]byte(templateJSON), &tmpl); err != nil {
			return
		}
		webhooks.DefaultTemplate(&tmpl)
		errs := webhooks.ValidateTemplate(&tmpl)
		// Validating twice gives the same answer: the rules read nothing but the object.
		if again := webhooks.ValidateTemplate(&tmpl); len(again) != len(errs) {
			t.Errorf("ValidateTemplate is not deterministic: %d then %d errors", len(errs), len(again))
		}
	})
}
