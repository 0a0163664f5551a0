package v1beta1

// Hub marks v1beta1, the storage version, as the Sandbox every other version converts to and
// from (controller-runtime's conversion.Hub).
func (*Sandbox) Hub() {}
