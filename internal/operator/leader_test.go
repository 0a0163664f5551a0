package operator

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// fakeClock is a clock the test moves.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) step(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// memLock is a Lease lock in memory; failNext makes its next write fail.
type memLock struct {
	id       string
	rec      *resourcelock.LeaderElectionRecord
	failNext bool
}

func (l *memLock) Get(context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	if l.rec == nil {
		return nil, nil, errors.New("not found")
	}
	r := *l.rec
	return &r, nil, nil
}

func (l *memLock) Create(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	return l.Update(ctx, ler)
}

func (l *memLock) Update(_ context.Context, ler resourcelock.LeaderElectionRecord) error {
	if l.failNext {
		l.failNext = false
		return errors.New("conflict")
	}
	l.rec = &ler
	return nil
}

func (l *memLock) RecordEvent(string) {}
func (l *memLock) Identity() string   { return l.id }
func (l *memLock) Describe() string   { return "mem/" + l.id }

// sent records the requests that reached the network.
type sent struct{ methods []string }

func (s *sent) RoundTrip(req *http.Request) (*http.Response, error) {
	s.methods = append(s.methods, req.Method)
	return &http.Response{StatusCode: http.StatusOK, Body: io.NopCloser(strings.NewReader("{}")), Request: req}, nil
}

func newFenceForTest() (*leaseFence, *fakeClock, prometheus.Counter) {
	clock := &fakeClock{now: time.Unix(1_000_000, 0)}
	refused := prometheus.NewCounter(prometheus.CounterOpts{Name: "refused"})
	f := newLeaseFence(10*time.Second, refused)
	f.now = clock.Now
	return f, clock, refused
}

func do(t *testing.T, rt http.RoundTripper, method string) error {
	t.Helper()
	req, err := http.NewRequest(method, "https://127.0.0.1:6443/apis/agents.x-k8s.io/v1beta1/namespaces/a/sandboxes/s", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := rt.RoundTrip(req)
	if err == nil {
		_ = resp.Body.Close()
	}
	return err
}

// A replica writes only while its last renewal is younger than the renew deadline: a leader
// frozen past it wakes up unable to write, whatever its workers had in flight.
func TestLeaseFenceRefusesWritesOfAReplicaThatIsNotAFreshLeader(t *testing.T) {
	fence, clock, refused := newFenceForTest()
	net := &sent{}
	rt := fence.wrap(net)
	lock := fencedLock{Interface: &memLock{id: "a"}, fence: fence}
	ctx := context.Background()

	// Not leader yet: reads go out, writes do not.
	if err := do(t, rt, http.MethodGet); err != nil {
		t.Fatalf("a read was refused: %v", err)
	}
	var notLeader *NotLeaderError
	if err := do(t, rt, http.MethodPatch); !errors.As(err, &notLeader) {
		t.Fatalf("a write before the replica ever led was not refused: %v", err)
	}

	// Acquired: writes go out.
	if err := lock.Create(ctx, resourcelock.LeaderElectionRecord{HolderIdentity: "a"}); err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		if err := do(t, rt, m); err != nil {
			t.Fatalf("the leader's %s was refused: %v", m, err)
		}
	}

	// Renewed every 2 s: still the leader 9 s after the last renewal.
	clock.step(2 * time.Second)
	if err := lock.Update(ctx, resourcelock.LeaderElectionRecord{HolderIdentity: "a"}); err != nil {
		t.Fatal(err)
	}
	clock.step(9 * time.Second)
	if err := do(t, rt, http.MethodPatch); err != nil {
		t.Fatalf("a leader 9 s after its renewal was refused: %v", err)
	}

	// Frozen: the clock moves past the renew deadline with no renewal.
	clock.step(20 * time.Second)
	err := do(t, rt, http.MethodPatch)
	if !errors.As(err, &notLeader) || !strings.Contains(err.Error(), "last renewed") {
		t.Fatalf("a leader 29 s after its last renewal could write: %v", err)
	}
	// A failed renewal does not count as one.
	lock.Interface.(*memLock).failNext = true
	if err := lock.Update(ctx, resourcelock.LeaderElectionRecord{HolderIdentity: "a"}); err == nil {
		t.Fatal("the lock's write should have failed")
	}
	if err := do(t, rt, http.MethodPost); !errors.As(err, &notLeader) {
		t.Fatalf("a failed renewal let writes through: %v", err)
	}
	if got := testutil.ToFloat64(refused); got != 3 {
		t.Errorf("refused writes counted %v, want 3", got)
	}
	if want := []string{"GET", "POST", "PUT", "PATCH", "DELETE", "PATCH"}; strings.Join(net.methods, ",") != strings.Join(want, ",") {
		t.Errorf("requests sent %v, want %v", net.methods, want)
	}
}

