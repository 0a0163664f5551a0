// Package helmchart renders sandgate's Helm chart (config/helm/sandgate) with Helm's own Go
// library and config/default with kustomize's, and installs the chart with Helm's install
// action, for the tests that keep the two installs the same and prove the chart installs.
//
// It is a module of its own (test/helm/go.mod): Helm and kustomize are heavy dependencies
// that the operator's module must not carry. `go test ./...` in this directory runs the
// render tests; `go test -tags integration ./...` adds the install test, which needs the
// local control plane `make tools` builds.
package helmchart

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/loader"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// ChartPath is the chart's directory relative to the repository root.
const ChartPath = "config/helm/sandgate"

// ReleaseName is the release name the tests render and install the chart under: any name
// gives the same objects (the chart names them from fullnameOverride, not the release).
const ReleaseName = "sandgate"

// helmLabels are the labels the chart adds to every object's metadata for Helm's sake; they
// carry no meaning for the operator, and config/default does not have them.
var helmLabels = []string{
	"helm.sh/chart",
	"app.kubernetes.io/managed-by",
	"app.kubernetes.io/instance",
	"app.kubernetes.io/version",
}

// helmAnnotations are the annotations the chart may add for Helm's sake:
// helm.sh/resource-policy keeps the CRDs (and with them every Sandbox) on `helm uninstall`.
var helmAnnotations = []string{"helm.sh/resource-policy"}

// RepoRoot finds the repository root: the nearest directory above the working directory
// holding config/default.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("getting the working directory: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "config", "default", "kustomization.yaml")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no config/default/kustomization.yaml above the working directory")
		}
		dir = parent
	}
}

// LoadChart loads the chart from the repository at root.
func LoadChart(root string) (*chartv2.Chart, error) {
	return load(filepath.Join(root, ChartPath))
}

// load loads a chart directory or archive.
func load(path string) (*chartv2.Chart, error) {
	c, err := loader.Load(path)
	if err != nil {
		return nil, fmt.Errorf("loading the chart: %w", err)
	}
	ch, ok := c.(*chartv2.Chart)
	if !ok {
		return nil, fmt.Errorf("loading the chart: a %T, want a v2 chart", c)
	}
	return ch, nil
}

// RenderChart renders the chart as `helm template` does (client only, no cluster), with
// values over the chart's defaults, and returns its objects.
func RenderChart(root string, values map[string]any) ([]*unstructured.Unstructured, error) {
	return RenderChartAt(filepath.Join(root, ChartPath), values)
}

// RenderChartAt renders the chart directory or archive at path as RenderChart does.
func RenderChartAt(path string, values map[string]any) ([]*unstructured.Unstructured, error) {
	objs, _, err := RenderChartWithNotes(path, values)
	return objs, err
}

// RenderChartWithNotes renders the chart directory or archive at path as RenderChart does and
// also returns its rendered NOTES.txt, what `helm install` prints.
func RenderChartWithNotes(path string, values map[string]any) ([]*unstructured.Unstructured, string, error) {
	ch, err := load(path)
	if err != nil {
		return nil, "", err
	}
	cfg := action.NewConfiguration()
	install := action.NewInstall(cfg)
	install.DryRunStrategy = action.DryRunClient
	install.ReleaseName = ReleaseName
	install.Namespace = "default"
	install.Replace = true // no release store to check the name against
	rel, err := install.Run(ch, values)
	if err != nil {
		return nil, "", fmt.Errorf("rendering the chart: %w", err)
	}
	r, err := asRelease(rel)
	if err != nil {
		return nil, "", fmt.Errorf("rendering the chart: %w", err)
	}
	if len(r.Hooks) > 0 {
		return nil, "", fmt.Errorf("rendering the chart: %d hooks, want none (config/default has no equivalent)", len(r.Hooks))
	}
	objs, err := Decode([]byte(r.Manifest))
	if err != nil {
		return nil, "", err
	}
	return objs, r.Info.Notes, nil
}

