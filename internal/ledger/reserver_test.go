package ledger

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/sandgate-dev/sandgate/api"
	tenancyv1alpha1 "github.com/sandgate-dev/sandgate/api/tenancy/v1alpha1"
	"github.com/sandgate-dev/sandgate/internal/fairshare"
	"github.com/sandgate-dev/sandgate/internal/testing/builders"
)

var ledgerKey = types.NamespacedName{Namespace: "ns", Name: "quotas.team-a"}

// staleCache always returns the ledger as it was first read: a replica whose informer is
// behind every write, so that every batch but the first starts from an outdated copy.
type staleCache struct {
	client.Reader
	mu    sync.Mutex
	first *tenancyv1alpha1.ClaimLedger
}

func (c *staleCache) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.first == nil {
		l := &tenancyv1alpha1.ClaimLedger{}
		if err := c.Reader.Get(ctx, key, l, opts...); err != nil {
			return err
		}
		c.first = l
	}
	c.first.DeepCopyInto(obj.(*tenancyv1alpha1.ClaimLedger))
	return nil
}

func counted(generation int64) *tenancyv1alpha1.ClaimLedger {
	at := metav1.NewMicroTime(time.Now())
	return &tenancyv1alpha1.ClaimLedger{
		ObjectMeta: metav1.ObjectMeta{Namespace: ledgerKey.Namespace, Name: ledgerKey.Name},
		Spec:       tenancyv1alpha1.ClaimLedgerSpec{PolicyName: "quotas", Tenant: "team-a"},
		Status:     tenancyv1alpha1.ClaimLedgerStatus{CountedAt: &at, CountedGeneration: generation},
	}
}

func policy(max int32) *tenancyv1alpha1.ClaimPolicy {
	return builders.MakeClaimPolicy("quotas", "ns").Tenant(builders.MakeTenant("team-a").User("alice").MaxClaims(max)).Obj()
}

func request(p *tenancyv1alpha1.ClaimPolicy, id string) Request {
	ch := fairshare.ChargeOf(p, fairshare.Identity{User: "alice"}, "python")
	return Request{Ledger: ledgerKey, Policy: p, Charge: ch,
		Reservation: tenancyv1alpha1.Reservation{ID: id, Tenant: ch.Tenant, Pool: "python", Creator: "alice"}}
}

// waitForLedger waits, 5 s at most, until the ledger's status is what done says; want says it
// in the failure.
func waitForLedger(t *testing.T, c client.Client, want string, done func(*tenancyv1alpha1.ClaimLedger) bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		l := readLedger(t, c)
		if done(l) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("ledger status %+v: want %s", l.Status, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func readLedger(t *testing.T, c client.Client) *tenancyv1alpha1.ClaimLedger {
	t.Helper()
	l := &tenancyv1alpha1.ClaimLedger{}
	if err := c.Get(context.Background(), ledgerKey, l); err != nil {
		t.Fatal(err)
	}
	return l
}

// Two replicas (two Reservers, each with a cache that never catches up) admit a burst against
// a limit of 10: exactly 10 are reserved, whatever the interleaving, because every write is
// conditional on the ledger's resourceVersion and a conflict is decided again on a fresh read.
func TestTwoReplicasNeverReserveBeyondTheLimit(t *testing.T) {
	c := fake.NewClientBuilder().WithScheme(api.NewScheme()).WithObjects(counted(0)).Build()
	p := policy(10)
	replicas := []*Reserver{
		{Client: c, Cache: &staleCache{Reader: c}, APIReader: c},
		{Client: c, Cache: &staleCache{Reader: c}, APIReader: c},
	}
	const claims = 40
	results := make([]Result, claims)
	var wg sync.WaitGroup
	for i := 0; i < claims; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = replicas[i%2].Reserve(context.Background(), request(p, fmt.Sprintf("r%d", i)))
		}()
	}
	wg.Wait()
	admitted, refused := 0, 0
	for i, r := range results {
		switch {
		case r.Err != nil:
			t.Errorf("claim %d: %v", i, r.Err)
		case len(r.Exceeded) > 0:
			refused++
			if e := r.Exceeded[0]; e.Limit != tenancyv1alpha1.LimitTenantMaxClaims || e.Used != 10 || e.Max != 10 {
				t.Errorf("claim %d refused for %+v, want tenants.maxClaims at 10 of 10", i, e)
			}
		default:
			admitted++
		}
	}
	if admitted != 10 || refused != claims-10 {
		t.Errorf("admitted %d, refused %d; want 10 and %d", admitted, refused, claims-10)
	}
	if got := len(readLedger(t, c).Status.Reservations); got != 10 {
		t.Errorf("the ledger holds %d reservations, want 10", got)
	}
}

