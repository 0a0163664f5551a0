package operator

import (
	"net/http"
	"net/http/pprof"
	"runtime"
	"sync"

	"github.com/felixge/fgprof"
)

// pprofHandlers are the profiling endpoints the public controller's --enable-pprof and
// --enable-pprof-debug add to its metrics endpoint, at the same paths, so that the tooling
// written for it works: the CPU profile alone, or (debug) every pprof endpoint, which can
// expose the command line and memory contents and costs sampling overhead. They sit behind
// the metrics endpoint's authentication and authorization when SecureMetrics is on (every
// handler of that server is filtered). Debug adds /debug/fgprof too, the public controller's
// wall-clock profile (on- and off-CPU time), one at a time: a second request while one runs
// is answered 500, as a concurrent CPU profile is. With debug it sets the process's block and mutex profile rates; nil without either flag.
func pprofHandlers(opts Options) map[string]http.Handler {
	if !opts.EnablePprof && !opts.EnablePprofDebug {
		return nil
	}
	h := map[string]http.Handler{"/debug/pprof/profile": http.HandlerFunc(pprof.Profile)}
	if !opts.EnablePprofDebug {
		return h
	}
	runtime.SetBlockProfileRate(max(opts.PprofBlockProfileRate, 0))
	runtime.SetMutexProfileFraction(max(opts.PprofMutexProfileFraction, 0))
	h["/debug/pprof/"] = http.HandlerFunc(pprof.Index)
	h["/debug/pprof/cmdline"] = http.HandlerFunc(pprof.Cmdline)
	h["/debug/pprof/symbol"] = http.HandlerFunc(pprof.Symbol)
	h["/debug/pprof/trace"] = http.HandlerFunc(pprof.Trace)
	for _, name := range []string{"heap", "goroutine", "allocs", "block", "mutex", "threadcreate"} {
		h["/debug/pprof/"+name] = pprof.Handler(name)
	}
	h["/debug/fgprof"] = oneAtATime(fgprof.Handler(), "fgprof profiling already in use")
	return h
}

// oneAtATime serves h to one request at a time and answers 500 with busy to the others.
func oneAtATime(h http.Handler, busy string) http.Handler {
	var mu sync.Mutex
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !mu.TryLock() {
			http.Error(w, busy, http.StatusInternalServerError)
			return
		}
		defer mu.Unlock()
		h.ServeHTTP(w, r)
	})
}
