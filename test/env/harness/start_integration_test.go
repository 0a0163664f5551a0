//go:build integration

package harness

import (
	"bufio"
	"context"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sandgate-dev/sandgate/test/env/controlplane"
)

// TestStartRebuildsCRDStorageBeforeTheOperatorWatches starts the harness as `make demo` and
// `make bench` do and reads in kube-apiserver's log when each sandgate CRD's storage was torn
// down: every CRD with a conversion webhook had its storage rebuilt (the harness changed its
// caBundle), and all of that before the operator started, so that no informer of the
// operator was cut and had to re-list while the first claims came (issue 24).
func TestStartRebuildsCRDStorageBeforeTheOperatorWatches(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	log := io.Discard
	if testing.Verbose() {
		log = os.Stderr
	}
	env, err := Start(ctx, Options{Nodes: 1, Profile: controlplane.ProfileFast, Log: log})
	if err != nil {
		t.Fatalf("starting the harness: %v", err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("stopping the harness: %v", err)
		}
	})
	if !env.Webhooks || env.Operator == nil {
		t.Fatalf("harness without webhooks (%v) or operator (%v)", env.Webhooks, env.Operator)
	}

	cs, err := apiextensionsclient.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	crds, err := cs.ApiextensionsV1().CustomResourceDefinitions().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var converted []string // as the API server names them: <plural>.<group>
	for _, crd := range crds.Items {
		if conv := crd.Spec.Conversion; conv != nil && conv.Webhook != nil {
			converted = append(converted, crd.Spec.Names.Plural+"."+crd.Spec.Group)
		}
	}
	if len(converted) == 0 {
		t.Fatal("no CRD with a conversion webhook: nothing to check")
	}

	teardowns := cacherTeardowns(t, env.Cluster.LogPath("kube-apiserver"), env.operatorStarted.Year())
	for _, resource := range converted {
		at := teardowns[resource]
		if len(at) == 0 {
			t.Errorf("%s: no storage teardown logged by the time Start returned: its caBundle change is still to cut the watches of whoever watches it", resource)
		}
		for _, ts := range at {
			if !ts.Before(env.operatorStarted) {
				t.Errorf("%s: watchers terminated at %s, after the operator started at %s",
					resource, ts.Format(time.StampMicro), env.operatorStarted.Format(time.StampMicro))
			}
		}
	}
}

// cacherTeardowns returns, by resource, when kube-apiserver's log at path says it terminated
// all watchers of the resource's watch cache. klog's header has no year: year supplies it.
func cacherTeardowns(t *testing.T, path string, year int) map[string][]time.Time {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	const marker = "Terminating all watchers from cacher "
	out := map[string][]time.Time{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for sc.Scan() {
		line := sc.Text()
		_, resource, ok := strings.Cut(line, marker)
		if !ok || len(line) < len("W1126 06:30:00.123456") {
			continue
		}
		// klog: Lmmdd hh:mm:ss.uuuuuu, local time.
		ts, err := time.ParseInLocation("0102 15:04:05.000000", line[1:len("W1126 06:30:00.123456")], time.Local)
		if err != nil {
			t.Fatalf("reading the time of %q: %v", line, err)
		}
		ts = ts.AddDate(year, 0, 0)
		resource = strings.TrimSpace(resource)
		out[resource] = append(out[resource], ts)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