// A replica's concurrent admissions share writes: a burst of one replica costs fewer writes
// than claims.
func TestABurstOfOneReplicaSharesWrites(t *testing.T) {
	c := &countingClient{Client: fake.NewClientBuilder().WithScheme(api.NewScheme()).WithObjects(counted(0)).Build()}
	r := &Reserver{Client: c, Cache: c, APIReader: c}
	p := policy(1000)
	var wg sync.WaitGroup
	for i := 0; i < 100; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if res := r.Reserve(context.Background(), request(p, fmt.Sprintf("r%d", i))); res.Err != nil || len(res.Exceeded) > 0 {
				t.Errorf("claim %d: %+v", i, res)
			}
		}()
	}
	wg.Wait()
	if got := len(readLedger(t, c).Status.Reservations); got != 100 {
		t.Errorf("the ledger holds %d reservations, want 100", got)
	}
	if c.patches() >= 100 {
		t.Errorf("%d writes for 100 claims: a replica's concurrent admissions should share writes", c.patches())
	}
}

func TestAReservationWaitsForTheLeadersCount(t *testing.T) {
	uncounted := counted(0)
	uncounted.Status.CountedAt = nil
	for name, tc := range map[string]struct {
		objs []client.Object
		p    *tenancyv1alpha1.ClaimPolicy
	}{
		"no ledger yet":                {nil, policy(3)},
		"a ledger not counted yet":     {[]client.Object{uncounted}, policy(3)},
		"counted for an older version": {[]client.Object{counted(1)}, func() *tenancyv1alpha1.ClaimPolicy { p := policy(3); p.Generation = 2; return p }()},
	} {
		t.Run(name, func(t *testing.T) {
			c := fake.NewClientBuilder().WithScheme(api.NewScheme()).WithObjects(tc.objs...).Build()
			r := &Reserver{Client: c, Cache: c, APIReader: c, NotCountedWait: 50 * time.Millisecond}
			res := r.Reserve(context.Background(), request(tc.p, "r"))
			if !apierrors.IsServiceUnavailable(res.Err) {
				t.Errorf("Reserve = %+v, want 503 Service Unavailable", res)
			}
		})
	}
}

// A reservation checked against another version of the policy than the ledger was counted
// for, or against a retired ledger, is not decided: admission reads the policies again.
func TestAReservationAgainstAnotherPolicyVersionIsStale(t *testing.T) {
	retired := counted(0)
	retired.Status.Retired = true
	for name, l := range map[string]*tenancyv1alpha1.ClaimLedger{"newer ledger": counted(3), "retired ledger": retired} {
		t.Run(name, func(t *testing.T) {
			c := fake.NewClientBuilder().WithScheme(api.NewScheme()).WithObjects(l).Build()
			r := &Reserver{Client: c, Cache: c, APIReader: c}
			if res := r.Reserve(context.Background(), request(policy(3), "r")); !errors.Is(res.Err, ErrStale) {
				t.Errorf("Reserve = %+v, want ErrStale", res)
			}
		})
	}
}

func TestReleaseDropsAReservationAndRefusalsAreCounted(t *testing.T) {
	c := fake.NewClientBuilder().WithScheme(api.NewScheme()).WithObjects(counted(0)).Build()
	r := &Reserver{Client: c, Cache: c, APIReader: c, RefusalFlushDelay: 10 * time.Millisecond}
	p := policy(1)
	if res := r.Reserve(context.Background(), request(p, "first")); res.Err != nil || len(res.Exceeded) > 0 {
		t.Fatalf("first claim: %+v", res)
	}
	if res := r.Reserve(context.Background(), request(p, "second")); len(res.Exceeded) != 1 {
		t.Fatalf("second claim: %+v, want refused", res)
	}
	r.Release(ledgerKey, "first")
	waitForLedger(t, c, "no reservation and one refusal of team-a", func(l *tenancyv1alpha1.ClaimLedger) bool {
		return len(l.Status.Reservations) == 0 && len(l.Status.Refusals) == 1 && l.Status.Refusals[0].Count == 1 && l.Status.Refusals[0].Tenant == "team-a"
	})
	if res := r.Reserve(context.Background(), request(p, "third")); res.Err != nil || len(res.Exceeded) > 0 {
		t.Errorf("a claim after the release: %+v, want reserved", res)
	}
}

