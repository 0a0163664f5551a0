// Package sdk runs the public agent-sandbox Go SDK and sandbox-router, unchanged, against
// sandgate (docs/sdk.md). It is a module of its own, so that sigs.k8s.io/agent-sandbox, which
// it pins, is no dependency of the operator. Its non-test files are the suite's parts: the
// runtime stand-in that answers for each sandbox pod (runtime.go), the router as a process
// (router.go) and the network namespace the suite runs in (netns.go).
package sdk
