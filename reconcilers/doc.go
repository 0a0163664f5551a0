// Package reconcilers runs the lifecycle of the agent-sandbox resources: the Sandbox
// controller (always) and, with extensions enabled, the SandboxTemplate, SandboxWarmPool and
// SandboxClaim controllers.
//
// Every controller here follows the same write discipline, because on a small control plane
// each write is latency taken from every other client:
//   - writes are patches of the fields the controller owns; there is no Update of a shared
//     object, so there is nothing to conflict on;
//   - status is written only when it differs from what the cache shows, or from the
//     controller's own last write of it while the cache does not show that yet (ownstatus.go):
//     a status computed from an older copy would be written twice;
//   - nothing is created, patched or deleted when the cache already shows the wanted state;
//   - watches wake a controller only for changes that can alter what it writes, and its own
//     status writes never wake it again.
//
// Metrics makes the discipline visible: reconciles per controller and per Sandbox until
// Ready, API writes by verb, resource and result, and conflicts.
//
// # Templates, warm pools and claims (Config.Extensions)
//
// The SandboxTemplate controller (sandboxtemplate_controller.go) labels each template with the hash of its
// name and keeps its managed NetworkPolicy. The SandboxWarmPool controller (sandboxwarmpool_controller.go)
// keeps spec.replicas unbound members per pool, created in growing batches behind
// create/delete expectations. The SandboxClaim controller (sandboxclaim_controller.go, sandboxclaim_lifecycle.go)
// serves claims, warm from the warmIndex (sandboxclaim_warmindex.go: the ready, unbound members per
// namespace, pool and template hash, fed by the Sandbox informer, picked in O(1) without a
// List) or cold from the pool's template, and ends them when their lifecycle says so.
//
// The binding protocol is in sandboxclaim_binding.go. In short: the Sandbox is the record of a
// binding; binding is one merge patch of the member with a resourceVersion precondition
// (controller reference to the claim, claim-uid label), then one status patch of the claim,
// then the SandboxAdopted event. A lost race (409) or a refusal of the binding guard (403)
// only means the next member is tried. After a restart a claim finds its Sandbox through the
// indexes.SandboxClaimUID cache index. Pool refill and the pod's labels follow through the
// pool's and the Sandbox controller's own watches, off the claim's path.
//
// Claim startup latency is observed into the contract's histograms
// (agent_sandbox_claim_startup_latency_ms from the claim's webhook-first-observed-at
// annotation, agent_sandbox_claim_controller_startup_latency_ms from the moment this process
// first saw the claim, kept in memory rather than written to the claim).
package reconcilers
