// Package webhooks is sandgate's admission. What admission promises, and to whom, is stated
// once: see README.md, section "What admission guarantees" (and docs/threat-model.md). This
// says where each job lives.
//
//   - claim_stamper.go: ClaimWebhook. Its mutating half (SandboxClaim CREATE) checks a new
//     claim and stamps it with the blueprint hash of its pool's template, which it reads
//     through the manager's cache and from the API server when the cache misses it or lacks
//     the version a supplied stamp names; it records the admission time and the creator. Its
//     validating half keeps a claim's spec and its deletion to its creator, the operator and
//     the platform, the stamp to the operator, and the pool and the creator unchanged.
//   - binding_guard.go: BindingGuard, the validating Sandbox webhook. It admits a binding only
//     from the operator, and only of a Sandbox whose content is what the claim was stamped
//     for: a pool member whose own blueprint hashes to the stamp, or a cold start whose
//     blueprint is exactly what the stamped template builds for the claim; a label never
//     vouches for content. It also guards pool membership, the reserved metadata and a bound
//     Sandbox's owner, and that whoever creates or rebuilds a Sandbox may create pods.
//   - sandbox_defaulter.go, template_webhook.go, pool_webhook.go: SandboxDefaulter,
//     TemplateWebhook and PoolWebhook serve the pure rules below for their kinds.
//   - defaulters.go, validators.go: defaulting and validation of every kind as pure functions
//     (Default*, Validate*, RatchetUpdate): same object in, same answer out, no API reads.
//   - authority.go: who may act on whose claims and Sandboxes.
//   - adapters.go: error lists as 422 Invalid, and the 400 of an undecodable value as a 422
//     naming its field.
//   - conversion.go: the conversion webhook (v1alpha1 <-> v1beta1).
//   - setup.go: Setup registers everything with a manager; the paths, failure policies and
//     matchConditions live in its kubebuilder markers, from which `make manifests` writes
//     config/webhook.
package webhooks
