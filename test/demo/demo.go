package demo

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	"github.com/sandgate-dev/sandgate/api/policy"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
	"github.com/sandgate-dev/sandgate/test/env/harness"
)

// Bounds of the demo's waits; generous, the machines are shared.
const (
	poolWait  = 3 * time.Minute
	claimWait = time.Minute
	namespace = "default"
)

// demo holds the objects of config/samples and a client.
type demo struct {
	c        client.WithWatch
	say      func(string, ...any)
	template *extv1beta1.SandboxTemplate
	pool     *extv1beta1.SandboxWarmPool
	claim    *extv1beta1.SandboxClaim
}

// readSample decodes config/samples/<file> strictly into obj.
func readSample(root, file string, obj any) error {
	path := filepath.Join(root, "config", "samples", file)
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("reading sample: %w", err)
	}
	if err := yaml.UnmarshalStrict(data, obj); err != nil {
		return fmt.Errorf("decoding sample %s: %w", path, err)
	}
	return nil
}

func newDemo(env *harness.Env, root string, say func(string, ...any)) (*demo, error) {
	c, err := newClient(env.Config)
	if err != nil {
		return nil, err
	}
	d := &demo{c: c, say: say, template: &extv1beta1.SandboxTemplate{}, pool: &extv1beta1.SandboxWarmPool{}, claim: &extv1beta1.SandboxClaim{}}
	for file, obj := range map[string]any{
		"extensions_v1beta1_sandboxtemplate.yaml": d.template,
		"extensions_v1beta1_sandboxwarmpool.yaml": d.pool,
		"extensions_v1beta1_sandboxclaim.yaml":    d.claim,
	} {
		if err := readSample(root, file, obj); err != nil {
			return nil, err
		}
	}
	d.template.Namespace, d.pool.Namespace, d.claim.Namespace = namespace, namespace, namespace
	return d, nil
}

// row is one line of the claims table.
type row struct {
	claim, sandbox, launch, stamp, built string
	latency                              time.Duration
}

func (d *demo) run(ctx context.Context, w io.Writer, claims int) error {
	if err := d.c.Create(ctx, d.template); err != nil {
		return fmt.Errorf("creating template %s: %w", d.template.Name, err)
	}
	if err := d.c.Create(ctx, d.pool); err != nil {
		return fmt.Errorf("creating pool %s: %w", d.pool.Name, err)
	}
	replicas := int32(1)
	if d.pool.Spec.Replicas != nil {
		replicas = *d.pool.Spec.Replicas
	}
	d.say("applied config/samples: SandboxTemplate %s, SandboxWarmPool %s (%d replicas) in namespace %s",
		d.template.Name, d.pool.Name, replicas, namespace)
	if err := d.waitForPool(ctx, replicas); err != nil {
		return err
	}

	var rows []row
	for i := range claims {
		r, err := d.claimOne(ctx, fmt.Sprintf("%s-%d", d.claim.Name, i+1))
		if err != nil {
			return err
		}
		rows = append(rows, r)
	}
	oldHash := policy.TemplateHash(d.template)
	newHash, err := d.updateTemplate(ctx)
	if err != nil {
		return err
	}
	after, err := d.claimOne(ctx, d.claim.Name+"-after-update")
	if err != nil {
		return err
	}
	rows = append(rows, after)

	// The table goes out in one write, once every claim is in.
	var out bytes.Buffer
	_, _ = fmt.Fprintf(&out, "\nClaims of pool %s (latency: create call → watch shows Ready=True):\n\n", d.pool.Name)
	tw := tabwriter.NewWriter(&out, 0, 4, 2, ' ', 0)
	_, _ = fmt.Fprintf(tw, "CLAIM\tSANDBOX\tLAUNCH\tCLAIM STAMP\tSANDBOX BUILT FROM\tCREATED → READY\n")
	for _, r := range rows {
		_, _ = fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.claim, r.sandbox, r.launch, r.stamp, r.built, r.latency.Round(100*time.Microsecond))
	}
	_ = tw.Flush() // into a Buffer, which does not fail
	_, _ = fmt.Fprintf(&out, "\nStale-template check: template %s was updated (container env AGENT_MODE changed),\n", d.template.Name)
	_, _ = fmt.Fprintf(&out, "its hash went %s → %s. Claim %s carries the stamp %s\n", oldHash, newHash, after.claim, after.stamp)
	_, _ = fmt.Fprintf(&out, "and bound to %s, built from %s (%s launch):", after.sandbox, after.built, after.launch)
	fresh := after.built == newHash && after.stamp == newHash
	if fresh {
		_, _ = fmt.Fprintf(&out, " the new version, as it must be.\n")
	} else {
		_, _ = fmt.Fprintf(&out, " NOT the new version.\n")
	}
	if _, err := w.Write(out.Bytes()); err != nil {
		return fmt.Errorf("printing the table: %w", err)
	}
	if !fresh {
		return fmt.Errorf("claim %s got a Sandbox of template version %s, want %s", after.claim, after.built, newHash)
	}
	return nil
}

