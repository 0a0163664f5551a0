// Package performance is sandgate's load generator, what test/cmd/sandgate-bench parses flags
// for (Options.AddFlags). Run creates a SandboxTemplate and a SandboxWarmPool, waits for the
// pool to be full and Ready, fires bursts of SandboxClaims at a given rate, watches them to
// Ready and reports startup latency (client and server view), warm hits and cold starts, API
// requests by verb, resource and code (409s singled out), reconciles, and the operator's CPU
// and memory. By default it starts a local control plane with simulated nodes and the operator
// built from ./cmd/sandgate as a child process (test/env); Options.Kubeconfig targets an
// existing cluster instead, and Options.OperatorCmd runs any operator binary, so the same
// harness measures another implementation of the API. Everything talks to 127.0.0.1 only and
// stops by itself, also when the context ends.
//
// With Options.Scenarios, Run runs the canonical scenarios of `make bench` (scenarios.go),
// each with its floor, and writes docs/performance.md from their results. README.md beside
// this file lists the scenarios and where each one's code is.
//
//   - load: one load run (template, pool, bursts of claims, measurements), its floors, and the
//     runners of the longer scenarios (sustained, scale);
//   - stats: percentiles of latency samples;
//   - trace: the trace scenario's demand, a seeded day compressed to minutes, and the public
//     HPA recipe's algorithm emulated, both without a cluster;
//   - report: the result of a run as JSON, a human table and docs/performance.md.
//
// The packages measure; they never assert timings, so nothing here fails on a slow machine
// except a claim that does not become Ready at all.
package performance
