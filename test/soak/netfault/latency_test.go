package netfault_test

import (
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sandgate-dev/sandgate/test/soak/netfault"
)

// startProxy starts a latency proxy to target and closes it at the end of the test.
func startProxy(t *testing.T, target string) *netfault.LatencyProxy {
	t.Helper()
	p, err := netfault.NewLatencyProxy("", target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// roundTrips measures n echo round trips on conn.
func roundTrips(t *testing.T, conn *clientConn, n int) []time.Duration {
	t.Helper()
	var took []time.Duration
	for i := range n {
		start := time.Now()
		if err := conn.echo(fmt.Sprintf("ping %d;", i)); err != nil {
			t.Fatalf("round trip %d: %v", i, err)
		}
		took = append(took, time.Since(start))
	}
	slices.Sort(took)
	return took
}

func TestLatencyProxyDelaysEachRoundTripByTheDelaysSet(t *testing.T) {
	target := startBackend(t, "api")
	p := startProxy(t, target.addr())
	conn := dial(t, p.Addr())
	if _, err := conn.greeting(); err != nil {
		t.Fatal(err)
	}
	const delay = 300 * time.Millisecond

	baseline := roundTrips(t, conn, 5)
	p.SetDelay(delay)
	delayed := roundTrips(t, conn, 3)
	p.SetResponseDelay(200 * time.Millisecond)
	both := roundTrips(t, conn, 3)
	p.SetDelay(0)
	responsesOnly := roundTrips(t, conn, 3)
	p.SetResponseDelay(0)
	after := roundTrips(t, conn, 5)
	t.Logf("round trips (sorted): no delay %v, %s on requests %v, and 200ms on responses %v, responses only %v, no delay again %v",
		baseline, delay, delayed, both, responsesOnly, after)

	if delayed[0] < delay {
		t.Errorf("with %s on requests the fastest round trip took %s", delay, delayed[0])
	}
	if both[0] < delay+200*time.Millisecond {
		t.Errorf("with %s on requests and 200ms on responses the fastest round trip took %s", delay, both[0])
	}
	if responsesOnly[0] < 200*time.Millisecond {
		t.Errorf("with 200ms on responses the fastest round trip took %s", responsesOnly[0])
	}
	// The delay applies to what is read while it is set: once it is gone the round trips are
	// as fast as before it, which on loopback is far below it.
	if baseline[0] >= delay || after[0] >= delay {
		t.Errorf("without delay the fastest round trips took %s before and %s after, not less than %s", baseline[0], after[0], delay)
	}

	// New connections get the delay too.
	p.SetDelay(delay)
	fresh := dial(t, p.Addr())
	if _, err := fresh.greeting(); err != nil {
		t.Fatal(err)
	}
	if took := roundTrips(t, fresh, 1); took[0] < delay {
		t.Errorf("a new connection's round trip took %s with %s set", took[0], delay)
	}
	if st := p.Stats(); st.Connections != 2 || st.Open != 2 {
		t.Errorf("stats = %+v, want 2 connections open", st)
	}
}

func TestLatencyProxyKeepsTheOrderWhenTheDelayDrops(t *testing.T) {
	target := startBackend(t, "api")
	p := startProxy(t, target.addr())
	conn := dial(t, p.Addr())
	if _, err := conn.greeting(); err != nil {
		t.Fatal(err)
	}
	p.SetDelay(300 * time.Millisecond)
	var sent strings.Builder
	start := time.Now()
	for i := range 40 {
		if i == 20 {
			p.SetDelay(0) // chunks read from now on are due at once, but wait their turn
		}
		msg := fmt.Sprintf("<%d>", i)
		sent.WriteString(msg)
		if _, err := io.WriteString(conn, msg); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Millisecond) // separate chunks
	}
	got := make([]byte, sent.Len())
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadFull(conn.r, got); err != nil {
		t.Fatal(err)
	}
	if string(got) != sent.String() {
		t.Errorf("echoed %q, want %q", got, sent.String())
	}
	if took := time.Since(start); took < 300*time.Millisecond {
		t.Errorf("everything came back after %s: the first chunk's delay was not kept", took)
	}
}

func TestLatencyProxyDropConnectionsResetsEveryOpenConnection(t *testing.T) {
	target := startBackend(t, "api")
	p := startProxy(t, target.addr())
	a, b := dial(t, p.Addr()), dial(t, p.Addr())
	for _, c := range []*clientConn{a, b} {
		if _, err := c.greeting(); err != nil {
			t.Fatal(err)
		}
	}
	if n := p.DropConnections(); n != 2 {
		t.Errorf("DropConnections() = %d, want 2", n)
	}
	for _, c := range []*clientConn{a, b} {
		if !c.closedWithin(2 * time.Second) {
			t.Error("a connection survived DropConnections")
		}
	}
	c := dial(t, p.Addr())
	if _, err := c.greeting(); err != nil {
		t.Fatalf("a new connection after DropConnections: %v", err)
	}
	if err := c.echo("x"); err != nil {
		t.Fatalf("a new connection after DropConnections: %v", err)
	}
	if st := p.Stats(); st.Connections != 3 || st.Open != 1 || st.Dropped != 2 {
		t.Errorf("stats = %+v, want 3 connections, 1 open, 2 dropped", st)
	}
}

func TestLatencyProxyResetsClientsWhenTheTargetRefuses(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	target := ln.Addr().String()
	_ = ln.Close() // nothing listens there now
	p := startProxy(t, target)
	if name, err := reach(t, p.Addr()); err == nil {
		t.Fatalf("a connection to a refusing target got %q", name)
	}
	waitFor(t, 5*time.Second, "the dial failure counted", func() bool { return p.Stats().DialFailures == 1 })
}

func TestLatencyProxyCloseEndsEveryGoroutineWithChunksHeld(t *testing.T) {
	target := startBackend(t, "api")
	p := startProxy(t, target.addr())
	conn := dial(t, p.Addr())
	if _, err := conn.greeting(); err != nil {
		t.Fatal(err)
	}
	p.SetDelay(time.Minute)
	if _, err := io.WriteString(conn, "held"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "a chunk read and held", func() bool {
		for _, g := range packageGoroutines() {
			if strings.Contains(g, "forwardDelayed") && strings.Contains(g, "select") {
				return true
			}
		}
		return false
	})
	start := time.Now()
	p.Close()
	t.Logf("Close took %s with a chunk held for a minute", time.Since(start).Round(time.Microsecond))
	if left := packageGoroutines(); len(left) > 0 {
		t.Fatalf("%d goroutines left after Close:\n%s", len(left), strings.Join(left, "\n\n"))
	}
	if !conn.closedWithin(2 * time.Second) {
		t.Error("the client's connection survived Close")
	}
}
