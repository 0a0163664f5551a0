package reconcilers

// The manager's ClusterRole (config/rbac/role.yaml) is generated from these markers by
// `make manifests`. No verb "update" on shared objects: every write is a patch.

// +kubebuilder:rbac:groups=agents.x-k8s.io,resources=sandboxes,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=agents.x-k8s.io,resources=sandboxes/status,verbs=get;patch
// +kubebuilder:rbac:groups=agents.x-k8s.io,resources=sandboxes/finalizers,verbs=update
// +kubebuilder:rbac:groups=extensions.agents.x-k8s.io,resources=sandboxtemplates,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=extensions.agents.x-k8s.io,resources=sandboxwarmpools,verbs=get;list;watch
// +kubebuilder:rbac:groups=extensions.agents.x-k8s.io,resources=sandboxwarmpools/status,verbs=get;patch
// Controller references with blockOwnerDeletion (pool → member, template → NetworkPolicy) need
// update on the owner's finalizers where OwnerReferencesPermissionEnforcement is on.
// +kubebuilder:rbac:groups=extensions.agents.x-k8s.io,resources=sandboxwarmpools/finalizers;sandboxtemplates/finalizers,verbs=update
// +kubebuilder:rbac:groups=extensions.agents.x-k8s.io,resources=sandboxclaims,verbs=get;list;watch;patch;delete
// +kubebuilder:rbac:groups=extensions.agents.x-k8s.io,resources=sandboxclaims/status,verbs=get;patch
// +kubebuilder:rbac:groups=extensions.agents.x-k8s.io,resources=sandboxclaims/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=pods;services,verbs=get;list;watch;create;patch;delete
// PVCs outlive suspension and go with their Sandbox through garbage collection: never deleted.
// +kubebuilder:rbac:groups="",resources=persistentvolumeclaims,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups=networking.k8s.io,resources=networkpolicies,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// The claim label allowlist: the operator watches one ConfigMap (agent-sandbox-config) in its
// namespace; its cache holds no other (internal/operator.configMapCache).
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch
// The warm pool autoscaler reads its own kind and writes its status, sets pools' replicas
// through their scale subresource only (never their spec), and reads the HPAs it must not
// fight.
// +kubebuilder:rbac:groups=autoscaling.sandgate.dev,resources=warmpoolautoscalers,verbs=get;list;watch
// +kubebuilder:rbac:groups=autoscaling.sandgate.dev,resources=warmpoolautoscalers/status,verbs=get;patch
// +kubebuilder:rbac:groups=extensions.agents.x-k8s.io,resources=sandboxwarmpools/scale,verbs=get;patch
// +kubebuilder:rbac:groups=autoscaling,resources=horizontalpodautoscalers,verbs=get;list;watch
