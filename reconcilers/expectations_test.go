package reconcilers

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
)

func TestExpectations(t *testing.T) {
	clock := clocktesting.NewFakePassiveClock(planNow)
	pool := types.NamespacedName{Namespace: "ns", Name: "p"}
	other := types.NamespacedName{Namespace: "ns", Name: "q"}
	e := newExpectations(clock)
	if !e.satisfied(pool) {
		t.Fatal("an owner without expectations must be satisfied")
	}
	if e.observe(pool, createItem("Sandbox", "p-x")) {
		t.Error("an event nobody expected was reported as expected")
	}
	e.expect(pool, createItem("Sandbox", "p-a"), createItem("Sandbox", "p-b"))
	e.expect(pool, deleteItem("p-old"))
	steps := []struct {
		name          string
		do            func()
		wantSatisfied bool
	}{
		{"nothing seen yet", func() {}, false},
		{"one create seen", func() { e.observe(pool, createItem("Sandbox", "p-a")) }, false},
		{"another owner's events change nothing", func() { e.observe(other, createItem("Sandbox", "p-b")) }, false},
		{"both creates seen", func() { e.observe(pool, createItem("Sandbox", "p-b")) }, false},
		{"the delete seen", func() { e.observe(pool, deleteItem("p-old")) }, true},
		{"a new create expected", func() { e.expect(pool, createItem("Sandbox", "p-c")) }, false},
		{"the cache never shows it: trusted again after the TTL", func() { clock.SetTime(planNow.Add(expectationsTTL + time.Second)) }, true},
	}
	for _, s := range steps {
		s.do()
		if got := e.satisfied(pool); got != s.wantSatisfied {
			t.Errorf("%s: satisfied = %v, want %v", s.name, got, s.wantSatisfied)
		}
	}
	e.expect(other, bindItem("s1"))
	if diff := cmp.Diff([]string{"bind Sandbox/s1"}, e.pending(other)); diff != "" {
		t.Errorf("pending (-want +got):\n%s", diff)
	}
	if !e.observe(other, bindItem("s1")) || e.observe(other, bindItem("s1")) {
		t.Error("an expected event is reported expected exactly once")
	}
	e.expect(other, createItem("Pod", "s1"))
	e.forget(other)
	if !e.satisfied(other) || e.pending(other) != nil {
		t.Error("a forgotten owner expects nothing")
	}
}

// A child's create event is no news to the Sandbox that created it; a Service of the same
// name is another object.
func TestChildCreateExpected(t *testing.T) {
	e := newExpectations(clocktesting.NewFakePassiveClock(planNow))
	owner := types.NamespacedName{Namespace: "ns", Name: "sb"}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "sb"}}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "sb"}}
	e.expect(owner, createOf(pod))
	if e.observe(owner, createOf(svc)) {
		t.Error("a Service event consumed a pod expectation")
	}
	if !e.observe(owner, createOf(pod)) {
		t.Error("the expected pod create was not recognised")
	}
	if e.observe(owner, createOf(pod)) {
		t.Error("an expectation was consumed twice")
	}
}
