// Package webhooks is sandgate's admission: what it enforces holds for every write that reaches
// the API server, whatever a controller's cache says.
//
//   - Claim stamping (mutating, SandboxClaim CREATE): the claim gets the blueprint hash of its
//     pool's template, read from the API server, as annotation agents.x-k8s.io/sandbox-template-hash,
//     and its admission time as agents.x-k8s.io/webhook-first-observed-at. A user-supplied
//     stamp must equal the computed one; afterwards only the operator may change it.
//   - The binding guard (validating, Sandbox CREATE and UPDATE): a change that binds a Sandbox to
//     a SandboxClaim (controller ownerReference to the claim, or the claim-uid label) is admitted
//     only from the operator's identity, only for a Sandbox not bound to another claim, and only
//     when the Sandbox's template-hash label equals the claim's stamp. Denials are 403 and name
//     the Sandbox, the claim and both hashes.
//   - Defaulting and validation of every kind: the rules are pure functions (Default*, Validate*)
//     returning field.ErrorList; the webhooks wrap them as 422 Invalid.
//
// Setup registers everything with a manager; the paths and failure policies live in the
// kubebuilder markers of setup.go, from which `make manifests` writes config/webhook.
package webhooks
