//go:build integration

package controlplane_test

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/sandgate-dev/sandgate/test/env/controlplane"
)

// writesPolicy logs every write at Metadata level, once (when the response is sent).
const writesPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
  verbs: ["create", "update", "patch", "delete", "deletecollection"]
- level: None
`

func TestAPIServerRestartsKeepStateClientsAndAuditLog(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c, err := controlplane.Start(ctx, controlplane.Options{
		Nodes: 1, NoControllerManager: true, AuditPolicy: writesPolicy, Log: os.Stderr,
	})
	g.Expect(err).NotTo(HaveOccurred())
	defer func() {
		if err := c.Stop(); err != nil {
			t.Errorf("stopping the cluster: %v", err)
		}
	}()
	g.Expect(c.AuditLogPath()).To(Equal(filepath.Join(c.Dir, "logs", "audit.log")))

	// One client for the whole test: it must outlive both restarts.
	cs := clientset(t, c)
	ns := namespace(t, cs, "restart")
	createConfigMap(ctx, g, cs, ns, "before")
	apiServerPID := pidOf(t, "kube-apiserver", filepath.Join(c.Dir, "apiserver"))

	for _, restart := range []struct {
		name string
		do   func(context.Context) (time.Time, time.Time, error)
	}{
		{"after-sigterm", c.RestartAPIServer},
		{"after-sigkill", c.KillAPIServer},
	} {
		begin := time.Now()
		stopped, ready, err := restart.do(ctx)
		g.Expect(err).NotTo(HaveOccurred(), restart.name)
		t.Logf("%s: old process gone after %s, /readyz 200 %s later",
			restart.name, stopped.Sub(begin).Round(time.Millisecond), ready.Sub(stopped).Round(time.Millisecond))
		g.Expect(stopped).To(BeTemporally(">", begin))
		g.Expect(ready).To(BeTemporally(">", stopped))
		g.Expect(c.Err()).To(Succeed(), "an intentional restart is no failure")
		newPID := pidOf(t, "kube-apiserver", filepath.Join(c.Dir, "apiserver"))
		g.Expect(newPID).NotTo(Equal(apiServerPID), "a new process serves")
		apiServerPID = newPID

		// The object survived in etcd and the old client reaches it on the same address.
		g.Eventually(func(g Gomega) {
			_, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "before", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
		}).WithTimeout(eventually).WithPolling(poll).Should(Succeed())
		createConfigMap(ctx, g, cs, ns, restart.name)

		// kube-scheduler and kwok reconnected by themselves: a new pod is placed and Ready.
		podNS := namespace(t, cs, "restart-"+restart.name)
		run := runPodToReady(t, g, cs, podNS)
		expectRunningAndReady(g, run.ready)
	}

	created := auditedCreates(t, c.AuditLogPath(), ns)
	g.Expect(created).To(ConsistOf("before", "after-sigterm", "after-sigkill"),
		"the audit log holds the writes from before and after both restarts")

	// A crash nobody asked for is reported.
	g.Expect(syscall.Kill(apiServerPID, syscall.SIGKILL)).To(Succeed())
	g.Eventually(c.Err).WithTimeout(eventually).WithPolling(poll).Should(MatchError(ContainSubstring("kube-apiserver")))
}

// createConfigMap creates ConfigMap name in ns, retrying while the API server comes back.
func createConfigMap(ctx context.Context, g Gomega, cs kubernetes.Interface, ns, name string) {
	g.Eventually(func(g Gomega) {
		_, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: name},
		}, metav1.CreateOptions{})
		g.Expect(err).NotTo(HaveOccurred())
	}).WithTimeout(eventually).WithPolling(poll).Should(Succeed())
}

// auditedCreates returns the names of the ConfigMaps in ns whose creation the audit log at
// path records as succeeded.
func auditedCreates(t *testing.T, path, ns string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var names []string
	events := 0
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var ev auditv1.Event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("audit log line %d is not a JSON event: %v\n%s", events+1, err, sc.Text())
		}
		events++
		ref := ev.ObjectRef
		if ev.Verb == "create" && ref != nil && ref.Resource == "configmaps" && ref.Namespace == ns &&
			ev.Stage == auditv1.StageResponseComplete && ev.ResponseStatus != nil && ev.ResponseStatus.Code == 201 {
			names = append(names, ref.Name)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	t.Logf("audit log: %d events, ConfigMaps created in %s: %v", events, ns, names)
	return names
}

// pidOf returns the pid of the one process of binary name whose command line mentions dir.
func pidOf(t *testing.T, name, dir string) int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(string(cmdline), "\x00")
		mentions := strings.Contains(string(cmdline), dir+"\x00") || strings.Contains(string(cmdline), dir+"/")
		if filepath.Base(args[0]) == name && mentions {
			pids = append(pids, pid)
		}
	}
	if len(pids) != 1 {
		t.Fatalf("want one %s process of %s, found %v", name, dir, pids)
	}
	return pids[0]
}
