package operator

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/sandgate-dev/sandgate/api"
)

// The leader election timings of controller-runtime and kube-controller-manager: a replica
// that stops renewing loses the Lease after LeaseDuration at most, and gives it up itself
// after RenewDeadline without a successful renewal.
const (
	DefaultLeaderElectionLeaseDuration = 15 * time.Second
	DefaultLeaderElectionRenewDeadline = 10 * time.Second
	DefaultLeaderElectionRetryPeriod   = 2 * time.Second
)

// LeaderElectionTimings are the leader election's durations (client-go's meaning).
type LeaderElectionTimings struct {
	// LeaseDuration is how long another replica waits, after it last saw the Lease renewed,
	// before it takes the Lease over.
	LeaseDuration time.Duration
	// RenewDeadline is how long the leader keeps retrying a failed renewal before it gives
	// the Lease up; it is also how old the leader's last renewal may be before its own
	// writes are refused (leaseFence). Less than LeaseDuration.
	RenewDeadline time.Duration
	// RetryPeriod is how often candidates try to acquire, and the leader to renew.
	RetryPeriod time.Duration
}

// DefaultLeaderElectionTimings are controller-runtime's defaults.
func DefaultLeaderElectionTimings() LeaderElectionTimings {
	return LeaderElectionTimings{
		LeaseDuration: DefaultLeaderElectionLeaseDuration,
		RenewDeadline: DefaultLeaderElectionRenewDeadline,
		RetryPeriod:   DefaultLeaderElectionRetryPeriod,
	}
}

// validate names the field of every bad setting, under prefix.
func (t LeaderElectionTimings) validate(prefix string) []error {
	var errs []error
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"LeaseDuration", t.LeaseDuration}, {"RenewDeadline", t.RenewDeadline}, {"RetryPeriod", t.RetryPeriod}} {
		if d.v <= 0 {
			errs = append(errs, fmt.Errorf("invalid %s%s: must be positive, got %s", prefix, d.name, d.v))
		}
	}
	if len(errs) > 0 {
		return errs
	}
	// client-go's own rules (leaderelection.NewLeaderElector), checked here so that a bad
	// command line fails at once with the flags' meaning rather than when the manager starts.
	if t.LeaseDuration <= t.RenewDeadline {
		errs = append(errs, fmt.Errorf("invalid %sLeaseDuration: must be greater than RenewDeadline (%s), got %s", prefix, t.RenewDeadline, t.LeaseDuration))
	}
	if float64(t.RenewDeadline) <= 1.2*float64(t.RetryPeriod) {
		errs = append(errs, fmt.Errorf("invalid %sRenewDeadline: must be greater than 1.2 × RetryPeriod (%s), got %s", prefix, t.RetryPeriod, t.RenewDeadline))
	}
	return errs
}

// A replica that was frozen (SIGSTOP, a paused VM, a long GC or a starved node) while it led
// wakes up with its reconciles in flight: client-go's elector notices the lost Lease only when
// its renew loop next runs, and controller-runtime stops the manager after that. Between the
// wake-up and that moment, the old leader's workers write, racing the new leader: the writes
// of two leaders at once that leader election exists to prevent. leaseFence closes that gap on
// the client side: every write of the manager goes through it, and it refuses writes once the
// replica's last successful renewal is older than RenewDeadline, the age at which the elector
// itself would give the Lease up, and well inside LeaseDuration, before which no other replica
// may take it. The clock is the monotonic one, which keeps counting while the process is
// stopped.
//
// What it cannot close: a write checked a moment before the freeze and sent after it. The API
// server has no fencing token to refuse it with; the window is the few microseconds between
// the check and the request's bytes leaving the process.
type leaseFence struct {
	renewDeadline time.Duration
	now           func() time.Time
	refused       prometheus.Counter

	mu sync.Mutex
	// renewedAt is when the last successful acquisition or renewal of the Lease by this
	// replica was sent (not answered: the other replicas count from no later than that);
	// zero while it does not hold the Lease.
	renewedAt time.Time
	// inflight counts the writes let through and not answered yet: a release waits for them
	// (drain), so that none reaches the API server after the Lease is free.
	inflight int
}

// releaseDrain bounds how long a release waits for the writes in flight.
const releaseDrain = 5 * time.Second

// newLeaseFence returns a fence that refuses writes until the replica first acquires the
// Lease; refused counts the writes it refused.
func newLeaseFence(renewDeadline time.Duration, refused prometheus.Counter) *leaseFence {
	return &leaseFence{renewDeadline: renewDeadline, now: time.Now, refused: refused}
}

