// Package webhooks is sandgate's admission. What admission promises, and to whom, is stated
// once: see README.md, section "What admission guarantees" (and docs/threat-model.md). This
// says where each job lives.
//
//   - claim_stamper.go: ClaimWebhook, the SandboxClaim webhook. Its mutating half checks a
//     new claim and stamps it, reading templates through the manager's cache and from the API
//     server only on a miss, and records its arrival for the warm pool autoscaler (in memory);
//     its validating half guards later changes and deletion of a claim.
//   - binding_guard.go: BindingGuard, the validating Sandbox webhook: bindings, pool
//     membership, reserved metadata, a bound Sandbox's owner, and who may create or rebuild a
//     Sandbox.
//   - claimpolicy_admission.go: ClaimPolicies, the claim stamper's last step: a new claim
//     against the ClaimPolicies of its namespace, reserved in their ledgers or refused with 429.
//   - sandbox_defaulter.go, template_webhook.go, pool_webhook.go, claimpolicy_webhook.go:
//     SandboxDefaulter, TemplateWebhook, PoolWebhook and ClaimPolicyWebhook serve the pure
//     rules of their kinds (ClaimPolicies' are in claimpolicy_webhook.go).
//   - autoscaler_webhook.go: AutoscalerWebhook defaults and validates WarmPoolAutoscalers
//     (DefaultAutoscaler, ValidateAutoscaler, pure as the others).
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
