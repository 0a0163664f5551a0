package v1beta1

// Hub marks v1beta1, the storage version, as the SandboxTemplate every other version converts
// to and from (controller-runtime's conversion.Hub).
func (*SandboxTemplate) Hub() {}

// Hub marks v1beta1 as the SandboxWarmPool every other version converts to and from.
func (*SandboxWarmPool) Hub() {}

// Hub marks v1beta1 as the SandboxClaim every other version converts to and from.
func (*SandboxClaim) Hub() {}
