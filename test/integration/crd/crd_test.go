//go:build integration

// Package crd_test proves the CRD schemas a user's manifests meet on a real API server:
// defaults, enums, minimums, the immutability rule, the pool's scale subresource, printer
// columns and the samples. No controller runs here: what is asserted is the schema alone.
package crd_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sandgate-dev/sandgate/api"
	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
	"github.com/sandgate-dev/sandgate/internal/testing/builders"
	"github.com/sandgate-dev/sandgate/test/env/controlplane"
	"github.com/sandgate-dev/sandgate/test/framework"
)

var (
	cluster *controlplane.Cluster
	k8s     client.Client
)

func TestMain(m *testing.M) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	c, err := controlplane.Start(ctx, controlplane.Options{NoKwok: true, NoScheduler: true, NoControllerManager: true, Log: os.Stderr})
	cancel()
	if err != nil {
		fmt.Fprintf(os.Stderr, "starting the test cluster: %v\n", err)
		os.Exit(1)
	}
	cluster = c
	scheme := api.NewScheme()
	if err := apiextensionsv1.AddToScheme(scheme); err != nil {
		fmt.Fprintf(os.Stderr, "registering apiextensions: %v\n", err)
		os.Exit(1)
	}
	k8s, err = client.New(c.Config, client.Options{Scheme: scheme})
	code := 1
	if err != nil {
		fmt.Fprintf(os.Stderr, "creating client: %v\n", err)
	} else {
		code = m.Run()
	}
	if err := c.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "stopping the test cluster: %v\n", err)
		code = 1
	}
	os.Exit(code)
}

var ctx = context.Background()

// namespace creates a namespace for one test.
func namespace(t *testing.T) string {
	t.Helper()
	name := framework.NamespaceName(t)
	framework.CreateNamespace(t, k8s, name)
	return name
}

func TestDefaultsAreApplied(t *testing.T) {
	g := NewWithT(t)
	ns := namespace(t)

	sb := builders.MakeSandbox("defaults", ns).Obj()
	g.Expect(k8s.Create(ctx, sb)).To(Succeed())
	g.Expect(sb.Spec.ShutdownPolicy).To(Equal(agentsv1beta1.ShutdownPolicyRetain))
	g.Expect(sb.Spec.OperatingMode).To(Equal(agentsv1beta1.OperatingModeRunning))
	g.Expect(sb.Spec.Service).To(BeNil(), "service stays unset: unset means keep, never create")

	tpl := builders.MakeTemplate("defaults", ns).Obj()
	g.Expect(k8s.Create(ctx, tpl)).To(Succeed())
	g.Expect(tpl.Spec.NetworkPolicyManagement).To(Equal(extv1beta1.NetworkPolicyManaged))
	g.Expect(tpl.Spec.EnvVarsInjectionPolicy).To(Equal(extv1beta1.EnvVarsInjectionDisallowed))
	g.Expect(tpl.Spec.VolumeClaimTemplatesPolicy).To(Equal(extv1beta1.VolumeClaimTemplatesDisallowed))

	// Neither replicas nor updateStrategy given: both come from the schema.
	pool := &extv1beta1.SandboxWarmPool{
		ObjectMeta: metav1.ObjectMeta{Name: "defaults", Namespace: ns},
		Spec:       extv1beta1.SandboxWarmPoolSpec{SandboxTemplateRef: extv1beta1.SandboxTemplateRef{Name: "defaults"}},
	}
	g.Expect(k8s.Create(ctx, pool)).To(Succeed())
	g.Expect(pool.Spec.Replicas).To(HaveValue(Equal(int32(1))))
	g.Expect(pool.Spec.UpdateStrategy.Type).To(Equal(extv1beta1.OnReplenishUpdateStrategy))

	claim := builders.MakeClaim("defaults", ns, "defaults").TTLSecondsAfterFinished(0).Obj()
	g.Expect(k8s.Create(ctx, claim)).To(Succeed())
	g.Expect(claim.Spec.Lifecycle.ShutdownPolicy).To(Equal(extv1beta1.ClaimShutdownPolicyRetain))
}

// expectInvalid asserts a 422 whose causes name field.
func expectInvalid(g Gomega, err error, field string) {
	g.ExpectWithOffset(1, apierrors.IsInvalid(err)).To(BeTrue(), "want 422 Invalid, got %v", err)
	var fields []string
	if status, ok := err.(apierrors.APIStatus); ok && status.Status().Details != nil {
		for _, c := range status.Status().Details.Causes {
			fields = append(fields, c.Field)
		}
	}
	g.ExpectWithOffset(1, fields).To(ContainElement(field), "error: %v", err)
}

