//go:build integration

package sdk

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
)

// kwok's pod IP pool once gave three live pods one IP: the stand-in answers for every pod on
// the IP, by the name the router sends, and a request for a pod on another IP still reaches
// the IP's own pod (a misrouted request fails its test). When the IP's first pod goes, the
// others are served on their own.
func TestRuntimeAnswersEveryPodSharingAnIP(t *testing.T) {
	const ip = "127.16.250.1"
	pod := func(name string) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(name + "-uid"), Labels: map[string]string{labelSandboxNameHash: "x"}},
			Status:     corev1.PodStatus{PodIP: ip, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}},
		}
	}
	a, b := pod("a"), pod("b")
	cs := fake.NewClientset(a, b)
	port, err := freePort(ip)
	if err != nil {
		t.Fatalf("listening on %s (every 127/8 address is local): %v", ip, err)
	}
	r := &Runtime{Port: port, cs: cs, servers: map[string]*podServer{}, byIP: map[string]*podServer{}, routes: map[string][]string{}}
	defer func() {
		for _, s := range []*corev1.Pod{a, b} {
			r.stop(string(s.UID))
		}
	}()
	r.sync(a)
	r.sync(b)
	for id, want := range map[string]string{"a": "a", "b": "b", "elsewhere": "a"} {
		if got := executeOn(t, ip, port, id); got != want {
			t.Errorf("a request for %s reached pod %s, want %s", id, got, want)
		}
	}
	r.stop(string(a.UID))
	if got := executeOn(t, ip, port, "b"); got != "b" {
		t.Errorf("after the IP's first pod went, a request for b reached %q, want b", got)
	}
}

// executeOn posts an execute call to ip:port as the router would for sandbox id and returns
// the pod that answered.
func executeOn(t *testing.T, ip string, port int, id string) string {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, fmt.Sprintf("http://%s:%d/execute", ip, port), strings.NewReader(`{"command":"hostname"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Sandbox-Id", id)
	req.Close = true // a fresh connection each: the listener changes hands
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("execute for %s: %v", id, err)
	}
	defer func() { _ = resp.Body.Close() }()
	var out struct {
		Stdout string `json:"stdout"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatalf("execute for %s: HTTP %s: %v", id, resp.Status, err)
	}
	var reply Reply
	if err := json.Unmarshal([]byte(out.Stdout), &reply); err != nil {
		t.Fatalf("execute for %s: %q: %v", id, out.Stdout, err)
	}
	return reply.Pod
}

// freePort is a port free on ip.
func freePort(ip string) (int, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		return 0, err
	}
	defer func() { _ = ln.Close() }()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
