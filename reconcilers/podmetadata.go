package reconcilers

import (
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
)

// A Sandbox's pod carries metadata derived from the Sandbox (podMetadataPatch): the binding's
// labels that route it (claim-uid, and the warm-pool label it loses), the pool's eviction mark,
// the template's pod metadata. Two writers keep it: the claim controller, on the claim's path,
// from the Sandbox its bind patch answered; the Sandbox controller, off the path, from its
// cache. Each computes the patch from its own view of the Sandbox and of the pod, and the two
// informers lag independently: a Sandbox controller whose cache still showed the unbound
// member while its pod cache already showed the claim path's route write computed "remove
// claim-uid, put the warm-pool label back" and un-routed a claim reported Ready (a claim of the
// SDK burst whose pod lacked claim-uid, a Ready claim the router could not find).
//
// So no writer acts on a view of the Sandbox older than the one the pod's metadata was last
// written from. Every pod metadata write records, in the pod's annotationPodMetadataFrom,
// the resourceVersion of the Sandbox view it was computed from (resourceVersions of one
// resource are ordered: k8s.io/apimachinery/pkg/util/resourceversion), and remembers it in
// podMetadataViews until the pod cache shows it. A writer whose Sandbox is older than either
// writes nothing and looks again when its cache has caught up; writes to one pod are
// serialized, so two views never race each other to the API server.

// annotationPodMetadataFrom (on a Sandbox's pod) is the resourceVersion of the Sandbox view
// its metadata was last written from.
const annotationPodMetadataFrom = agentsv1beta1.SandgateDomain + "metadata-from"

// podViewTTL is how long a write is remembered in memory: far longer than a cache takes to
// show it, after which the pod's annotation says the same.
const podViewTTL = 5 * time.Minute

// podMetadataViews is what this process last wrote to each pod's metadata, shared by every
// writer of pod metadata. The zero value is not usable: newPodMetadataViews.
type podMetadataViews struct {
	clock clock.PassiveClock

	mu      sync.Mutex
	m       map[types.UID]*podView
	sweepAt time.Time
}

// podView serializes the writes to one pod and remembers the last.
type podView struct {
	mu    sync.Mutex
	rv    string // the Sandbox's resourceVersion the last write was computed from
	podRV string // the pod's resourceVersion that write made
	at    time.Time
}

func newPodMetadataViews(clk clock.PassiveClock) *podMetadataViews {
	return &podMetadataViews{clock: clk, m: map[types.UID]*podView{}}
}

// view returns the pod's entry, locked; the caller unlocks it. Entries not written for
// podViewTTL are dropped now and then.
func (v *podMetadataViews) view(uid types.UID) *podView {
	now := v.clock.Now()
	v.mu.Lock()
	if now.After(v.sweepAt) {
		for k, e := range v.m {
			if e.mu.TryLock() {
				if now.Sub(e.at) > podViewTTL {
					delete(v.m, k)
				}
				e.mu.Unlock()
			}
		}
		v.sweepAt = now.Add(podViewTTL)
	}
	e, ok := v.m[uid]
	if !ok {
		e = &podView{at: now}
		v.m[uid] = e
	}
	v.mu.Unlock()
	e.mu.Lock()
	return e
}

// podMetadataOutcome is what syncPodMetadata did.
type podMetadataOutcome int

const (
	// podMetadataCurrent: the pod has, or was just written, the metadata sb wants.
	podMetadataCurrent podMetadataOutcome = iota
	// podMetadataWritten: a patch was sent and applied.
	podMetadataWritten
	// podMetadataStaleView: sb is older than the view the pod was last written from;
	// nothing was written. Look again when the cache shows the newer Sandbox.
	podMetadataStaleView
	// podMetadataInFlight: this process wrote what sb wants, and the pod as read predates
	// that write: nothing to write, but the pod cache has not shown it yet.
	podMetadataInFlight
)

// syncPodMetadata brings pod's metadata to what sb wants (podMetadataPatch), unless sb is an
// older view of the Sandbox than the one the pod's metadata was last written from. podRV is
// the pod's resourceVersion a cache must show for the pod to carry what sb wants, when it may
// not yet (podMetadataWritten, podMetadataInFlight).
func (v *podMetadataViews) syncPodMetadata(ctx context.Context, c client.Client, sb *agentsv1beta1.Sandbox, pod *corev1.Pod) (outcome podMetadataOutcome, podRV string, err error) {
	e := v.view(pod.UID)
	defer e.mu.Unlock()
	recorded := pod.Annotations[annotationPodMetadataFrom]
	if e.rv != "" && !newerVersion(e.rv, recorded) {
		e.rv = "" // the pod as read shows this process's last write, or a later one
	}
	if newerVersion(recorded, sb.ResourceVersion) || newerVersion(e.rv, sb.ResourceVersion) {
		return podMetadataStaleView, "", nil
	}
	if e.rv != "" && e.rv == sb.ResourceVersion {
		// Written from this very view; the pod as read predates that write.
		return podMetadataInFlight, e.podRV, nil
	}
	p := podMetadataPatch(sb, pod)
	if p.empty() {
		return podMetadataCurrent, "", nil
	}
	if rv := sb.ResourceVersion; rv != "" && rv != recorded {
		p.setAnnotation(annotationPodMetadataFrom, &rv)
	}
	if err := patchMetadata(ctx, c, pod, p); err != nil {
		return podMetadataCurrent, "", err
	}
	e.rv, e.podRV, e.at = sb.ResourceVersion, pod.ResourceVersion, v.clock.Now()
	return podMetadataWritten, pod.ResourceVersion, nil
}

// newerVersion reports whether resourceVersion a is later than b; false when either is not
// a resourceVersion (empty, or written by hand).
func newerVersion(a, b string) bool {
	cmp, err := resourceversion.CompareResourceVersion(a, b)
	return err == nil && cmp > 0
}