// countingClient counts patches.
type countingClient struct {
	client.Client
	mu sync.Mutex
	n  int
}

func (c *countingClient) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	c.mu.Lock()
	c.n++
	c.mu.Unlock()
	return c.Client.Patch(ctx, obj, patch, opts...)
}

func (c *countingClient) patches() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// blockingClient holds every patch until released, and says when the first one is waiting.
type blockingClient struct {
	client.Client
	waiting chan struct{}
	release chan struct{}
	once    sync.Once
}

func (c *blockingClient) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	c.once.Do(func() { close(c.waiting) })
	select {
	case <-c.release:
	case <-ctx.Done():
		return ctx.Err()
	}
	return c.Client.Patch(ctx, obj, patch, opts...)
}

// A claim already beyond a limit on the newest copy is refused at once, not after the ledger
// write in flight: only a release could make room, and none waits.
func TestARefusalDoesNotWaitForTheWriteInFlight(t *testing.T) {
	c := fake.NewClientBuilder().WithScheme(api.NewScheme()).WithObjects(counted(0)).Build()
	bc := &blockingClient{Client: c, waiting: make(chan struct{}), release: make(chan struct{})}
	r := &Reserver{Client: c, Cache: c, APIReader: c, RefusalFlushDelay: time.Millisecond}
	p := policy(1)
	if res := r.Reserve(context.Background(), request(p, "first")); res.Err != nil || len(res.Exceeded) > 0 {
		t.Fatalf("first claim: %+v", res)
	}
	r.Client = bc // from here every write hangs until released
	if res := r.Reserve(context.Background(), request(p, "second")); len(res.Exceeded) != 1 {
		t.Fatalf("second claim: %+v, want refused", res)
	}
	<-bc.waiting // the second claim's refusal is being written, and hangs
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if res := r.Reserve(ctx, request(p, "third")); len(res.Exceeded) != 1 || res.Err != nil {
		t.Errorf("third claim while a write hangs: %+v, want refused at once", res)
	}
	close(bc.release)
	waitForLedger(t, c, "both refusals counted", func(l *tenancyv1alpha1.ClaimLedger) bool {
		return len(l.Status.Refusals) == 1 && l.Status.Refusals[0].Count == 2
	})
}

// withUsage is a counted ledger that holds n claims of tenant team-a in pool python.
func withUsage(n int32) *tenancyv1alpha1.ClaimLedger {
	l := counted(0)
	l.Status.Counted = []tenancyv1alpha1.LedgerCount{{Tenant: "team-a", Pool: tenancyv1alpha1.OtherPools, Claims: n}}
	return l
}

// A claim beyond a limit by more than the releases waiting to be written can free is refused
// at once, and so is the first claim a replica admits to a ledger (its cache is its newest
// copy): a queued release lowers a limit's usage by one at most.
func TestARefusalBeyondWhatReleasesFreeIsImmediate(t *testing.T) {
	for name, tc := range map[string]struct {
		p             *tenancyv1alpha1.ClaimPolicy
		used          int32
		releases      int
		noQueue       bool
		limit         string
		usedSeen, max int32
	}{
		"the first claim on this replica, at the limit": {p: policy(3), used: 3, noQueue: true,
			limit: tenancyv1alpha1.LimitTenantMaxClaims, usedSeen: 3, max: 3},
		"one release queued, one beyond the limit": {p: policy(2), used: 3, releases: 1,
			limit: tenancyv1alpha1.LimitTenantMaxClaims, usedSeen: 3, max: 2},
		"two releases queued, a limit lowered far below the usage": {p: policy(1), used: 5, releases: 2,
			limit: tenancyv1alpha1.LimitTenantMaxClaims, usedSeen: 5, max: 1},
		// Beyond the namespace's limit after the release, at the tenant's only before it:
		// the refusal names the limit still exceeded.
		"one release queued, beyond one limit of two": {
			p: builders.MakeClaimPolicy("quotas", "ns").MaxClaims(2).
				Tenant(builders.MakeTenant("team-a").User("alice").MaxClaims(4)).Obj(),
			used: 4, releases: 1, limit: tenancyv1alpha1.LimitMaxClaims, usedSeen: 4, max: 2},
	} {
		t.Run(name, func(t *testing.T) {
			c := fake.NewClientBuilder().WithScheme(api.NewScheme()).WithObjects(withUsage(tc.used)).Build()
			r := &Reserver{Client: c, Cache: c, APIReader: c, RefusalFlushDelay: time.Hour}
			if !tc.noQueue {
				r.mu.Lock()
				r.queue(ledgerKey).releasing = tc.releases // as if releases were enqueued and not written
				r.mu.Unlock()
			}
			req := request(tc.p, "r")
			req.Ledger = ledgerKey
			res, ok := r.refuseNow(context.Background(), req)
			if !ok || res.Err != nil || len(res.Exceeded) != 1 {
				t.Fatalf("refuseNow = %+v, %t; want refused at once", res, ok)
			}
			if e := res.Exceeded[0]; e.Limit != tc.limit || e.Used != tc.usedSeen || e.Max != tc.max {
				t.Errorf("refused for %+v, want %s at %d of %d", e, tc.limit, tc.usedSeen, tc.max)
			}
		})
	}
}