// Seeing another holder, or releasing the Lease, stops the writes at once.
func TestLeaseFenceStopsWritesWhenTheLeaseIsSeenElsewhereOrReleased(t *testing.T) {
	fence, _, _ := newFenceForTest()
	rt := fence.wrap(&sent{})
	mem := &memLock{id: "a"}
	lock := fencedLock{Interface: mem, fence: fence}
	ctx := context.Background()

	if err := lock.Create(ctx, resourcelock.LeaderElectionRecord{HolderIdentity: "a"}); err != nil {
		t.Fatal(err)
	}
	mem.rec = &resourcelock.LeaderElectionRecord{HolderIdentity: "b"} // b took over
	if _, _, err := lock.Get(ctx); err != nil {
		t.Fatal(err)
	}
	var notLeader *NotLeaderError
	if err := do(t, rt, http.MethodPatch); !errors.As(err, &notLeader) {
		t.Fatalf("a replica that saw another holder could write: %v", err)
	}

	if err := lock.Update(ctx, resourcelock.LeaderElectionRecord{HolderIdentity: "a"}); err != nil {
		t.Fatal(err)
	}
	if err := do(t, rt, http.MethodPatch); err != nil {
		t.Fatalf("the leader was refused after reacquiring: %v", err)
	}
	// client-go releases with an empty holder.
	if err := lock.Update(ctx, resourcelock.LeaderElectionRecord{}); err != nil {
		t.Fatal(err)
	}
	if err := do(t, rt, http.MethodDelete); !errors.As(err, &notLeader) {
		t.Fatalf("a replica that released the Lease could write: %v", err)
	}
}

func TestLeaderElectionTimingsAreCheckedAsClientGoChecksThem(t *testing.T) {
	if errs := DefaultLeaderElectionTimings().validate(""); len(errs) != 0 {
		t.Fatalf("the defaults are refused: %v", errs)
	}
	for name, tc := range map[string]struct {
		t    LeaderElectionTimings
		want string
	}{
		"zero retry":           {LeaderElectionTimings{15 * time.Second, 10 * time.Second, 0}, "RetryPeriod: must be positive"},
		"lease within renew":   {LeaderElectionTimings{10 * time.Second, 10 * time.Second, 2 * time.Second}, "LeaseDuration: must be greater than RenewDeadline"},
		"renew within retries": {LeaderElectionTimings{15 * time.Second, 2 * time.Second, 2 * time.Second}, "RenewDeadline: must be greater than 1.2"},
	} {
		t.Run(name, func(t *testing.T) {
			errs := tc.t.validate("x.")
			if len(errs) != 1 || !strings.Contains(errs[0].Error(), tc.want) {
				t.Fatalf("errors %v, want one containing %q", errs, tc.want)
			}
		})
	}
}

// blocking holds every request until released.
type blocking struct {
	started chan struct{}
	release chan struct{}
}

func (b *blocking) RoundTrip(req *http.Request) (*http.Response, error) {
	b.started <- struct{}{}
	<-b.release
	return &http.Response{StatusCode: http.StatusOK, Body: io.NopCloser(strings.NewReader("{}")), Request: req}, nil
}

