package policy_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/sandgate-dev/sandgate/api/policy"
)

func TestValidateClaimLabelDomains(t *testing.T) {
	path := field.NewPath("spec", "additionalPodMetadata", "labels")
	tests := map[string]struct {
		labels  map[string]string
		allowed []string
		// wantForbidden are the label keys refused, in order.
		wantForbidden []string
		// wantMessage is in every error's detail.
		wantMessage string
	}{
		"the default domain":                  {labels: map[string]string{"sandbox.users.io/team": "a"}},
		"a subdomain of the default domain":   {labels: map[string]string{"research.sandbox.users.io/team": "a"}},
		"the domain's case does not matter":   {labels: map[string]string{"Sandbox.Users.IO/team": "a"}},
		"a domain that only ends like it":     {labels: map[string]string{"evilsandbox.users.io/team": "a"}, wantForbidden: []string{"evilsandbox.users.io/team"}, wantMessage: "allowed domains (and their subdomains): sandbox.users.io"},
		"a parent of the allowed domain":      {labels: map[string]string{"users.io/team": "a"}, wantForbidden: []string{"users.io/team"}},
		"another domain":                      {labels: map[string]string{"example.com/team": "a"}, wantForbidden: []string{"example.com/team"}, wantMessage: `label domain "example.com" is not in the allowlist`},
		"unprefixed":                          {labels: map[string]string{"team": "a"}, wantForbidden: []string{"team"}, wantMessage: "need a domain prefix (e.g. sandbox.users.io/team)"},
		"router impersonation":                {labels: map[string]string{"app": "sandbox-router"}, wantForbidden: []string{"app"}, wantMessage: "sandbox router's label"},
		"router impersonation in other cases": {labels: map[string]string{"App": "Sandbox-Router"}, wantForbidden: []string{"App"}, wantMessage: "sandbox router's label"},
		"router label under an allowed domain": {
			labels: map[string]string{"sandbox.users.io/app": "sandbox-router"}},
		"reserved keys are left to ValidateClaimPodMetadata": {
			labels:  map[string]string{"agents.x-k8s.io/claim-uid": "x", "app.kubernetes.io/name": "x"},
			allowed: []string{"x-k8s.io", "kubernetes.io"}},
		"invalid keys are left to ValidateClaimPodMetadata": {labels: map[string]string{"a/b/c": "x"}},
		"a custom list replaces the default": {
			labels:        map[string]string{"sandbox.users.io/team": "a", "acme.example/team": "a", "ml.acme.example/gpu": "yes"},
			allowed:       []string{"acme.example"},
			wantForbidden: []string{"sandbox.users.io/team"},
			wantMessage:   "acme.example",
		},
		"a list of several domains": {
			labels:  map[string]string{"sandbox.users.io/team": "a", "acme.example/team": "a"},
			allowed: []string{"acme.example", "sandbox.users.io"}},
		"an empty list is the default": {
			labels:        map[string]string{"sandbox.users.io/team": "a", "acme.example/team": "a"},
			allowed:       []string{},
			wantForbidden: []string{"acme.example/team"},
		},
		"every refused label is named": {
			labels:        map[string]string{"b": "1", "a": "1", "z.example/c": "1"},
			wantForbidden: []string{"a", "b", "z.example/c"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			errs := policy.ValidateClaimLabelDomains(tc.labels, path, tc.allowed)
			var got []string
			for _, e := range errs {
				if e.Type != field.ErrorTypeForbidden {
					t.Errorf("error type %s, want Forbidden: %v", e.Type, e)
				}
				if !strings.Contains(e.Detail, tc.wantMessage) {
					t.Errorf("error %q does not say %q", e.Detail, tc.wantMessage)
				}
				got = append(got, strings.TrimSuffix(strings.TrimPrefix(e.Field, path.String()+"["), "]"))
			}
			if diff := cmp.Diff(tc.wantForbidden, got); diff != "" {
				t.Errorf("refused labels (-want +got):\n%s", diff)
			}
		})
	}
}

// TestParseLabelDomains: the allowed-label-domains file is read as the public controller
// reads it (cmd/agent-sandbox-controller/main.go).
func TestParseLabelDomains(t *testing.T) {
	tests := map[string]struct {
		file string
		want []string
	}{
		"one domain":                           {file: "sandbox.users.io", want: []string{"sandbox.users.io"}},
		"comma separated, spaces trimmed":      {file: " a.example , b.example ", want: []string{"a.example", "b.example"}},
		"one a line, CRLF, trailing newline":   {file: "a.example\r\nb.example\n", want: []string{"a.example", "b.example"}},
		"lowercased":                           {file: "Acme.Example", want: []string{"acme.example"}},
		"empty entries dropped":                {file: ",,a.example,\n\n", want: []string{"a.example"}},
		"empty":                                {file: "", want: nil},
		"only separators and spaces":           {file: " ,\n , ", want: nil},
		"spaces inside an entry are not split": {file: "a.example b.example", want: []string{"a.example b.example"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, policy.ParseLabelDomains(tc.file)); diff != "" {
				t.Errorf("ParseLabelDomains(%q) (-want +got):\n%s", tc.file, diff)
			}
		})
	}
}

