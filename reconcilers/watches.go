package reconcilers

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	"github.com/sandgate-dev/sandgate/reconcilers/indexes"
)

// Helpers of the controllers' watches: the queue their event handlers add to, the controller
// of an object as its events compare it, and the map from a template to its pools.

// queue is the work queue of a controller, as its event handlers see it.
type queue = workqueue.TypedRateLimitingInterface[reconcile.Request]

// controllerUID is the UID of obj's controller, "" for none: what an event handler compares to
// see an object change hands.
func controllerUID(obj client.Object) types.UID {
	if ref := metav1.GetControllerOf(obj); ref != nil {
		return ref.UID
	}
	return ""
}

// listPoolsOfTemplate lists the pools built from a template, through the cache index; a
// failure is logged and yields none (for map functions of watches, which cannot fail).
func listPoolsOfTemplate(ctx context.Context, c client.Reader, tmpl client.Object) []extv1beta1.SandboxWarmPool {
	var pools extv1beta1.SandboxWarmPoolList
	if err := c.List(ctx, &pools, client.InNamespace(tmpl.GetNamespace()), client.MatchingFields{indexes.PoolTemplate: tmpl.GetName()}); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing pools of template", "template", klog.KObj(tmpl))
		return nil
	}
	return pools.Items
}
