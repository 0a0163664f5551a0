package load

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// Two Ready claims naming one Sandbox at the same time are a double binding; one after the
// other, the second after the first was deleted, are a member name drawn again.
func TestHeldTwiceCountsOnlyOverlappingClaims(t *testing.T) {
	at := func(s int) time.Time { return time.Date(2026, 11, 28, 0, 0, s, 0, time.UTC) }
	held := []heldSandbox{
		{sandbox: "pool-abcde", from: at(1), until: at(5)},
		{sandbox: "pool-abcde", from: at(9), until: at(12)}, // the name drawn again after the first's deletion
		{sandbox: "pool-fghjk", from: at(2), until: at(8)},
		{sandbox: "pool-fghjk", from: at(7), until: at(9)}, // Ready while the first still held it
		{sandbox: "pool-lmnpq", from: at(3)},               // never deleted
		{sandbox: "pool-lmnpq", from: at(20), until: at(21)},
		{sandbox: "claim-x", from: at(4), until: at(6)},
	}
	got := heldTwice(held)
	if len(got) != 2 || !strings.HasPrefix(got[0], "Sandbox pool-fghjk ") || !strings.HasPrefix(got[1], "Sandbox pool-lmnpq ") {
		t.Errorf("held twice: %q, want pool-fghjk and pool-lmnpq", got)
	}
	if got := heldTwice(held[:2]); len(got) != 0 {
		t.Errorf("a name drawn again after its Sandbox's claim was deleted: held twice %q, want none", got)
	}
}

// A Sandbox the cache shows bound to one claim and later to another was bound again, whatever
// the names; a Sandbox seen bound to one claim again and again is not.
func TestNoteBindingCountsASandboxBoundAgain(t *testing.T) {
	s := &sustained{boundTo: map[types.UID]string{}, rebound: map[types.UID]bool{}}
	s.noteBinding("sb-1", "")        // a pool member, unbound
	s.noteBinding("sb-1", "claim-a") // bound
	s.noteBinding("sb-1", "claim-a") // its status written
	s.noteBinding("sb-2", "claim-b") // a cold Sandbox
	s.noteBinding("sb-1", "claim-c") // bound again
	s.noteBinding("sb-1", "claim-d") // and again: one Sandbox all the same
	if len(s.rebound) != 1 || !s.rebound["sb-1"] {
		t.Errorf("rebound %v, want sb-1 only", s.rebound)
	}
}
