package operator

import (
	"net/http"
	"net/http/pprof"
	"runtime"
)

// pprofHandlers are the profiling endpoints the public controller's --enable-pprof and
// --enable-pprof-debug add to its metrics endpoint, at the same paths, so that the tooling
// written for it works: the CPU profile alone, or (debug) every pprof endpoint, which can
// expose the command line and memory contents and costs sampling overhead. They sit behind
// the metrics endpoint's authentication and authorization when SecureMetrics is on (every
// handler of that server is filtered). The public controller's /debug/fgprof is not served.
// With debug it sets the process's block and mutex profile rates; nil without either flag.
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
	return h
}