// begin lets a write go out and counts it in flight, or says why not; end it with done. A
// write let through must be sent within valid, the time left of the fence's renew deadline:
// one that waits longer in the transport (for an HTTP/2 stream, under load) could reach the
// API server after another replica took the Lease over.
func (f *leaseFence) begin() (ok bool, why string, valid time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	ok, why = f.holdsLocked()
	if ok {
		f.inflight++
		valid = f.renewDeadline - f.now().Sub(f.renewedAt)
	}
	return ok, why, valid
}

// done ends a write begin let through.
func (f *leaseFence) done() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.inflight--
}

// drain waits until no write is in flight, at most limit; it reports whether none is.
func (f *leaseFence) drain(limit time.Duration) bool {
	deadline := time.Now().Add(limit)
	for {
		f.mu.Lock()
		n := f.inflight
		f.mu.Unlock()
		if n == 0 {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// holdsLocked reports whether the replica's writes may go out, and if not why; f.mu is held.
func (f *leaseFence) holdsLocked() (bool, string) {
	if f.renewedAt.IsZero() {
		return false, "this replica does not hold the leader election Lease"
	}
	if age := f.now().Sub(f.renewedAt); age >= f.renewDeadline {
		return false, fmt.Sprintf("this replica last renewed the leader election Lease %s ago (renew deadline %s): another replica may lead", age.Round(time.Millisecond), f.renewDeadline)
	}
	return true, ""
}

// renewed records a successful acquisition or renewal sent at sent.
func (f *leaseFence) renewed(sent time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if sent.After(f.renewedAt) {
		f.renewedAt = sent
	}
}

// released records that the replica gave the Lease up (or saw another holder).
func (f *leaseFence) released() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.renewedAt = time.Time{}
}

// NotLeaderError is the error of a write the fence refused: nothing was sent.
type NotLeaderError struct {
	Method, Path, Reason string
}

func (e *NotLeaderError) Error() string {
	return fmt.Sprintf("%s %s not sent: %s", e.Method, e.Path, e.Reason)
}

// wrap makes rt refuse the writes the fence does not allow.
func (f *leaseFence) wrap(rt http.RoundTripper) http.RoundTripper {
	return fencedTransport{fence: f, next: rt}
}

type fencedTransport struct {
	fence *leaseFence
	next  http.RoundTripper
}

func (t fencedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	switch req.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return t.next.RoundTrip(req)
	}
	ok, why, valid := t.fence.begin()
	if !ok {
		if t.fence.refused != nil {
			t.fence.refused.Inc()
		}
		if req.Body != nil {
			_ = req.Body.Close() // a RoundTripper closes the body, even on error
		}
		return nil, &NotLeaderError{Method: req.Method, Path: req.URL.Path, Reason: why}
	}
	defer t.fence.done()
	ctx, cancel := context.WithTimeout(req.Context(), valid)
	resp, err := t.next.RoundTrip(req.WithContext(ctx))
	if err != nil {
		cancel()
		return nil, err
	}
	resp.Body = cancelOnClose{ReadCloser: resp.Body, cancel: cancel}
	return resp, nil
}

// cancelOnClose ends a write's context once its answer has been read.
type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (c cancelOnClose) Close() error {
	err := c.ReadCloser.Close()
	c.cancel()
	return err
}

// fencedLock is the Lease lock of the elector, telling the fence of every acquisition,
// renewal and release that succeeded.
type fencedLock struct {
	resourcelock.Interface
	fence *leaseFence
}

func (l fencedLock) Create(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	return l.write(ctx, ler, func() error { return l.Interface.Create(ctx, ler) })
}

// Update is the elector's write of the Lease, through client-go's lock: an update with the
// Lease's resourceVersion as precondition, as leader election needs.
func (l fencedLock) Update(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	return l.write(ctx, ler, func() error { return l.Interface.Update(ctx, ler) })
}

func (l fencedLock) write(ctx context.Context, ler resourcelock.LeaderElectionRecord, write func() error) error {
	sent := l.fence.now()
	if ler.HolderIdentity != l.Identity() {
		// A release (client-go writes an empty holder): stop writing, and let the writes in
		// flight land, before the Lease is free. Under load a write let through can wait in
		// the transport for a stream: released without the drain, the soak saw 287 writes
		// of a replica arrive in the 250 ms after its release.
		l.fence.released()
		// The elector releases by what it last observed: a replica frozen past its Lease
		// wakes up still believing it holds it, and its release would free the Lease of the
		// replica that took over meanwhile (the soak saw that one's writes land with nobody
		// holding the Lease). Only a Lease this replica still holds is released; the read
		// also gives the release the Lease's current resourceVersion, so a take-over between
		// the two is a conflict, not overwritten.
		rec, _, err := l.Interface.Get(ctx)
		if err != nil {
			return fmt.Errorf("reading the Lease before releasing it: %w", err)
		}
		if rec == nil || rec.HolderIdentity != l.Identity() {
			return nil // not ours to release
		}
		l.fence.drain(releaseDrain)
		return write()
	}
	if err := write(); err != nil {
		return err
	}
	l.fence.renewed(sent)
	return nil
}

// Get tells the fence when the Lease is seen held by another replica: the elector then
// stops renewing, and writes must stop with it.
func (l fencedLock) Get(ctx context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	rec, raw, err := l.Interface.Get(ctx)
	if err == nil && rec != nil && rec.HolderIdentity != "" && rec.HolderIdentity != l.Identity() {
		l.fence.released()
	}
	return rec, raw, err
}

// newFencedLeaseLock builds the leader election Lease lock as controller-runtime does (the
// identity is the host name, which is the pod's name in a cluster, and a UUID), on clients of
// cfg that the fence does not guard: the elector must be able to renew, and to release.
func newFencedLeaseLock(cfg *rest.Config, namespace string, timings LeaderElectionTimings, fence *leaseFence) (resourcelock.Interface, error) {
	if namespace == "" {
		ns, err := inClusterNamespace()
		if err != nil {
			return nil, err
		}
		namespace = ns
	}
	host, err := os.Hostname()
	if err != nil {
		return nil, fmt.Errorf("leader election identity: %w", err)
	}
	id := host + "_" + string(uuid.NewUUID())
	// The Lease names its holder by this identity only: logged, it says which process led
	// when (a restart gets a new one).
	ctrl.Log.WithName("leader-election").Info("leader election identity", "identity", id, "lease", namespace+"/"+LeaderElectionID)
	cfg = rest.AddUserAgent(rest.CopyConfig(cfg), "leader-election")
	// One hung request must not cost the Lease: half the renew deadline, as controller-runtime.
	cfg.Timeout = max(timings.RenewDeadline/2, time.Second)
	core, err := corev1client.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("leader election client: %w", err)
	}
	coordination, err := coordinationv1client.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("leader election client: %w", err)
	}
	broadcaster := record.NewBroadcaster()
	broadcaster.StartRecordingToSink(&corev1client.EventSinkImpl{Interface: core.Events("")})
	recorder := broadcaster.NewRecorder(api.NewScheme(), corev1.EventSource{Component: id})
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, namespace, LeaderElectionID, core, coordination,
		resourcelock.ResourceLockConfig{Identity: id, EventRecorder: recorder})
	if err != nil {
		return nil, fmt.Errorf("leader election lock: %w", err)
	}
	return fencedLock{Interface: lock, fence: fence}, nil
}

