package operator

import (
	"net/http"
	"net/http/httptest"
	"sort"
	"sync"
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
			"/debug/fgprof", "/debug/pprof/", "/debug/pprof/allocs", "/debug/pprof/block", "/debug/pprof/cmdline",
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

// One fgprof profile at a time: a second request while one runs is refused, as a second CPU
// profile is.
func TestOneAtATime(t *testing.T) {
	started, release := make(chan struct{}), make(chan struct{})
	h := oneAtATime(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		close(started)
		<-release
		w.WriteHeader(http.StatusOK)
	}), "busy")
	var wg sync.WaitGroup
	first := httptest.NewRecorder()
	wg.Add(1)
	go func() { defer wg.Done(); h.ServeHTTP(first, httptest.NewRequest(http.MethodGet, "/debug/fgprof", nil)) }()
	<-started
	second := httptest.NewRecorder()
	h.ServeHTTP(second, httptest.NewRequest(http.MethodGet, "/debug/fgprof", nil))
	close(release)
	wg.Wait()
	if first.Code != http.StatusOK || second.Code != http.StatusInternalServerError {
		t.Errorf("codes = %d, %d; want 200 for the first profile and 500 for the one asked meanwhile", first.Code, second.Code)
	}
}
