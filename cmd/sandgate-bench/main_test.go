package main

import (
	"io"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseFlagsSerial(t *testing.T) {
	o, err := parseFlags([]string{"--serial", "50", "--burst-size", "7", "--warmpool-size", "60"}, io.Discard)
	if err != nil {
		t.Fatalf("parseFlags: %v", err)
	}
	want := []int{1, 50, 60}
	if diff := cmp.Diff(want, []int{o.BurstSize, o.TotalBursts, o.WarmPoolSize}); diff != "" {
		t.Errorf("--serial 50: burst size, bursts, pool mismatch (-want +got):\n%s", diff)
	}
}

func TestParseFlagsRejectsArguments(t *testing.T) {
	if _, err := parseFlags([]string{"extra"}, io.Discard); err == nil {
		t.Errorf("parseFlags with a stray positional argument succeeded, want an error")
	}
}

func TestParseFlagsDefaultsValid(t *testing.T) {
	o, err := parseFlags(nil, io.Discard)
	if err != nil {
		t.Fatalf("parseFlags: %v", err)
	}
	if err := o.Validate(); err != nil {
		t.Errorf("the defaults do not validate: %v", err)
	}
}