// inClusterNamespace is the namespace of the pod's service account.
func inClusterNamespace() (string, error) {
	const path = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"
	data, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("leader election needs a namespace: not running in a cluster (%w); set the leader election namespace", err)
	}
	return string(data), nil
}

// fenceWrites makes every write of the manager's cfg go through a lease fence when opts elect
// a leader, and returns the Lease lock that feeds the fence (nil without leader election).
// Call it after every other change to cfg's transport: the lock's clients are not fenced.
func fenceWrites(cfg *rest.Config, opts Options, registry prometheus.Registerer) (resourcelock.Interface, error) {
	if !opts.LeaderElection {
		return nil, nil
	}
	refused := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "sandgate_leader_fenced_writes_total",
		Help: "Writes this replica refused to send because its last renewal of the leader election Lease was older than the renew deadline (a frozen or partitioned leader).",
	})
	if err := registry.Register(refused); err != nil {
		return nil, fmt.Errorf("registering the lease fence's metric: %w", err)
	}
	fence := newLeaseFence(opts.LeaderElectionTimings.RenewDeadline, refused)
	lock, err := newFencedLeaseLock(cfg, opts.LeaderElectionNamespace, opts.LeaderElectionTimings, fence)
	if err != nil {
		return nil, err
	}
	cfg.Wrap(fence.wrap)
	return lock, nil
}
