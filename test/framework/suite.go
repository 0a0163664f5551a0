package framework

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sandgate-dev/sandgate/cmd/controlplane"
)

// StartTimeout bounds how long a suite waits for its cluster to start.
const StartTimeout = 3 * time.Minute

// RunSuite is the body of an integration suite's TestMain: it starts a cluster as opts say,
// hands it to use (which stores it for the tests), runs the tests, stops the cluster and
// returns the exit code for os.Exit. Progress goes to stderr unless opts.Log is set.
//
//	func TestMain(m *testing.M) {
//		os.Exit(framework.RunSuite(m, controlplane.Options{Profile: controlplane.ProfileKubelet}, func(c *framework.Cluster) { cluster = c }))
//	}
func RunSuite(m *testing.M, opts controlplane.Options, use func(*Cluster)) int {
	if opts.Log == nil {
		opts.Log = os.Stderr
	}
	ctx, cancel := context.WithTimeout(context.Background(), StartTimeout)
	c, err := controlplane.Start(ctx, opts)
	cancel()
	if err != nil {
		fmt.Fprintf(os.Stderr, "starting the test cluster: %v\n", err)
		return 1
	}
	use(&Cluster{Cluster: c})
	code := m.Run()
	if err := c.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "stopping the test cluster: %v\n", err)
		code = 1
	}
	return code
}

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