// Kustomize renders config/<dir> as `kubectl kustomize` does.
func Kustomize(root, dir string) ([]*unstructured.Unstructured, error) {
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	m, err := k.Run(filesys.MakeFsOnDisk(), filepath.Join(root, "config", dir))
	if err != nil {
		return nil, fmt.Errorf("kustomize config/%s: %w", dir, err)
	}
	out, err := m.AsYaml()
	if err != nil {
		return nil, fmt.Errorf("kustomize config/%s: %w", dir, err)
	}
	return Decode(out)
}

// Decode reads every object of a multi-document YAML stream, skipping empty documents.
func Decode(manifest []byte) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(manifest), 4096)
	var objs []*unstructured.Unstructured
	for {
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			if errors.Is(err, io.EOF) {
				return objs, nil
			}
			return nil, fmt.Errorf("decoding the manifest: %w", err)
		}
		if len(bytes.TrimSpace(raw)) == 0 || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
			continue
		}
		// Unstructured's own decoding keeps integers int64, as the API machinery has them.
		o := &unstructured.Unstructured{}
		if err := o.UnmarshalJSON(raw); err != nil {
			return nil, fmt.Errorf("decoding the manifest: %w", err)
		}
		objs = append(objs, o)
	}
}

// Key names an object the way an API server does: group/kind, namespace and name.
func Key(o *unstructured.Unstructured) string {
	gvk := o.GroupVersionKind()
	return fmt.Sprintf("%s/%s %s/%s", gvk.Group, gvk.Kind, o.GetNamespace(), o.GetName())
}

// Normalize returns the objects by Key, without what the chart adds for Helm's sake only (the
// labels in helmLabels and annotations in helmAnnotations, on metadata only: selectors and
// pod templates keep theirs) and without empty label and annotation maps. It fails on two
// objects with the same key.
func Normalize(objs []*unstructured.Unstructured) (map[string]*unstructured.Unstructured, error) {
	out := make(map[string]*unstructured.Unstructured, len(objs))
	for _, o := range objs {
		o = o.DeepCopy()
		labels := o.GetLabels()
		for _, k := range helmLabels {
			delete(labels, k)
		}
		if len(labels) == 0 {
			unstructured.RemoveNestedField(o.Object, "metadata", "labels")
		} else {
			o.SetLabels(labels)
		}
		annotations := o.GetAnnotations()
		for _, k := range helmAnnotations {
			delete(annotations, k)
		}
		if len(annotations) == 0 {
			unstructured.RemoveNestedField(o.Object, "metadata", "annotations")
		} else {
			o.SetAnnotations(annotations)
		}
		k := Key(o)
		if _, dup := out[k]; dup {
			return nil, fmt.Errorf("two objects %s", k)
		}
		out[k] = o
	}
	return out, nil
}

// Keys returns the sorted keys of objs.
func Keys(objs map[string]*unstructured.Unstructured) []string {
	keys := make([]string, 0, len(objs))
	for k := range objs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Find returns the objects of kind (e.g. "Deployment") among objs.
func Find(objs []*unstructured.Unstructured, kind string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == kind {
			out = append(out, o)
		}
	}
	return out
}

// ConvertedCRDs returns the CRDs among objs that convert through the webhook: those of the
// public API's groups (agents.x-k8s.io and extensions.agents.x-k8s.io). sandgate's own groups
// (*.sandgate.dev) have one version each and no conversion webhook.
func ConvertedCRDs(objs []*unstructured.Unstructured) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, crd := range Find(objs, "CustomResourceDefinition") {
		if group, _, _ := unstructured.NestedString(crd.Object, "spec", "group"); strings.HasSuffix(group, "agents.x-k8s.io") {
			out = append(out, crd)
		}
	}
	return out
}

// Kinds lists the kinds of objs, one per object, for messages.
func Kinds(objs []*unstructured.Unstructured) string {
	kinds := make([]string, 0, len(objs))
	for _, o := range objs {
		kinds = append(kinds, o.GetKind())
	}
	return strings.Join(kinds, ",")
}
