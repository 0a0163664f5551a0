// Package bench is the load generator that cmd/sandgate-bench parses flags for: Run makes one
// load run, or runs the canonical scenarios of `make bench` (scenarios.go), each with its
// floor, and writes docs/performance.md from their results. Its subpackages are what it and
// the demo (test/demo, cmd/sandgate-demo) are built from; the local control plane they start
// is test/controlplane. They sit under test/ because only development commands and tests use
// them, never the shipped operator, and they never import "testing" (make verify-deps checks
// both).
//
//   - stats: percentiles of latency samples;
//   - scrape: Prometheus text scraping and the deltas between two scrapes;
//   - proc: CPU seconds and peak memory of a process tree from /proc;
//   - harness: a local control plane with the operator running as a subprocess;
//   - load: one load run (template, pool, bursts of claims, measurements);
//   - report: the result of a run as JSON, a human table and docs/performance.md.
//
// The packages measure; they never assert timings, so nothing here fails on a slow machine
// except a claim that does not become Ready at all.
package bench
