// Package reconcilers runs the lifecycle of the agent-sandbox resources: the Sandbox
// controller (always) and, with extensions enabled, the SandboxTemplate, SandboxWarmPool and
// SandboxClaim controllers.
//
// Every controller here follows the same write discipline, because on a small control plane
// each write is latency taken from every other client:
//   - writes are patches of the fields the controller owns; there is no Update of a shared
//     object, so there is nothing to conflict on;
//   - status is written only when it differs from what the cache shows;
//   - nothing is created, patched or deleted when the cache already shows the wanted state;
//   - watches wake a controller only for changes that can alter what it writes, and its own
//     status writes never wake it again.
//
// Metrics makes the discipline visible: reconciles per controller and per Sandbox until
// Ready, API writes by verb, resource and result, and conflicts.
package reconcilers