// waitForPool waits until the pool reports every replica Ready, printing each change.
func (d *demo) waitForPool(ctx context.Context, replicas int32) error {
	ctx, cancel := context.WithTimeout(ctx, poolWait)
	defer cancel()
	last := int32(-1)
	for {
		var pool extv1beta1.SandboxWarmPool
		if err := d.c.Get(ctx, client.ObjectKeyFromObject(d.pool), &pool); err == nil {
			if pool.Status.ReadyReplicas != last {
				last = pool.Status.ReadyReplicas
				d.say("warm pool %s: %d/%d sandboxes ready", d.pool.Name, last, replicas)
			}
			if pool.Status.ReadyReplicas >= replicas && pool.Status.Replicas == replicas {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("warm pool %s not Ready within %s (%d/%d ready): is the operator running its extensions controllers?",
				d.pool.Name, poolWait, max(last, 0), replicas)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// claimOne creates a claim like the sample one and waits for it to be Ready.
func (d *demo) claimOne(ctx context.Context, name string) (row, error) {
	claim := &extv1beta1.SandboxClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: d.claim.Labels, Annotations: d.claim.Annotations},
		Spec:       *d.claim.Spec.DeepCopy(),
	}
	ready, err := createAndWait(ctx, d.c, claim)
	if err != nil {
		return row{}, err
	}
	r := row{claim: name, sandbox: ready.sandbox, stamp: orNone(ready.stamp), latency: ready.latency, launch: "?", built: "?"}
	var sb agentsv1beta1.Sandbox
	if err := d.c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: ready.sandbox}, &sb); err == nil {
		r.launch = orNone(sb.Labels[agentsv1beta1.LabelLaunchType])
		r.built = orNone(sb.Labels[agentsv1beta1.LabelSandboxTemplateHash])
	}
	d.say("claim %s Ready after %s: sandbox %s (%s)", name, r.latency.Round(100*time.Microsecond), r.sandbox, r.launch)
	return r, nil
}

// updateTemplate changes the template's blueprint (the value of the AGENT_MODE variable, or
// a new variable) and returns the new hash.
func (d *demo) updateTemplate(ctx context.Context) (string, error) {
	before := d.template.DeepCopy()
	containers := d.template.Spec.PodTemplate.Spec.Containers
	set := false
	for i := range containers[0].Env {
		if containers[0].Env[i].Name == "AGENT_MODE" {
			containers[0].Env[i].Value += "-v2"
			set = true
		}
	}
	if !set {
		containers[0].Env = append(containers[0].Env, envVar("AGENT_MODE", "v2"))
	}
	if err := d.c.Patch(ctx, d.template, client.MergeFrom(before)); err != nil {
		return "", fmt.Errorf("updating template %s: %w", d.template.Name, err)
	}
	hash := policy.TemplateHash(d.template)
	d.say("updated template %s: AGENT_MODE=%s, template hash %s → %s", d.template.Name,
		envValue(containers[0].Env, "AGENT_MODE"), policy.TemplateHash(before), hash)
	return hash, nil
}

func orNone(s string) string {
	if strings.TrimSpace(s) == "" {
		return "(none)"
	}
	return s
}

func envVar(name, value string) corev1.EnvVar { return corev1.EnvVar{Name: name, Value: value} }

func envValue(env []corev1.EnvVar, name string) string {
	for _, e := range env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}