func TestEnumsAndMinimumsAreEnforced(t *testing.T) {
	ns := namespace(t)
	cases := map[string]struct {
		obj       client.Object
		wantField string
	}{
		"sandbox shutdownPolicy": {
			builders.MakeSandbox("bad", ns).ShutdownPolicy("Later").Obj(), "spec.shutdownPolicy",
		},
		"sandbox operatingMode": {
			builders.MakeSandbox("bad", ns).OperatingMode("Paused").Obj(), "spec.operatingMode",
		},
		"template networkPolicyManagement": {
			builders.MakeTemplate("bad", ns).NetworkPolicyManagement("Sometimes").Obj(), "spec.networkPolicyManagement",
		},
		"template envVarsInjectionPolicy": {
			builders.MakeTemplate("bad", ns).EnvVarsInjectionPolicy("Always").Obj(), "spec.envVarsInjectionPolicy",
		},
		"template volumeClaimTemplatesPolicy": {
			builders.MakeTemplate("bad", ns).VolumeClaimTemplatesPolicy("Always").Obj(), "spec.volumeClaimTemplatesPolicy",
		},
		"pool negative replicas": {
			builders.MakePool("bad", ns, "t").Replicas(-1).Obj(), "spec.replicas",
		},
		"pool updateStrategy": {
			builders.MakePool("bad", ns, "t").UpdateStrategy("RollingUpdate").Obj(), "spec.updateStrategy.type",
		},
		"pool without template name": {
			builders.MakePool("bad", ns, "").Obj(), "spec.sandboxTemplateRef.name",
		},
		"claim without pool name": {
			builders.MakeClaim("bad", ns, "").Obj(), "spec.warmPoolRef.name",
		},
		"claim negative ttl": {
			builders.MakeClaim("bad", ns, "p").TTLSecondsAfterFinished(-5).Obj(), "spec.lifecycle.ttlSecondsAfterFinished",
		},
		"claim shutdownPolicy": {
			builders.MakeClaim("bad", ns, "p").ShutdownPolicy("Never").Obj(), "spec.lifecycle.shutdownPolicy",
		},
		"claim env without name": {
			builders.MakeClaim("bad", ns, "p").Env("", "v", "").Obj(), "spec.env[0].name",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			expectInvalid(NewWithT(t), k8s.Create(ctx, tc.obj), tc.wantField)
		})
	}
}

