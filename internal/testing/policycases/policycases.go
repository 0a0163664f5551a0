// Package policycases is the one table of the claim injection rule, policy.ClaimBlueprint:
// what a claim may add to its template (env, volume claim templates, pod metadata) under the
// template's policies. Admission (ClaimWebhook.ValidateCreate, 422) and the claim controller
// (Ready=False) both apply the rule, and each one's tests iterate these cases, so that a claim
// admission accepts is never rejected by the controller for the same policy, and the reverse.
//
// Imported by _test.go files only.
package policycases

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	"github.com/sandgate-dev/sandgate/api/policy"
	"github.com/sandgate-dev/sandgate/internal/testing/builders"
)

// Namespace, Pool and Template name the objects of every case: the claim is in Namespace on
// warm pool Pool, whose template is Template.
const (
	Namespace = "ns"
	Pool      = "p"
	Template  = "t"
)

// FieldError is one problem the rule reports: its type and the claim's field path.
type FieldError struct {
	Type  field.ErrorType
	Field string
}

// Errors summarizes a field.ErrorList as the cases state it.
func Errors(errs field.ErrorList) []FieldError {
	var out []FieldError
	for _, e := range errs {
		out = append(out, FieldError{Type: e.Type, Field: e.Field})
	}
	return out
}

// Case is a claim, its pool's template and what the rule says of them.
type Case struct {
	Claim    *extv1beta1.SandboxClaim
	Template *extv1beta1.SandboxTemplate
	// WantErrors are the problems, in order; empty when the claim is served.
	WantErrors []FieldError
	// WantReason is the reason of the claim's Ready=False condition when WantErrors is not
	// empty: the reason of the first problem's field.
	WantReason string
	// WantEnv is, when not nil, the env of every container and init container of the
	// resulting blueprint, by container name.
	WantEnv map[string][]corev1.EnvVar
}

// template is a template with a variable set in container main, a sidecar, an init
// container, a volume claim template "data", a pod volume "policy" (a ConfigMap) and pod
// label sandbox.users.io/team=a, under the given policies.
func template(env extv1beta1.EnvVarsInjectionPolicy, vct extv1beta1.VolumeClaimTemplatesPolicy) *extv1beta1.SandboxTemplate {
	t := builders.MakeTemplate(Template, Namespace).Env(builders.DefaultContainer, "SET", "x").
		VolumeClaimTemplate("data", "1Gi").PodLabel("sandbox.users.io/team", "a").
		EnvVarsInjectionPolicy(env).VolumeClaimTemplatesPolicy(vct).Obj()
	t.Spec.PodTemplate.Spec.Containers = append(t.Spec.PodTemplate.Spec.Containers, corev1.Container{Name: "side", Image: "busybox"})
	t.Spec.PodTemplate.Spec.InitContainers = []corev1.Container{{Name: "init", Image: "busybox"}}
	t.Spec.PodTemplate.Spec.Volumes = []corev1.Volume{{Name: "policy", VolumeSource: corev1.VolumeSource{
		ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "platform-policy"}},
	}}}
	return t
}

func claim() *builders.ClaimWrapper { return builders.MakeClaim("c", Namespace, Pool) }

// withVolume is c with a volume claim template name of 1Gi changed by edit.
func withVolume(c *builders.ClaimWrapper, name string, edit func(*corev1.PersistentVolumeClaimSpec)) *builders.ClaimWrapper {
	c.VolumeClaimTemplate(name, "1Gi")
	edit(&c.Spec.VolumeClaimTemplates[len(c.Spec.VolumeClaimTemplates)-1].Spec)
	return c
}

// cloneOf is a PVC data source naming PVC name, with no apiGroup (the core group).
func cloneOf(name string) *corev1.TypedLocalObjectReference {
	return &corev1.TypedLocalObjectReference{Kind: "PersistentVolumeClaim", Name: name}
}

