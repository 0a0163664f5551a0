package framework

import (
	"context"
	"regexp"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// NamespaceName is a namespace name for a test: its name made a valid DNS label, with a random
// suffix, so that `go test -count=N` never meets the namespace of the previous run still
// terminating.
func NamespaceName(t testing.TB) string {
	name := strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))
	name = strings.Trim(invalidLabelChars.ReplaceAllString(name, "-"), "-")
	if len(name) > 50 {
		name = strings.TrimRight(name[:50], "-")
	}
	return name + "-" + utilrand.String(4)
}

var invalidLabelChars = regexp.MustCompile(`[^a-z0-9-]+`)

// CreateNamespace creates the namespace name with c and deletes it when the test ends.
func CreateNamespace(t testing.TB, c client.Client, name string) {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := c.Create(context.Background(), ns); err != nil {
		t.Fatalf("creating namespace %s: %v", name, err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), ns) })
}

// EventReasons lists the reasons of the events (events.k8s.io) in namespace ns about the
// object of the given kind and name, in the order the API server lists them.
func EventReasons(ctx context.Context, c client.Reader, ns, kind, name string) ([]string, error) {
	var list eventsv1.EventList
	if err := c.List(ctx, &list, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	var reasons []string
	for _, ev := range list.Items {
		if ev.Regarding.Kind == kind && ev.Regarding.Name == name {
			reasons = append(reasons, ev.Reason)
		}
	}
	return reasons, nil
}
