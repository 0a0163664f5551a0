package demo

import (
	"io"
	"strings"
	"testing"
	"time"
)

func TestRunRejectsNoClaims(t *testing.T) {
	o := DefaultOptions()
	o.Claims = 0
	// The options are checked before anything starts.
	if err := Run(t.Context(), o, io.Discard, io.Discard); err == nil {
		t.Errorf("Run with --claims 0 succeeded, want an error")
	}
}

func TestRunRejectsStartupTimesWithoutTheRealisticProfile(t *testing.T) {
	o := DefaultOptions()
	o.PodStartup.Median = time.Second
	// The options are checked before anything starts.
	err := Run(t.Context(), o, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "realistic profile only") {
		t.Errorf("Run with a start-up median on the fast profile: got %v, want an error saying it applies to the realistic profile only", err)
	}
}
