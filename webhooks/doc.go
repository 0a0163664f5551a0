// Package webhooks is sandgate's admission. What it promises, to whom, is stated once, in the
// README's "What admission guarantees" (and docs/threat-model.md); this says where each part
// lives.
//
//   - claim.go: the claim stamper (mutating, SandboxClaim CREATE) and the claim validator
//     (UPDATE, and DELETE by anyone but the claim's creator). The stamper reads the pool and
//     template through the manager's cache, falling back to the API server, and records the
//     stamp, the admission time and the creator.
//   - sandbox.go: the binding guard (validating, Sandbox CREATE, UPDATE and DELETE of a bound
//     Sandbox) and the Sandbox defaulter. The guard decides from what a Sandbox is (the hash
//     of its own blueprint), never from its labels, and keeps pool membership, the operator's
//     metadata and a claim's Sandbox to those Authority allows.
//   - authority.go: who may act on whose claims and Sandboxes.
//   - validation.go, defaults.go, kinds.go, register.go: defaulting and validation of every
//     kind as pure functions (Default*, Validate*) returning field.ErrorList, wrapped as 422.
//   - conversion.go: the v1alpha1 conversion webhook.
//
// Setup registers everything with a manager; the paths, failure policies and matchConditions
// live in the kubebuilder markers of setup.go, from which `make manifests` writes
// config/webhook.
package webhooks