// Cases returns the table, new objects on every call: callers may change them.
func Cases() map[string]Case {
	set := corev1.EnvVar{Name: "SET", Value: "x"}
	a1 := corev1.EnvVar{Name: "A", Value: "1"}
	envRejected := extv1beta1.ReasonEnvVarsInjectionRejected
	vctRejected := extv1beta1.ReasonVolumeClaimTemplatesError
	return map[string]Case{
		"nothing injected": {Claim: claim().Obj(), Template: template("", ""),
			WantEnv: map[string][]corev1.EnvVar{"main": {set}, "side": nil, "init": nil}},
		"env disallowed by default": {Claim: claim().Env("A", "1", "").Obj(), Template: template("", ""),
			WantErrors: []FieldError{{field.ErrorTypeForbidden, "spec.env"}}, WantReason: envRejected},
		"env disallowed": {Claim: claim().Env("A", "1", "").Obj(), Template: template(extv1beta1.EnvVarsInjectionDisallowed, ""),
			WantErrors: []FieldError{{field.ErrorTypeForbidden, "spec.env"}}, WantReason: envRejected},
		"env without a container goes into every container, not the init containers": {
			Claim: claim().Env("A", "1", "").Obj(), Template: template(extv1beta1.EnvVarsInjectionAllowed, ""),
			WantEnv: map[string][]corev1.EnvVar{"main": {set, a1}, "side": {a1}, "init": nil}},
		"env for a named container or init container": {
			Claim: claim().Env("A", "1", "side").Env("B", "2", "init").Obj(), Template: template(extv1beta1.EnvVarsInjectionAllowed, ""),
			WantEnv: map[string][]corev1.EnvVar{"main": {set}, "side": {a1}, "init": {{Name: "B", Value: "2"}}}},
		"env for a container the template lacks": {Claim: claim().Env("A", "1", "sidecar").Obj(),
			Template:   template(extv1beta1.EnvVarsInjectionOverrides, ""),
			WantErrors: []FieldError{{field.ErrorTypeNotFound, "spec.env[0].containerName"}}, WantReason: envRejected},
		"override needs Overrides": {Claim: claim().Env("SET", "1", "").Obj(), Template: template(extv1beta1.EnvVarsInjectionAllowed, ""),
			WantErrors: []FieldError{{field.ErrorTypeForbidden, "spec.env[0].name"}}, WantReason: envRejected},
		"override allowed": {Claim: claim().Env("SET", "1", "main").Obj(), Template: template(extv1beta1.EnvVarsInjectionOverrides, ""),
			WantEnv: map[string][]corev1.EnvVar{"main": {{Name: "SET", Value: "1"}}, "side": nil, "init": nil}},
		"a variable of another container is an addition": {Claim: claim().Env("SET", "1", "init").Obj(),
			Template: template(extv1beta1.EnvVarsInjectionAllowed, ""),
			WantEnv:  map[string][]corev1.EnvVar{"main": {set}, "side": nil, "init": {{Name: "SET", Value: "1"}}}},
		"Allowed does not inject where envFrom could be overridden unseen": {
			Claim: claim().Env("A", "1", "main").Obj(),
			Template: func() *extv1beta1.SandboxTemplate {
				t := template(extv1beta1.EnvVarsInjectionAllowed, "")
				t.Spec.PodTemplate.Spec.Containers[0].EnvFrom = []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{
					LocalObjectReference: corev1.LocalObjectReference{Name: "settings"},
				}}}
				return t
			}(),
			WantErrors: []FieldError{{field.ErrorTypeForbidden, "spec.env[0].name"}}, WantReason: envRejected},
		"volume claim templates disallowed by default": {Claim: claim().VolumeClaimTemplate("scratch", "1Gi").Obj(),
			Template:   template("", ""),
			WantErrors: []FieldError{{field.ErrorTypeForbidden, "spec.volumeClaimTemplates"}}, WantReason: vctRejected},
		"volume claim template added": {Claim: claim().VolumeClaimTemplate("scratch", "1Gi").Obj(),
			Template: template("", extv1beta1.VolumeClaimTemplatesAllowed)},
		"volume claim template replaced needs Overrides": {Claim: claim().VolumeClaimTemplate("data", "5Gi").Obj(),
			Template:   template("", extv1beta1.VolumeClaimTemplatesAllowed),
			WantErrors: []FieldError{{field.ErrorTypeForbidden, "spec.volumeClaimTemplates[0].metadata.name"}}, WantReason: vctRejected},
		"volume claim template replaced": {Claim: claim().VolumeClaimTemplate("data", "5Gi").Obj(),
			Template: template("", extv1beta1.VolumeClaimTemplatesOverrides)},
		"a claim's volume may not clone a data source": {
			Claim: withVolume(claim(), "scratch", func(s *corev1.PersistentVolumeClaimSpec) {
				s.DataSource = cloneOf("someone-elses")
			}).Obj(),
			Template:   template("", extv1beta1.VolumeClaimTemplatesAllowed),
			WantErrors: []FieldError{{field.ErrorTypeForbidden, "spec.volumeClaimTemplates[0].spec.dataSource"}}, WantReason: vctRejected},
		"a claim's volume may not name a populator, a PersistentVolume or a PV selector": {
			Claim: withVolume(claim(), "scratch", func(s *corev1.PersistentVolumeClaimSpec) {
				s.DataSourceRef = &corev1.TypedObjectReference{APIGroup: ptr.To("snapshot.storage.k8s.io"), Kind: "VolumeSnapshot", Name: "snap"}
				s.VolumeName = "pv-1"
				s.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"owner": "someone-else"}}
			}).Obj(),
			Template: template("", extv1beta1.VolumeClaimTemplatesOverrides),
			WantErrors: []FieldError{
				{field.ErrorTypeForbidden, "spec.volumeClaimTemplates[0].spec.dataSourceRef"},
				{field.ErrorTypeForbidden, "spec.volumeClaimTemplates[0].spec.volumeName"},
				{field.ErrorTypeForbidden, "spec.volumeClaimTemplates[0].spec.selector"},
			},
			WantReason: vctRejected},
		"a claim's volume may not steer its provisioning": {
			Claim: func() *extv1beta1.SandboxClaim {
				c := claim().VolumeClaimTemplate("scratch", "1Gi").Obj()
				c.Spec.VolumeClaimTemplates[0].Annotations = map[string]string{"volume.kubernetes.io/selected-node": "node-1", "note": "n"}
				return c
			}(),
			Template:   template("", extv1beta1.VolumeClaimTemplatesAllowed),
			WantErrors: []FieldError{{field.ErrorTypeForbidden, "spec.volumeClaimTemplates[0].metadata.annotations[volume.kubernetes.io/selected-node]"}}, WantReason: vctRejected},
		"a replacement under Overrides may not clone a data source either": {
			Claim: withVolume(claim(), "data", func(s *corev1.PersistentVolumeClaimSpec) {
				s.DataSource = cloneOf("someone-elses")
			}).Obj(),
			Template:   template("", extv1beta1.VolumeClaimTemplatesOverrides),
			WantErrors: []FieldError{{field.ErrorTypeForbidden, "spec.volumeClaimTemplates[0].spec.dataSource"}}, WantReason: vctRejected},
		"a claim's volume may not replace a volume of the template's pod, even under Overrides": {
			Claim:      claim().VolumeClaimTemplate("scratch", "1Gi").VolumeClaimTemplate("policy", "1Gi").Obj(),
			Template:   template("", extv1beta1.VolumeClaimTemplatesOverrides),
			WantErrors: []FieldError{{field.ErrorTypeForbidden, "spec.volumeClaimTemplates[1].metadata.name"}}, WantReason: vctRejected},
		"the claim's volume claim templates and the template's together within the limit": {
			Claim: func() *extv1beta1.SandboxClaim {
				c := claim()
				for i := range policy.MaxVolumeClaimTemplates {
					c.VolumeClaimTemplate(fmt.Sprintf("v%d", i), "1Gi")
				}
				return c.Obj()
			}(),
			Template:   template("", extv1beta1.VolumeClaimTemplatesAllowed),
			WantErrors: []FieldError{{field.ErrorTypeTooMany, "spec.volumeClaimTemplates"}}, WantReason: vctRejected},
		"a Sandbox too large to store: the claim's env goes into every container": {
			Claim:      claim().Env("BIG", strings.Repeat("x", policy.MaxClaimSandboxBytes/2+1), "").Obj(),
			Template:   template(extv1beta1.EnvVarsInjectionAllowed, ""),
			WantErrors: []FieldError{{field.ErrorTypeTooLong, "spec.env"}}, WantReason: envRejected},
		"pod annotations beyond the API server's total with the template's": {
			Claim: claim().PodAnnotation("sandbox.users.io/note", strings.Repeat("c", apivalidation.TotalAnnotationSizeLimitB/2)).Obj(),
			Template: func() *extv1beta1.SandboxTemplate {
				t := template("", "")
				t.Spec.PodTemplate.ObjectMeta.Annotations = map[string]string{"platform.example.com/note": strings.Repeat("t", apivalidation.TotalAnnotationSizeLimitB/2)}
				return t
			}(),
			WantErrors: []FieldError{{field.ErrorTypeTooLong, "spec.additionalPodMetadata.annotations"}},
			WantReason: extv1beta1.ReasonInvalidMetadata},
		"pod metadata added": {Claim: claim().PodLabel("sandbox.users.io/user", "u1").PodLabel("sandbox.users.io/team", "a").PodAnnotation("sandbox.users.io/note", "n").Obj(),
			Template: template("", "")},
		"pod metadata may not change the template's": {Claim: claim().PodLabel("sandbox.users.io/team", "b").Obj(), Template: template("", ""),
			WantErrors: []FieldError{{field.ErrorTypeInvalid, "spec.additionalPodMetadata.labels[sandbox.users.io/team]"}},
			WantReason: extv1beta1.ReasonInvalidMetadata},
		"every problem is reported; the reason is the first one's": {
			Claim:    claim().Env("A", "1", "").VolumeClaimTemplate("scratch", "1Gi").PodLabel("sandbox.users.io/team", "b").Obj(),
			Template: template("", ""),
			WantErrors: []FieldError{
				{field.ErrorTypeForbidden, "spec.env"},
				{field.ErrorTypeForbidden, "spec.volumeClaimTemplates"},
				{field.ErrorTypeInvalid, "spec.additionalPodMetadata.labels[sandbox.users.io/team]"},
			},
			WantReason: envRejected},
	}
}