// A release waits for the writes in flight: none of them reaches the API server after the
// Lease is free for another replica.
func TestLeaseReleaseWaitsForWritesInFlight(t *testing.T) {
	fence, _, _ := newFenceForTest()
	net := &blocking{started: make(chan struct{}, 1), release: make(chan struct{})}
	rt := fence.wrap(net)
	mem := &memLock{id: "a"}
	lock := fencedLock{Interface: mem, fence: fence}
	ctx := context.Background()
	if err := lock.Create(ctx, resourcelock.LeaderElectionRecord{HolderIdentity: "a"}); err != nil {
		t.Fatal(err)
	}
	writeDone := make(chan error, 1)
	go func() { writeDone <- do(t, rt, http.MethodPatch) }()
	<-net.started // the write is in flight

	released := make(chan struct{})
	go func() {
		_ = lock.Update(ctx, resourcelock.LeaderElectionRecord{}) // client-go's release
		close(released)
	}()
	select {
	case <-released:
		t.Fatal("the Lease was released with a write in flight")
	case <-time.After(100 * time.Millisecond):
	}
	var notLeader *NotLeaderError
	if err := do(t, rt, http.MethodPost); !errors.As(err, &notLeader) {
		t.Fatalf("a new write during the release went out: %v", err)
	}
	close(net.release)
	if err := <-writeDone; err != nil {
		t.Fatalf("the write in flight failed: %v", err)
	}
	select {
	case <-released:
	case <-time.After(5 * time.Second):
		t.Fatal("the release did not follow the last write")
	}
	if mem.rec == nil || mem.rec.HolderIdentity != "" {
		t.Errorf("lease record %+v, want released", mem.rec)
	}
}

// A write the fence let through is not sent once the time left of the renew deadline at its
// admission has passed: stuck in the transport (waiting for an HTTP/2 stream under load), it
// is given up rather than reaching the API server after another replica may have taken the
// Lease over.
func TestFencedWriteIsGivenUpAtTheRenewDeadline(t *testing.T) {
	f := newLeaseFence(300*time.Millisecond, nil)
	f.renewed(time.Now())
	stuck := roundTripFunc(func(req *http.Request) (*http.Response, error) {
		<-req.Context().Done() // never sent: waits for a stream until given up
		return nil, req.Context().Err()
	})
	req, err := http.NewRequest(http.MethodPatch, "https://127.0.0.1/api/v1/namespaces/ns/pods/p", http.NoBody)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = f.wrap(stuck).RoundTrip(req)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a write stuck past the renew deadline: %v, want it given up (deadline exceeded)", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("given up after %s, want about the 300ms left of the renew deadline", took)
	}
	if !f.drain(0) {
		t.Errorf("the given-up write is still counted in flight")
	}

	// A write answered in time keeps its answer readable after RoundTrip returns.
	ok := roundTripFunc(func(req *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: http.StatusOK, Body: io.NopCloser(strings.NewReader("{}")), Request: req}, nil
	})
	f.renewed(time.Now())
	resp, err := f.wrap(ok).RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil || string(body) != "{}" {
		t.Errorf("answer %q, %v; want {}", body, err)
	}
	_ = resp.Body.Close()
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// A replica that stops leading releases the Lease only if it still holds it: one frozen past
// its Lease wakes up believing it leads, and its release must not free the Lease of the
// replica that took over meanwhile.
func TestReleaseLeavesAnotherReplicasLeaseAlone(t *testing.T) {
	fence, _, _ := newFenceForTest()
	mem := &memLock{id: "a"}
	lock := fencedLock{Interface: mem, fence: fence}
	now := metav1.NewTime(time.Now())
	// b took the Lease over while a was frozen.
	mem.rec = &resourcelock.LeaderElectionRecord{HolderIdentity: "b", LeaseDurationSeconds: 15, RenewTime: now, AcquireTime: now}

	if err := lock.Update(context.Background(), resourcelock.LeaderElectionRecord{LeaseDurationSeconds: 1, RenewTime: now, AcquireTime: now}); err != nil {
		t.Fatalf("release: %v", err)
	}
	if mem.rec.HolderIdentity != "b" {
		t.Errorf("after a's release the Lease is held by %q, want b's still", mem.rec.HolderIdentity)
	}

	// a's own Lease is released as before.
	mem.rec = &resourcelock.LeaderElectionRecord{HolderIdentity: "a", LeaseDurationSeconds: 15, RenewTime: now, AcquireTime: now}
	if err := lock.Update(context.Background(), resourcelock.LeaderElectionRecord{LeaseDurationSeconds: 1, RenewTime: now, AcquireTime: now}); err != nil {
		t.Fatalf("release: %v", err)
	}
	if mem.rec.HolderIdentity != "" {
		t.Errorf("after a released its own Lease it is held by %q, want nobody", mem.rec.HolderIdentity)
	}
}
