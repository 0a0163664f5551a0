package main

import (
	"flag"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sandgate-dev/sandgate/internal/operator"
)

// Without flags the command runs the operator with its production defaults.
func TestFlagDefaultsAreTheOperatorDefaults(t *testing.T) {
	var opts options
	fs := flag.NewFlagSet("sandgate", flag.ContinueOnError)
	opts.bind(fs)
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	if err := opts.validate(); err != nil {
		t.Fatalf("default flags invalid: %v", err)
	}
	if diff := cmp.Diff(operator.DefaultOptions(), opts.operatorOptions()); diff != "" {
		t.Errorf("flag defaults differ from operator.DefaultOptions (-want +got):\n%s", diff)
	}
}

func TestFlagsReachTheOperator(t *testing.T) {
	var opts options
	fs := flag.NewFlagSet("sandgate", flag.ContinueOnError)
	opts.bind(fs)
	if err := fs.Parse([]string{"--sandbox-claim-concurrent-workers=7", "--restamp=false", "--platform-groups=a,b", "--extensions"}); err != nil {
		t.Fatal(err)
	}
	got := opts.operatorOptions()
	if got.ClaimWorkers != 7 || !got.RefuseRestamp || !got.Extensions || !cmp.Equal(got.PlatformGroups, []string{"a", "b"}) {
		t.Errorf("operator options %+v do not follow the flags", got)
	}
}
