package operator

import (
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestPprofHandlersFollowTheFlags(t *testing.T) {
	paths := func(o Options) []string {
		var out []string
		for p := range pprofHandlers(o) {
			out = append(out, p)
		}
		sort.Strings(out)
		return out
	}
	for name, tc := range map[string]struct {
		opts Options
		want []string
	}{
		"off": {Options{}, nil},
		"cpu": {Options{EnablePprof: true}, []string{"/debug/pprof/profile"}},
		"debug": {Options{EnablePprofDebug: true}, []string{
			"/debug/pprof/", "/debug/pprof/allocs", "/debug/pprof/block", "/debug/pprof/cmdline",
			"/debug/pprof/goroutine", "/debug/pprof/heap", "/debug/pprof/mutex", "/debug/pprof/profile",
			"/debug/pprof/symbol", "/debug/pprof/threadcreate", "/debug/pprof/trace",
		}},
	} {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, paths(tc.opts)); diff != "" {
				t.Errorf("paths (-want +got):\n%s", diff)
			}
		})
	}
	if got := metricsServerOptions(Options{EnablePprof: true}).ExtraHandlers; len(got) != 1 {
		t.Errorf("metrics server extra handlers = %v, want the CPU profile", got)
	}
}