func TestVolumeClaimTemplatesAreImmutable(t *testing.T) {
	g := NewWithT(t)
	ns := namespace(t)
	with := builders.MakeSandbox("with", ns).VolumeClaimTemplate("data", "1Gi").Obj()
	without := builders.MakeSandbox("without", ns).Obj()
	g.Expect(k8s.Create(ctx, with)).To(Succeed())
	g.Expect(k8s.Create(ctx, without)).To(Succeed())

	patches := map[string]struct {
		obj   client.Object
		patch string
	}{
		"changed":  {with, `{"spec":{"volumeClaimTemplates":[{"metadata":{"name":"data"},"spec":{"resources":{"requests":{"storage":"2Gi"}}}}]}}`},
		"removed":  {with, `{"spec":{"volumeClaimTemplates":null}}`},
		"added":    {without, `{"spec":{"volumeClaimTemplates":[{"metadata":{"name":"data"},"spec":{}}]}}`},
		"appended": {with, `{"spec":{"volumeClaimTemplates":[{"metadata":{"name":"data"},"spec":{"accessModes":["ReadWriteOnce"],"resources":{"requests":{"storage":"1Gi"}}}},{"metadata":{"name":"more"},"spec":{}}]}}`},
	}
	for name, tc := range patches {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			err := k8s.Patch(ctx, tc.obj.DeepCopyObject().(client.Object), client.RawPatch(types.MergePatchType, []byte(tc.patch)))
			g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want 422, got %v", err)
			g.Expect(err.Error()).To(ContainSubstring("volumeClaimTemplates is immutable"))
		})
	}
	// Other fields of the spec stay mutable.
	g.Expect(k8s.Patch(ctx, with, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"operatingMode":"Suspended"}}`)))).To(Succeed())
	g.Expect(with.Spec.OperatingMode).To(Equal(agentsv1beta1.OperatingModeSuspended))
}

func TestWarmPoolScaleSubresource(t *testing.T) {
	g := NewWithT(t)
	ns := namespace(t)
	pool := builders.MakePool("scaled", ns, "t").Replicas(3).Obj()
	g.Expect(k8s.Create(ctx, pool)).To(Succeed())
	// What a controller would report, so that /scale has a status and a selector to show.
	pool.Status = extv1beta1.SandboxWarmPoolStatus{Replicas: 2, ReadyReplicas: 1, Selector: agentsv1beta1.LabelWarmPoolSandbox + "=abc"}
	g.Expect(k8s.Status().Update(ctx, pool)).To(Succeed())

	scale := &autoscalingv1.Scale{}
	g.Expect(k8s.SubResource("scale").Get(ctx, pool, scale)).To(Succeed())
	g.Expect(scale.Spec.Replicas).To(Equal(int32(3)))
	g.Expect(scale.Status.Replicas).To(Equal(int32(2)))
	g.Expect(scale.Status.Selector).To(Equal(agentsv1beta1.LabelWarmPoolSandbox + "=abc"))

	// kubectl scale sends this patch. The answer is a Scale, decoded over the object passed in.
	g.Expect(k8s.SubResource("scale").Patch(ctx, pool.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(`{"spec":{"replicas":7}}`)))).To(Succeed())
	got := &extv1beta1.SandboxWarmPool{}
	g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(pool), got)).To(Succeed())
	g.Expect(got.Spec.Replicas).To(HaveValue(Equal(int32(7))))

	out, err := cluster.Kubectl("scale", "-n", ns, "swp/scaled", "--replicas=4").CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), "kubectl scale: %s", out)
	g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(pool), got)).To(Succeed())
	g.Expect(got.Spec.Replicas).To(HaveValue(Equal(int32(4))))
}

func TestNamesShortNamesAndPrinterColumns(t *testing.T) {
	type column struct{ Name, JSONPath string }
	want := map[string]struct {
		shortName   string
		subresource []string
		columns     []column
	}{
		"sandboxes.agents.x-k8s.io": {"sandbox", []string{"status"}, []column{
			{"Ready", ".status.conditions[?(@.type=='Ready')].status"},
			{"Reason", ".status.conditions[?(@.type=='Ready')].reason"},
			{"Age", ".metadata.creationTimestamp"},
		}},
		"sandboxtemplates.extensions.agents.x-k8s.io": {"sandboxtemplate", nil, nil},
		"sandboxclaims.extensions.agents.x-k8s.io": {"sandboxclaim", []string{"status"}, []column{
			{"Ready", ".status.conditions[?(@.type=='Ready')].status"},
			{"Sandbox", ".status.sandbox.name"},
			{"Reason", ".status.conditions[?(@.type=='Ready')].reason"},
			{"Age", ".metadata.creationTimestamp"},
		}},
		"sandboxwarmpools.extensions.agents.x-k8s.io": {"swp", []string{"status", "scale"}, []column{
			{"Ready", ".status.readyReplicas"},
			{"Desired", ".spec.replicas"},
			{"Age", ".metadata.creationTimestamp"},
		}},
	}
	for name, w := range want {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			crd := &apiextensionsv1.CustomResourceDefinition{}
			g.Expect(k8s.Get(ctx, client.ObjectKey{Name: name}, crd)).To(Succeed())
			g.Expect(crd.Spec.Scope).To(Equal(apiextensionsv1.NamespaceScoped))
			g.Expect(crd.Spec.Names.ShortNames).To(Equal([]string{w.shortName}))
			g.Expect(crd.Spec.Versions).To(HaveLen(2))
			v := crd.Spec.Versions[1]
			g.Expect(v.Name).To(Equal("v1beta1"))
			g.Expect(v.Storage && v.Served).To(BeTrue())
			alpha := crd.Spec.Versions[0]
			g.Expect(alpha.Name).To(Equal("v1alpha1"))
			g.Expect(alpha.Served && alpha.Deprecated && !alpha.Storage).To(BeTrue(), "v1alpha1 is served, deprecated and not stored")
			g.Expect(ptr.Deref(alpha.DeprecationWarning, "")).To(ContainSubstring("use " + strings.SplitN(name, ".", 2)[1] + "/v1beta1"))
			var got []column
			for _, c := range v.AdditionalPrinterColumns {
				got = append(got, column{c.Name, c.JSONPath})
			}
			g.Expect(got).To(Equal(w.columns))
			var subs []string
			if v.Subresources != nil && v.Subresources.Status != nil {
				subs = append(subs, "status")
			}
			if v.Subresources != nil && v.Subresources.Scale != nil {
				subs = append(subs, "scale")
				g.Expect(*v.Subresources.Scale).To(Equal(apiextensionsv1.CustomResourceSubresourceScale{
					SpecReplicasPath: ".spec.replicas", StatusReplicasPath: ".status.replicas", LabelSelectorPath: ptr.To(".status.selector"),
				}))
			}
			g.Expect(subs).To(Equal(w.subresource))
		})
	}
}

// TestSamplesApply applies config/samples as a user would and reads every object back with
// the printer columns kubectl shows.
func TestSamplesApply(t *testing.T) {
	g := NewWithT(t)
	ns := namespace(t)
	root, err := controlplane.RepoRoot()
	g.Expect(err).NotTo(HaveOccurred())
	out, err := cluster.Kubectl("apply", "-n", ns, "-k", filepath.Join(root, "config", "samples")).CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), "kubectl apply -k config/samples: %s", out)
	g.Expect(string(out)).To(And(
		ContainSubstring("sandbox.agents.x-k8s.io/sandbox-sample created"),
		ContainSubstring("sandboxtemplate.extensions.agents.x-k8s.io/python-agent created"),
		ContainSubstring("sandboxwarmpool.extensions.agents.x-k8s.io/python-agent-pool created"),
		ContainSubstring("sandboxclaim.extensions.agents.x-k8s.io/claim-sample created"),
		ContainSubstring("claimpolicy.policy.sandgate.dev/tenants created"),
		ContainSubstring("warmpoolautoscaler.autoscaling.sandgate.dev/python-agent-pool created"),
	))

	out, err = cluster.Kubectl("get", "-n", ns, "swp", "python-agent-pool").CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), "%s", out)
	g.Expect(strings.Fields(strings.SplitN(string(out), "\n", 2)[0])).To(Equal([]string{"NAME", "READY", "DESIRED", "AGE"}))
	out, err = cluster.Kubectl("get", "-n", ns, "sandboxclaim", "claim-sample").CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), "%s", out)
	g.Expect(strings.Fields(strings.SplitN(string(out), "\n", 2)[0])).To(Equal([]string{"NAME", "READY", "SANDBOX", "REASON", "AGE"}))
	out, err = cluster.Kubectl("get", "-n", ns, "wpa", "python-agent-pool").CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), "%s", out)
	g.Expect(strings.Fields(strings.SplitN(string(out), "\n", 2)[0])).To(Equal([]string{"NAME", "POOL", "MIN", "MAX", "CURRENT", "DESIRED", "CLAIMS/S", "ABLE", "AGE"}))

	tpl := &extv1beta1.SandboxTemplate{}
	g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "python-agent"}, tpl)).To(Succeed())
	g.Expect(tpl.Spec.EnvVarsInjectionPolicy).To(Equal(extv1beta1.EnvVarsInjectionAllowed))
	raw, err := json.Marshal(tpl.Spec.PodTemplate.Spec.Containers)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(raw)).To(ContainSubstring(`"AGENT_MODE"`))
}

// Every CRD converts through the operator's webhook at the local webhook address, trusting the
// local CA: the same path an installed cluster takes through the webhook Service.
func TestCRDsConvertThroughTheLocalWebhook(t *testing.T) {
	o := cluster.Env.WebhookInstallOptions
	want := fmt.Sprintf("https://%s/convert", net.JoinHostPort(o.LocalServingHost, strconv.Itoa(o.LocalServingPort)))
	for _, name := range []string{"sandboxes.agents.x-k8s.io", "sandboxtemplates.extensions.agents.x-k8s.io",
		"sandboxclaims.extensions.agents.x-k8s.io", "sandboxwarmpools.extensions.agents.x-k8s.io"} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			crd := &apiextensionsv1.CustomResourceDefinition{}
			g.Expect(k8s.Get(ctx, client.ObjectKey{Name: name}, crd)).To(Succeed())
			conv := crd.Spec.Conversion
			g.Expect(conv).NotTo(BeNil())
			g.Expect(conv.Strategy).To(Equal(apiextensionsv1.WebhookConverter))
			g.Expect(conv.Webhook.ClientConfig.URL).To(HaveValue(Equal(want)))
			g.Expect(conv.Webhook.ClientConfig.CABundle).To(Equal(o.LocalServingCAData))
		})
	}
}
