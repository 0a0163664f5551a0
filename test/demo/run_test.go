package demo

import (
	"io"
	"testing"
)

func TestRunRejectsNoClaims(t *testing.T) {
	o := DefaultOptions()
	o.Claims = 0
	// The options are checked before anything starts.
	if err := Run(t.Context(), o, io.Discard, io.Discard); err == nil {
		t.Errorf("Run with --claims 0 succeeded, want an error")
	}
}
