package api_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	"github.com/sandgate-dev/sandgate/api/policy"
)

// loadSchema reads a generated CRD from config/crd/bases and returns its v1beta1 schema.
func loadSchema(t *testing.T, file string) *apiextensionsv1.JSONSchemaProps {
	t.Helper()
	return loadVersionSchema(t, file, "v1beta1")
}

// loadVersionSchema reads a generated CRD from config/crd/bases and returns the schema of
// version.
func loadVersionSchema(t *testing.T, file, version string) *apiextensionsv1.JSONSchemaProps {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "config", "crd", "bases", file))
	if err != nil {
		t.Fatalf("reading CRD (run `make manifests`): %v", err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(raw, crd); err != nil {
		t.Fatalf("decoding %s: %v", file, err)
	}
	for _, v := range crd.Spec.Versions {
		if v.Name == version {
			return v.Schema.OpenAPIV3Schema
		}
	}
	t.Fatalf("%s has no %s version", file, version)
	return nil
}

// at walks a dotted path of properties.
func at(t *testing.T, s *apiextensionsv1.JSONSchemaProps, path string) apiextensionsv1.JSONSchemaProps {
	t.Helper()
	cur := *s
	for _, p := range strings.Split(path, ".") {
		next, ok := cur.Properties[p]
		if !ok {
			t.Fatalf("schema has no %s (at %q)", path, p)
		}
		cur = next
	}
	return cur
}

// TestDefaultingAndValidationMarkers pins the defaults, enums and minimums the contract
// gives, as they reach the generated CRDs: a marker typo or a lost marker fails here, before
// any cluster runs.
func TestDefaultingAndValidationMarkers(t *testing.T) {
	type want struct {
		def     string   // JSON of the default, "" for none
		enum    []string // allowed values, nil for no enum
		minimum *float64
	}
	zero := 0.0
	cases := map[string]struct {
		file string
		path string
		want want
	}{
		"sandbox shutdownPolicy":           {"agents.x-k8s.io_sandboxes.yaml", "spec.shutdownPolicy", want{`"Retain"`, []string{"Delete", "Retain"}, nil}},
		"sandbox operatingMode":            {"agents.x-k8s.io_sandboxes.yaml", "spec.operatingMode", want{`"Running"`, []string{"Running", "Suspended"}, nil}},
		"template networkPolicyManagement": {"extensions.agents.x-k8s.io_sandboxtemplates.yaml", "spec.networkPolicyManagement", want{`"Managed"`, []string{"Managed", "Unmanaged"}, nil}},
		"template envVarsInjectionPolicy":  {"extensions.agents.x-k8s.io_sandboxtemplates.yaml", "spec.envVarsInjectionPolicy", want{`"Disallowed"`, []string{"Allowed", "Overrides", "Disallowed"}, nil}},
		"template volumeClaimTemplatesPolicy": {"extensions.agents.x-k8s.io_sandboxtemplates.yaml", "spec.volumeClaimTemplatesPolicy",
			want{`"Disallowed"`, []string{"Disallowed", "Allowed", "Overrides"}, nil}},
		"pool replicas":                 {"extensions.agents.x-k8s.io_sandboxwarmpools.yaml", "spec.replicas", want{`1`, nil, &zero}},
		"pool updateStrategy":           {"extensions.agents.x-k8s.io_sandboxwarmpools.yaml", "spec.updateStrategy", want{`{"type":"OnReplenish"}`, nil, nil}},
		"pool updateStrategy.type":      {"extensions.agents.x-k8s.io_sandboxwarmpools.yaml", "spec.updateStrategy.type", want{`"OnReplenish"`, []string{"Recreate", "OnReplenish"}, nil}},
		"claim shutdownPolicy":          {"extensions.agents.x-k8s.io_sandboxclaims.yaml", "spec.lifecycle.shutdownPolicy", want{`"Retain"`, []string{"Delete", "DeleteForeground", "Retain"}, nil}},
		"claim ttlSecondsAfterFinished": {"extensions.agents.x-k8s.io_sandboxclaims.yaml", "spec.lifecycle.ttlSecondsAfterFinished", want{"", nil, &zero}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p := at(t, loadSchema(t, tc.file), tc.path)
			got := want{minimum: p.Minimum}
			if p.Default != nil {
				got.def = string(p.Default.Raw)
			}
			for _, e := range p.Enum {
				got.enum = append(got.enum, strings.Trim(string(e.Raw), `"`))
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestVolumeClaimTemplatesImmutabilityRule pins the CEL rule and the message clients see.
func TestVolumeClaimTemplatesImmutabilityRule(t *testing.T) {
	spec := at(t, loadSchema(t, "agents.x-k8s.io_sandboxes.yaml"), "spec")
	var messages []string
	for _, r := range spec.XValidations {
		messages = append(messages, r.Message)
	}
	if diff := cmp.Diff([]string{"volumeClaimTemplates is immutable"}, messages); diff != "" {
		t.Errorf("CEL rules on spec (-want +got):\n%s", diff)
	}
}

// TestListLimitsReachTheCRDs pins the maxItems of the lists admission bounds to the numbers
// admission checks (policy.MaxClaimEnv, policy.MaxVolumeClaimTemplates): the API server
// refuses an oversized list before a webhook pays for walking it.
func TestListLimitsReachTheCRDs(t *testing.T) {
	cases := map[string]struct {
		file, path string
		want       int64
	}{
		"claim env":                     {"extensions.agents.x-k8s.io_sandboxclaims.yaml", "spec.env", policy.MaxClaimEnv},
		"claim volumeClaimTemplates":    {"extensions.agents.x-k8s.io_sandboxclaims.yaml", "spec.volumeClaimTemplates", policy.MaxVolumeClaimTemplates},
		"sandbox volumeClaimTemplates":  {"agents.x-k8s.io_sandboxes.yaml", "spec.volumeClaimTemplates", policy.MaxVolumeClaimTemplates},
		"template volumeClaimTemplates": {"extensions.agents.x-k8s.io_sandboxtemplates.yaml", "spec.volumeClaimTemplates", policy.MaxVolumeClaimTemplates},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p := at(t, loadSchema(t, tc.file), tc.path)
			if p.MaxItems == nil || *p.MaxItems != tc.want {
				t.Errorf("maxItems = %v, want %d", p.MaxItems, tc.want)
			}
		})
	}
}

// TestAutoscalerSchema pins what the WarmPoolAutoscaler's CRD checks before any webhook: its
// defaults, and the CEL rules that bound minimums by maxReplicas and refuse an empty window
// (the API server refuses a CRD whose rules cost too much: the strings they read are bounded).
func TestAutoscalerSchema(t *testing.T) {
	const file = "autoscaling.sandgate.dev_warmpoolautoscalers.yaml"
	s := loadVersionSchema(t, file, "v1alpha1")
	for path, want := range map[string]string{"spec.minReplicas": "1", "spec.targetSpare": "2"} {
		if p := at(t, s, path); p.Default == nil || string(p.Default.Raw) != want {
			t.Errorf("%s default %v, want %s", path, p.Default, want)
		}
	}
	spec := at(t, s, "spec")
	var messages []string
	for _, r := range spec.XValidations {
		messages = append(messages, r.Message)
	}
	for _, r := range spec.Properties["schedules"].Items.Schema.XValidations {
		messages = append(messages, r.Message)
	}
	want := []string{"minReplicas must not exceed maxReplicas", "a schedule's minReplicas must not exceed maxReplicas",
		"start and end must differ: the window would be empty"}
	if diff := cmp.Diff(want, messages); diff != "" {
		t.Errorf("CEL rules (-want +got):\n%s", diff)
	}
}