// While releases wait to be written that could bring a claim within its limits, the claim is
// decided by its batch, after the releases.
func TestAPendingReleaseLeavesTheRefusalToTheBatch(t *testing.T) {
	for name, tc := range map[string]struct {
		max, used int32
		releases  int
	}{
		"at the limit, one release queued":          {max: 1, used: 1, releases: 1},
		"one beyond the limit, two releases queued": {max: 2, used: 3, releases: 2},
	} {
		t.Run(name, func(t *testing.T) {
			c := fake.NewClientBuilder().WithScheme(api.NewScheme()).WithObjects(withUsage(tc.used)).Build()
			r := &Reserver{Client: c, Cache: c, APIReader: c, RefusalFlushDelay: time.Hour}
			r.mu.Lock()
			r.queue(ledgerKey).releasing = tc.releases
			r.mu.Unlock()
			if res, ok := r.refuseNow(context.Background(), request(policy(tc.max), "second")); ok {
				t.Errorf("refused at once (%+v) while a release that could make room is pending", res)
			}
		})
	}
}

// A release being written does not hold up a claim it could not bring within its limit: the
// claim is refused while the write hangs.
func TestARefusalDoesNotWaitForAReleaseThatCannotMakeRoom(t *testing.T) {
	c := fake.NewClientBuilder().WithScheme(api.NewScheme()).WithObjects(withUsage(1)).Build()
	p := policy(3)
	// A write may hang longer than the claim waits: only a refusal at once answers it in time.
	r := &Reserver{Client: c, Cache: c, APIReader: c, RefusalFlushDelay: time.Millisecond, FlushTimeout: time.Minute}
	for _, id := range []string{"first", "second"} {
		if res := r.Reserve(context.Background(), request(p, id)); res.Err != nil || len(res.Exceeded) > 0 {
			t.Fatalf("claim %s: %+v", id, res)
		}
	}
	// The leader counts one more claim of the tenant (created before the policy's limit was
	// reached, say): 2 counted and 2 reserved, beyond the limit of 3 by one.
	l := readLedger(t, c)
	l.Status.Counted = []tenancyv1alpha1.LedgerCount{{Tenant: "team-a", Pool: tenancyv1alpha1.OtherPools, Claims: 2}}
	if err := c.Update(context.Background(), l); err != nil {
		t.Fatal(err)
	}
	bc := &blockingClient{Client: c, waiting: make(chan struct{}), release: make(chan struct{})}
	r.Client = bc // from here every write hangs until released
	r.Release(ledgerKey, "first")
	<-bc.waiting // the release is being written, and hangs
	// Even with the release written the tenant is at 3 of 3.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if res := r.Reserve(ctx, request(p, "third")); len(res.Exceeded) != 1 || res.Err != nil {
		t.Errorf("a claim beyond the limit while a release is written: %+v, want refused at once", res)
	}
	close(bc.release)
	waitForLedger(t, c, "the release written and the refusal counted", func(l *tenancyv1alpha1.ClaimLedger) bool {
		return len(l.Status.Reservations) == 1 && len(l.Status.Refusals) == 1 && l.Status.Refusals[0].Count == 1
	})
}