func TestLabelDomainsDefault(t *testing.T) {
	var unset *policy.LabelDomains
	if diff := cmp.Diff([]string{"sandbox.users.io"}, unset.Get()); diff != "" {
		t.Errorf("nil LabelDomains (-want +got):\n%s", diff)
	}
	l := policy.NewLabelDomains([]string{" Acme.Example "})
	if diff := cmp.Diff([]string{"acme.example"}, l.Get()); diff != "" {
		t.Errorf("after Set (-want +got):\n%s", diff)
	}
	l.Set(nil)
	if diff := cmp.Diff([]string{"sandbox.users.io"}, l.Get()); diff != "" {
		t.Errorf("after Set(nil) (-want +got):\n%s", diff)
	}
}

func TestValidateClaimAnnotationDomains(t *testing.T) {
	path := field.NewPath("spec", "additionalPodMetadata", "annotations")
	tests := map[string]struct {
		annotations map[string]string
		allowed     []string
		// wantForbidden are the annotation keys refused, in order.
		wantForbidden []string
		// wantMessage is in every error's detail.
		wantMessage string
	}{
		"the default domain":                {annotations: map[string]string{"sandbox.users.io/note": "a"}},
		"a subdomain of the default domain": {annotations: map[string]string{"research.sandbox.users.io/note": "a"}},
		"the domain's case does not matter": {annotations: map[string]string{"Sandbox.Users.IO/note": "a"}},
		"a domain that only ends like it": {annotations: map[string]string{"evilsandbox.users.io/note": "a"},
			wantForbidden: []string{"evilsandbox.users.io/note"}, wantMessage: "allowed domains (and their subdomains): sandbox.users.io"},
		"a service mesh's opt-out": {annotations: map[string]string{"sidecar.istio.io/inject": "false"},
			wantForbidden: []string{"sidecar.istio.io/inject"}, wantMessage: `annotation domain "sidecar.istio.io" is not in the allowlist`},
		"the refusal names the flag": {annotations: map[string]string{"linkerd.io/inject": "disabled"},
			wantForbidden: []string{"linkerd.io/inject"}, wantMessage: "the platform sets them with --claim-allowed-annotation-domains"},
		"unprefixed, as runtime options are": {annotations: map[string]string{"run.oci.keep_original_groups": "1"},
			wantForbidden: []string{"run.oci.keep_original_groups"}, wantMessage: "need a domain prefix (e.g. sandbox.users.io/run.oci.keep_original_groups)"},
		"the autoscaler's exception stays allowed": {annotations: map[string]string{"cluster-autoscaler.kubernetes.io/safe-to-evict": "true"}},
		"reserved keys are left to ValidateClaimPodMetadata": {
			annotations: map[string]string{"agents.x-k8s.io/claim-uid": "x", "container.apparmor.security.beta.kubernetes.io/main": "unconfined"}},
		"runtime prefixes are left to ValidateClaimPodMetadata": {annotations: map[string]string{"io.kubernetes.cri-o.userns-mode": "x"}},
		"invalid keys are left to ValidateClaimPodMetadata":     {annotations: map[string]string{"a/b/c": "x"}},
		"a custom list replaces the default": {
			annotations:   map[string]string{"sandbox.users.io/note": "a", "acme.example/note": "a", "ml.acme.example/gpu": "yes"},
			allowed:       []string{"acme.example"},
			wantForbidden: []string{"sandbox.users.io/note"},
			wantMessage:   "acme.example",
		},
		"an empty list is the default": {
			annotations: map[string]string{"sandbox.users.io/note": "a", "acme.example/note": "a"}, allowed: []string{},
			wantForbidden: []string{"acme.example/note"},
		},
		"every refused annotation is named": {
			annotations:   map[string]string{"b": "1", "a": "1", "k8s.v1.cni.cncf.io/networks": "macvlan"},
			wantForbidden: []string{"a", "b", "k8s.v1.cni.cncf.io/networks"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			errs := policy.ValidateClaimAnnotationDomains(tc.annotations, path, tc.allowed)
			var got []string
			for _, e := range errs {
				if e.Type != field.ErrorTypeForbidden {
					t.Errorf("error type %s, want Forbidden: %v", e.Type, e)
				}
				if !strings.Contains(e.Detail, tc.wantMessage) {
					t.Errorf("error %q does not say %q", e.Detail, tc.wantMessage)
				}
				got = append(got, strings.TrimSuffix(strings.TrimPrefix(e.Field, path.String()+"["), "]"))
			}
			if diff := cmp.Diff(tc.wantForbidden, got); diff != "" {
				t.Errorf("refused annotations (-want +got):\n%s", diff)
			}
		})
	}
}

// A configured annotation allowlist holds domains only: what could not prefix an annotation
// key is refused at start, not silently never matched.
func TestValidateAnnotationDomains(t *testing.T) {
	if errs := policy.ValidateAnnotationDomains([]string{"sandbox.users.io", "acme.example"}, field.NewPath("domains")); len(errs) > 0 {
		t.Errorf("valid domains refused: %v", errs)
	}
	errs := policy.ValidateAnnotationDomains([]string{"acme.example", "acme.example/x", "*", "Acme.Example"}, field.NewPath("domains"))
	var got []string
	for _, e := range errs {
		got = append(got, e.Field)
	}
	if diff := cmp.Diff([]string{"domains[1]", "domains[2]", "domains[3]"}, got); diff != "" {
		t.Errorf("refused entries (-want +got):\n%s", diff)
	}
}
