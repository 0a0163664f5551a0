package soak

import (
	"reflect"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
)

// The schedule injects every kind the requested number of times, in an order and with
// pauses and holds the seed alone decides, within the configured bounds.
func TestScheduleIsTheSeedsAndCoversEveryKind(t *testing.T) {
	o := DefaultOptions()
	plan := o.schedule()
	if len(plan) != len(FaultKinds)*o.FaultsPerKind {
		t.Fatalf("%d faults planned, want %d", len(plan), len(FaultKinds)*o.FaultsPerKind)
	}
	count := map[string]int{}
	for _, p := range plan {
		count[p.kind]++
		if p.pause < o.PauseMin || p.pause > o.PauseMax {
			t.Errorf("%s: pause %s outside %s-%s", p.kind, p.pause, o.PauseMin, o.PauseMax)
		}
		switch p.kind {
		case FaultLeaderFreeze:
			if p.hold < time.Second || p.hold > 5*time.Second {
				t.Errorf("a leader stays frozen %s after the take-over, want 1-5s", p.hold)
			}
		case FaultWebhookDown, FaultSlowAPI:
			if p.hold < o.HoldMin || p.hold > o.HoldMax {
				t.Errorf("%s: hold %s outside %s-%s", p.kind, p.hold, o.HoldMin, o.HoldMax)
			}
		}
	}
	for _, k := range FaultKinds {
		if count[k] != o.FaultsPerKind {
			t.Errorf("%s planned %d times, want %d", k, count[k], o.FaultsPerKind)
		}
	}
	if again := o.schedule(); !reflect.DeepEqual(plan, again) {
		t.Error("the same seed planned two different schedules")
	}
	o.Seed++
	if other := o.schedule(); reflect.DeepEqual(plan, other) {
		t.Error("another seed planned the same schedule")
	}
	o.Faults = []string{FaultPodLoss}
	if only := o.schedule(); len(only) != o.FaultsPerKind || only[0].kind != FaultPodLoss {
		t.Errorf("--faults pod-loss planned %v", only)
	}
}

func TestOptionsAreValidated(t *testing.T) {
	withArg := DefaultOptions()
	withArg.OperatorArgs = []string{"--claim-admission-max-wait=1s"}
	for _, o := range []Options{DefaultOptions(), ShortOptions(), withArg} {
		if err := o.Validate(); err != nil {
			t.Errorf("%+v refused: %v", o, err)
		}
	}
	bad := DefaultOptions()
	bad.Rate = 0
	bad.Faults = []string{"meteor-strike"}
	bad.LifetimeMax = time.Second
	bad.PodStartup.Median = time.Second // on the fast profile
	bad.OperatorArgs = []string{"--claim-admission-max-wait=1s", "claim-admission-max-wait=1s"}
	err := bad.Validate()
	for _, want := range []string{"rate", `unknown fault "meteor-strike"`, "lifetime", "realistic profile only", `operator argument 2 "claim-admission-max-wait=1s"`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not mention %q", err, want)
		}
	}
}

func TestRecoveryHistogramCountsEveryFaultInItsBucket(t *testing.T) {
	got := histogram(map[string][]time.Duration{
		FaultLeaderKill: {0, 900 * time.Millisecond, 17 * time.Second},
		FaultSlowAPI:    {5 * time.Second, 3 * time.Minute},
	})
	want := "≤ 1s: 2, ≤ 5s: 1, ≤ 10s: 0, ≤ 30s: 1, ≤ 1m0s: 0, ≤ 2m0s: 0, > 2m0s: 1"
	if got != want {
		t.Errorf("histogram %q, want %q", got, want)
	}
}

// The binding watch reports a claim that controls two live Sandboxes at once, and not one
// whose Sandbox was replaced.
func TestBindingWatchReportsAClaimWithTwoSandboxes(t *testing.T) {
	w := &bindingWatch{bound: map[types.UID]map[string]bool{}, byName: map[string]types.UID{}, reported: map[types.UID]bool{}}
	owned := func(name string, claim types.UID) *agentsv1beta1.Sandbox {
		return &agentsv1beta1.Sandbox{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, OwnerReferences: []metav1.OwnerReference{{
			APIVersion: extv1beta1.GroupVersion.String(), Kind: "SandboxClaim", Name: "c-" + string(claim), UID: claim, Controller: ptr.To(true),
		}}}}
	}
	w.observe(owned("a", "1"), false)
	w.observe(owned("a", "1"), true) // replaced: the first one went first
	w.observe(owned("b", "1"), false)
	w.observe(owned("m1", "2"), false)
	w.observe(owned("cold", "2"), false) // bound to two at once
	w.observe(owned("cold", "2"), false)
	if len(w.violations) != 1 || !strings.Contains(w.violations[0].Detail, "ns/cold and ns/m1") {
		t.Fatalf("violations %v, want one for claim 2", w.violations)
	}
}