// gatedClient holds the patches whose number (from 0) has a gate, until the gate is closed,
// and says when each is waiting.
type gatedClient struct {
	client.Client
	mu      sync.Mutex
	n       int
	gates   map[int]chan struct{}
	waiting map[int]chan struct{}
}

func newGatedClient(c client.Client, patches ...int) *gatedClient {
	g := &gatedClient{Client: c, gates: map[int]chan struct{}{}, waiting: map[int]chan struct{}{}}
	for _, i := range patches {
		g.gates[i], g.waiting[i] = make(chan struct{}), make(chan struct{})
	}
	return g
}

func (c *gatedClient) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	c.mu.Lock()
	i := c.n
	c.n++
	c.mu.Unlock()
	if gate := c.gates[i]; gate != nil {
		close(c.waiting[i])
		select {
		case <-gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return c.Client.Patch(ctx, obj, patch, opts...)
}

// A claim its batch refuses is answered before the write that counts the refusals of earlier
// batches: a batch that reserves nothing has nothing the claim must wait for.
func TestABatchOfRefusalsDoesNotWaitForTheirCount(t *testing.T) {
	c := fake.NewClientBuilder().WithScheme(api.NewScheme()).WithObjects(withUsage(1)).Build()
	p := policy(2)
	// This replica's cache stays at 1 of 2; another replica takes the last slot.
	stale := &staleCache{Reader: c}
	if err := stale.Get(context.Background(), ledgerKey, &tenancyv1alpha1.ClaimLedger{}); err != nil {
		t.Fatal(err)
	}
	other := &Reserver{Client: c, Cache: c, APIReader: c, RefusalFlushDelay: time.Hour}
	if res := other.Reserve(context.Background(), request(p, "last")); res.Err != nil || len(res.Exceeded) > 0 {
		t.Fatalf("the last slot, on the other replica: %+v, want reserved", res)
	}
	// Patch 0 (the claim's reservation, on the stale copy) conflicts; patch 1 (the refusals'
	// count, after the claim is refused on a fresh read) hangs until released, longer than a
	// claim waits.
	gc := newGatedClient(c, 1)
	r := &Reserver{Client: gc, Cache: stale, APIReader: c, RefusalFlushDelay: time.Hour, FlushTimeout: time.Minute}
	r.mu.Lock()
	r.queue(ledgerKey).refusals = map[string]int64{"team-a": 1} // a refusal decided earlier, not counted yet
	r.mu.Unlock()
	// The claim is not beyond the limit on this replica's newest copy (1 of 2): it joins a
	// batch, which conflicts, reads the ledger with the last slot taken and refuses it.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	refused := make(chan Result, 1)
	go func() { refused <- r.Reserve(ctx, request(p, "refused")) }()
	<-gc.waiting[1] // the batch writes the refusals' count, and hangs
	if res := <-refused; res.Err != nil || len(res.Exceeded) != 1 {
		t.Errorf("a claim its batch refuses while the refusals' count is written: %+v, want refused at once", res)
	}
	close(gc.gates[1])
	waitForLedger(t, c, "the reservation and both refusals counted", func(l *tenancyv1alpha1.ClaimLedger) bool {
		return len(l.Status.Reservations) == 1 && len(l.Status.Refusals) == 1 && l.Status.Refusals[0].Count == 2
	})
}

// A claim that comes while the reservations filling its limit are being written is refused
// at once, not after their write: they count from the moment they are decided. When that
// write is answered, the ledger holds them and the refusal, and nothing beyond the limit.
func TestARefusalCountsTheReservationsBeingWritten(t *testing.T) {
	c := fake.NewClientBuilder().WithScheme(api.NewScheme()).WithObjects(withUsage(1)).Build()
	bc := &blockingClient{Client: c, waiting: make(chan struct{}), release: make(chan struct{})}
	r := &Reserver{Client: bc, Cache: c, APIReader: c, RefusalFlushDelay: time.Millisecond}
	p := policy(2)
	filled := make(chan Result, 1)
	go func() { filled <- r.Reserve(context.Background(), request(p, "last-slot")) }()
	<-bc.waiting // the last slot's reservation is being written, and hangs
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res := r.Reserve(ctx, request(p, "beyond"))
	if res.Err != nil || len(res.Exceeded) != 1 {
		t.Fatalf("a claim while the last slot is written: %+v, want refused at once", res)
	}
	if e := res.Exceeded[0]; e.Used != 2 || e.Max != 2 {
		t.Errorf("refused at %d of %d, want 2 of 2 (the slot being written counted)", e.Used, e.Max)
	}
	close(bc.release)
	if res := <-filled; res.Err != nil || len(res.Exceeded) > 0 {
		t.Fatalf("the last slot: %+v, want reserved", res)
	}
	waitForLedger(t, c, "the last slot reserved and one refusal counted", func(l *tenancyv1alpha1.ClaimLedger) bool {
		return len(l.Status.Reservations) == 1 && len(l.Status.Refusals) == 1 && l.Status.Refusals[0].Count == 1
	})
}

// A refusal counts a reservation being written once, whether or not the copy it reads holds
// it already.
func TestWithReservationsAddsOnlyWhatTheCopyLacks(t *testing.T) {
	l := withUsage(0)
	l.Status.Reservations = []tenancyv1alpha1.Reservation{{ID: "a", Tenant: "team-a"}}
	got := withReservations(l, []tenancyv1alpha1.Reservation{{ID: "a", Tenant: "team-a"}, {ID: "b", Tenant: "team-a"}})
	var ids []string
	for _, x := range got.Status.Reservations {
		ids = append(ids, x.ID)
	}
	if fmt.Sprint(ids) != "[a b]" {
		t.Errorf("reservations %v, want [a b]", ids)
	}
	if len(l.Status.Reservations) != 1 {
		t.Errorf("the copy read was changed: %v", l.Status.Reservations)
	}
}

// A claim a batch refuses because of the reservations before it in the same batch is answered
// before that batch's write, which counts its refusal with them.
func TestARefusalDoesNotWaitForItsBatchsReservations(t *testing.T) {
	c := fake.NewClientBuilder().WithScheme(api.NewScheme()).WithObjects(withUsage(0)).Build()
	p := policy(2)
	// Patch 0 (the first claim's reservation) and patch 1 (the batch of the next two) hang
	// until released, longer than a claim waits.
	gc := newGatedClient(c, 0, 1)
	r := &Reserver{Client: gc, Cache: c, APIReader: c, RefusalFlushDelay: time.Hour, FlushTimeout: time.Minute}
	results := map[string]chan Result{}
	reserve := func(id string, ctx context.Context) {
		ch := make(chan Result, 1)
		results[id] = ch
		go func() { ch <- r.Reserve(ctx, request(p, id)) }()
	}
	reserve("first", context.Background())
	<-gc.waiting[0] // the first reservation is being written: 1 of 2 counted
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// Both fit on the copy with the first (1 of 2): both join the next batch, which takes the
	// last slot for one and refuses the other.
	reserve("second", ctx)
	reserve("third", ctx)
	for queued := false; !queued; {
		time.Sleep(time.Millisecond)
		r.mu.Lock()
		queued = len(r.queues[ledgerKey].pending) == 2
		r.mu.Unlock()
	}
	close(gc.gates[0])
	if res := <-results["first"]; res.Err != nil || len(res.Exceeded) > 0 {
		t.Fatalf("first claim: %+v, want reserved", res)
	}
	<-gc.waiting[1] // the batch of the other two is being written, and hangs
	// Which of the two the batch takes first depends on which was enqueued first; the other
	// is refused, and answered while the write hangs. The one reserved waits for it.
	var refused, reserved string
	select {
	case res := <-results["second"]:
		refused, reserved = "second", "third"
		results["second"] <- res
	case res := <-results["third"]:
		refused, reserved = "third", "second"
		results["third"] <- res
	}
	if res := <-results[refused]; res.Err != nil || len(res.Exceeded) != 1 {
		t.Errorf("the first answer while the batch's write hangs, %s: %+v, want refused", refused, res)
	}
	close(gc.gates[1])
	if res := <-results[reserved]; res.Err != nil || len(res.Exceeded) > 0 {
		t.Fatalf("%s: %+v, want reserved", reserved, res)
	}
	l := readLedger(t, c)
	if len(l.Status.Reservations) != 2 || len(l.Status.Refusals) != 1 || l.Status.Refusals[0].Count != 1 {
		t.Errorf("ledger status %+v: want two reservations and the refusal counted in the same write", l.Status)
	}
}
