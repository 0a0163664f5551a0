package netfault_test

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sandgate-dev/sandgate/test/soak/netfault"
)

// fastChecks make the tests quick; TestLoadBalancerTakesOutAFrozenBackend uses the defaults.
var fastChecks = netfault.LoadBalancerOptions{
	HealthInterval: 20 * time.Millisecond,
	HealthTimeout:  200 * time.Millisecond,
	FailThreshold:  2,
}

// startLB starts a load balancer in front of backends, closes it at the end of the test
// and waits until the backends whose health is OK are up.
func startLB(t *testing.T, opts netfault.LoadBalancerOptions, backends ...*testBackend) *netfault.LoadBalancer {
	t.Helper()
	var bs []netfault.Backend
	for _, b := range backends {
		bs = append(bs, netfault.Backend{Name: b.name, Addr: b.addr(), HealthURL: b.healthURL()})
	}
	lb, err := netfault.NewLoadBalancer("", bs, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(lb.Close)
	for i, b := range backends {
		if b.mode.Load() == healthOK {
			waitFor(t, 10*time.Second, "backend "+b.name+" up", func() bool { return lb.Stats().Backends[i].Healthy })
		}
	}
	return lb
}

// greetings opens n connections one after the other and counts the backends that greet them.
func greetings(t *testing.T, lb *netfault.LoadBalancer, n int) map[string]int {
	t.Helper()
	got := map[string]int{}
	for range n {
		name, err := dial(t, lb.Addr()).greeting()
		if err != nil {
			t.Fatalf("connection through the load balancer: %v", err)
		}
		got[name]++
	}
	return got
}

func TestLoadBalancerSpreadsNewConnectionsRoundRobinOverHealthyBackends(t *testing.T) {
	a, b, c := startBackend(t, "a"), startBackend(t, "b"), startBackend(t, "c")
	lb := startLB(t, fastChecks, a, b, c)

	if diff := cmp.Diff(map[string]int{"a": 2, "b": 2, "c": 2}, greetings(t, lb, 6)); diff != "" {
		t.Errorf("connections per backend, all healthy (-want +got):\n%s", diff)
	}

	b.mode.Store(healthFail)
	waitFor(t, 10*time.Second, "backend b down", func() bool { return !lb.Stats().Backends[1].Healthy })
	if diff := cmp.Diff(map[string]int{"a": 3, "c": 3}, greetings(t, lb, 6)); diff != "" {
		t.Errorf("connections per backend, b down (-want +got):\n%s", diff)
	}

	st := lb.Stats()
	for i, want := range []int64{5, 2, 5} {
		if got := st.Backends[i].Connections; got != want {
			t.Errorf("backend %s: %d connections counted, want %d", st.Backends[i].Name, got, want)
		}
	}
	if st.Refused != 0 {
		t.Errorf("%d connections refused, want none", st.Refused)
	}
}

func TestLoadBalancerCutsTheConnectionsOfABackendThatFailsItsCheckAndTakesItBack(t *testing.T) {
	a, b := startBackend(t, "a"), startBackend(t, "b")
	lb := startLB(t, fastChecks, a, b)
	conns := map[string]*clientConn{}
	for range 2 {
		conn := dial(t, lb.Addr())
		name, err := conn.greeting()
		if err != nil {
			t.Fatal(err)
		}
		conns[name] = conn
	}
	if len(conns) != 2 {
		t.Fatalf("two connections reached %v, want a and b", conns)
	}

	a.mode.Store(healthFail)
	if !conns["a"].closedWithin(5 * time.Second) {
		t.Fatal("the connection to a stayed open after a failed its checks")
	}
	if err := conns["b"].echo("still there"); err != nil {
		t.Fatalf("the connection to b: %v", err)
	}
	if diff := cmp.Diff(map[string]int{"b": 4}, greetings(t, lb, 4)); diff != "" {
		t.Errorf("connections per backend, a down (-want +got):\n%s", diff)
	}
	st := lb.Stats().Backends[0]
	if st.Healthy || st.Downs != 1 || st.Cut != 1 || !strings.Contains(st.LastCheckError, "503") {
		t.Errorf("stats of a = %+v, want down once, one connection cut, a 503 as last error", st)
	}

	a.mode.Store(healthOK)
	waitFor(t, 10*time.Second, "backend a up again", func() bool { return lb.Stats().Backends[0].Healthy })
	if diff := cmp.Diff(map[string]int{"a": 2, "b": 2}, greetings(t, lb, 4)); diff != "" {
		t.Errorf("connections per backend, a back (-want +got):\n%s", diff)
	}
}

func TestLoadBalancerTakesOutAFrozenBackend(t *testing.T) {
	a, b := startBackend(t, "a"), startBackend(t, "b")
	lb := startLB(t, netfault.LoadBalancerOptions{}, a, b) // 250 ms interval, 500 ms timeout, 3 failures
	var toA *clientConn
	for toA == nil {
		conn := dial(t, lb.Addr())
		if name, err := conn.greeting(); err != nil {
			t.Fatal(err)
		} else if name == "a" {
			toA = conn
		}
	}

	// Frozen: the health check's connection is accepted, the request never answered.
	frozen := time.Now()
	a.mode.Store(healthFrozen)
	if !toA.closedWithin(10 * time.Second) {
		t.Fatal("the connection to the frozen backend stayed open")
	}
	took := time.Since(frozen)
	t.Logf("frozen backend taken out and its connection cut after %s", took.Round(time.Millisecond))
	// Three checks must have timed out: it cannot go faster than two intervals and a timeout.
	if took < 2*250*time.Millisecond+500*time.Millisecond {
		t.Errorf("taken out after %s, before three checks could time out", took)
	}
	if st := lb.Stats().Backends[0]; st.Healthy || !strings.Contains(st.LastCheckError, "deadline exceeded") {
		t.Errorf("stats of a = %+v, want down after checks that timed out", st)
	}
	if diff := cmp.Diff(map[string]int{"b": 3}, greetings(t, lb, 3)); diff != "" {
		t.Errorf("connections per backend, a frozen (-want +got):\n%s", diff)
	}
}

func TestLoadBalancerUnreachableDropsOpenAndNewConnectionsUntilTurnedOff(t *testing.T) {
	a, b := startBackend(t, "a"), startBackend(t, "b")
	lb := startLB(t, fastChecks, a, b)
	open := dial(t, lb.Addr())
	if _, err := open.greeting(); err != nil {
		t.Fatal(err)
	}

	lb.SetUnreachable(true)
	if !open.closedWithin(2 * time.Second) {
		t.Fatal("an open connection survived unreachable mode")
	}
	accepted := a.accepted.Load() + b.accepted.Load()
	for range 3 {
		if name, err := reach(t, lb.Addr()); err == nil {
			t.Fatalf("a new connection reached backend %s in unreachable mode", name)
		}
	}
	if got := a.accepted.Load() + b.accepted.Load(); got != accepted {
		t.Errorf("the backends accepted %d connections in unreachable mode, want none", got-accepted)
	}
	st := lb.Stats()
	if st.Dropped != 1 || st.Unreachable != 3 || st.Refused != 3 || st.NoBackend != 0 {
		t.Errorf("stats = %+v, want 1 dropped, 3 refused as unreachable", st)
	}
	for _, bs := range st.Backends {
		if !bs.Healthy {
			t.Errorf("backend %s down: unreachable mode must not touch the health checks", bs.Name)
		}
	}

	lb.SetUnreachable(false)
	conn := dial(t, lb.Addr())
	if _, err := conn.greeting(); err != nil {
		t.Fatalf("a new connection after unreachable mode: %v", err)
	}
	if err := conn.echo("back"); err != nil {
		t.Fatalf("a new connection after unreachable mode: %v", err)
	}
}

func TestLoadBalancerResetsConnectionsWhileNoBackendIsHealthy(t *testing.T) {
	a := startBackend(t, "a")
	a.mode.Store(healthFail)
	lb := startLB(t, fastChecks, a)
	if name, err := reach(t, lb.Addr()); err == nil {
		t.Fatalf("a connection reached %s, which never passed a check", name)
	}
	if st := lb.Stats(); st.NoBackend != 1 || st.Refused != 1 || a.accepted.Load() != 0 {
		t.Errorf("stats = %+v, backend accepted %d, want 1 refused for want of a backend and none accepted", st, a.accepted.Load())
	}
	a.mode.Store(healthOK)
	waitFor(t, 10*time.Second, "backend a up", func() bool { return lb.Stats().Backends[0].Healthy })
	if _, err := dial(t, lb.Addr()).greeting(); err != nil {
		t.Fatalf("a connection once a is up: %v", err)
	}
}

func TestLoadBalancerCloseEndsEveryGoroutine(t *testing.T) {
	a, b := startBackend(t, "a"), startBackend(t, "b")
	b.mode.Store(healthFrozen) // a check in flight at Close
	lb := startLB(t, fastChecks, a, b)
	for range 3 {
		conn := dial(t, lb.Addr())
		if _, err := conn.greeting(); err != nil {
			t.Fatal(err)
		}
		if err := conn.echo("x"); err != nil {
			t.Fatal(err)
		}
	}
	if len(packageGoroutines()) == 0 {
		t.Fatal("no goroutine of the package found while it runs: the check cannot see leaks")
	}
	lb.Close()
	if left := packageGoroutines(); len(left) > 0 {
		t.Fatalf("%d goroutines left after Close:\n%s", len(left), strings.Join(left, "\n\n"))
	}
	lb.Close() // a second Close is a no-op
}

func TestNewLoadBalancerListensOnLoopbackOnly(t *testing.T) {
	for _, listen := range []string{"0.0.0.0:0", ":0", "192.0.2.1:0"} {
		if lb, err := netfault.NewLoadBalancer(listen, []netfault.Backend{{Addr: "127.0.0.1:1"}}, netfault.LoadBalancerOptions{}); err == nil {
			lb.Close()
			t.Errorf("NewLoadBalancer(%q) listened", listen)
		}
	}
}
