// Package reconcilers runs the lifecycle of the agent-sandbox resources: the Sandbox
// controller (always) and, with extensions enabled, the SandboxTemplate, SandboxWarmPool,
// SandboxClaim and ClaimPolicy controllers; and sandgate's own WarmPoolAutoscaler controller,
// which sets pools' replicas through their /scale subresource. For what admission guarantees,
// see README.md#what-admission-guarantees.
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
// # Where things live
//
// Each controller is in <kind>_controller.go, and only its own files carry its prefix:
//   - sandbox_controller.go: the Sandbox controller (Reconcile, expiry, status);
//     sandbox_children.go its Pod, PVCs and Service, sandbox_adoption.go when a child it did
//     not build may be adopted, sandbox_podloss.go what it reports when its pod is lost
//     (deleted, evicted, replaced), sandbox_events.go its pod and Service watches.
//   - sandboxtemplate_controller.go: the SandboxTemplate controller, which labels each
//     template with the hash of its name and keeps its managed NetworkPolicy.
//   - sandboxwarmpool_controller.go: the SandboxWarmPool controller, which keeps
//     spec.replicas unbound members per pool, created in growing batches behind
//     create/delete expectations; sandboxwarmpool_refill.go when (and how fast) it refills
//     what claims took, sandboxwarmpool_readiness.go the public controller's warm pool
//     settings and what it does with members that do not become Ready (replaced, or held
//     when unschedulable), sandboxwarmpool_events.go its member watch.
//   - sandboxclaim_controller.go: the SandboxClaim controller. One reconcile reads down its
//     files in call order, each once: sandboxclaim_controller.go, sandboxclaim_lifecycle.go
//     (expiry), sandboxclaim_status.go (what the claim reports), sandboxclaim_binding.go
//     (serving an unbound claim, warm or cold: the binding protocol is stated there),
//     sandboxclaim_metrics.go (startup latency). sandboxclaim_events.go holds its watches,
//     sandboxclaim_warmindex.go the index of unbound members a claim picks from (fed by the
//     Sandbox informer, picked without a List: a ready one in O(log nodes), spread over
//     nodes, else one that is starting), sandboxclaim_warmshare.go the ClaimPolicies' warm
//     shares, decided when a claim is served.
//   - claimpolicy_controller.go: the ClaimPolicy controller, which counts each policy's claims
//     into the ledgers admission reserves in (docs/fair-share.md); claimpolicy_status.go the
//     policy's usage, metering and conditions, claimpolicy_metering.go what the claim
//     controller tells it of what it served.
//   - warmpoolautoscaler_controller.go: the WarmPoolAutoscaler controller (Reconcile, the
//     /scale write, status and conditions); warmpoolautoscaler_desired.go what it decides
//     (pure: recommendation, stabilization, pacing), warmpoolautoscaler_conflict.go the other
//     writers of a pool's replicas it does not fight, warmpoolautoscaler_events.go what wakes
//     it and feeds its estimate (internal/demand), warmpoolautoscaler_metrics.go its series.
//
// What more than one controller uses is in files of its own: setup.go (Setup, Config),
// queue.go (every controller's queue: first in, first out within a priority, a claim's path
// before the work nobody waits on), requeue.go (quiet, requeueWithin), watches.go (the queue
// type, controllerUID, listPoolsOfTemplate), objects.go (sandboxKind, replicas,
// sandboxFromTemplate), poolactivity.go (when claims last arrived, which wait for a member),
// expectations.go, ownstatus.go, patch.go, conditions.go, metrics.go and rbac.go. The cache
// indexes are package indexes.
package reconcilers
