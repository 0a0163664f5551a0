package reconcilers

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	autoscalingv1alpha1 "github.com/sandgate-dev/sandgate/api/autoscaling/v1alpha1"
	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	"github.com/sandgate-dev/sandgate/api/policy"
	"github.com/sandgate-dev/sandgate/reconcilers/indexes"
)

// The autoscaler refuses to fight another writer of its pool's replicas. Two writers that
// each set the replicas they want make the pool oscillate, and every swing creates or deletes
// members. Three kinds of writer are recognized:
//
//   - a HorizontalPodAutoscaler (autoscaling/v2) whose scaleTargetRef is the pool (KEDA's
//     ScaledObjects work through one): the autoscaler stands down while it exists;
//   - another WarmPoolAutoscaler of the same pool: the one created first scales it, the
//     others stand down while it exists;
//   - any other writer of spec.replicas (kubectl scale, a script, a GitOps tool applying a
//     manifest that sets replicas): the pool's managedFields name the field manager that
//     last set the field. The autoscaler's own writes take the field, so once it has scaled
//     the pool, another manager owning it wrote after it: the autoscaler stands down for one
//     scale-down stabilization window (at least minConflictHold) after that write, then takes
//     the field back. A manual `kubectl scale` is honoured for that long; a writer that keeps
//     writing is seen again and keeps the autoscaler off, with one event per conflict, not one
//     per reconcile.
//
// The managedFields are read from the API server (the cache strips them), and only when the
// cached replicas differ from what the autoscaler last wrote or read there: one GET after
// each change it did not make, none in the steady state.

// minConflictHold is the least time the autoscaler leaves a pool alone after another writer
// set its replicas.
const minConflictHold = 15 * time.Second

// autoscalerConflict is another writer of the pool's replicas.
type autoscalerConflict struct {
	message string
	// until is when the autoscaler looks again (zero: when an event wakes it).
	until time.Time
}

// conflictingWriter returns the writer the autoscaler must not fight, nil when there is none.
func (r *autoscalerReconciler) conflictingWriter(ctx context.Context, wpa *autoscalingv1alpha1.WarmPoolAutoscaler,
	pool *extv1beta1.SandboxWarmPool, st *autoscalerState, rules autoscalerRules, now time.Time) (*autoscalerConflict, error) {
	var hpas autoscalingv2.HorizontalPodAutoscalerList
	if err := r.Client.List(ctx, &hpas, client.InNamespace(pool.Namespace)); err != nil {
		return nil, fmt.Errorf("listing HorizontalPodAutoscalers: %w", err)
	}
	for i := range hpas.Items {
		if hpaTargetsPool(&hpas.Items[i], pool.Name) {
			return &autoscalerConflict{message: fmt.Sprintf("HorizontalPodAutoscaler %s sets the replicas of SandboxWarmPool %s: "+
				"an HPA (or KEDA) and a WarmPoolAutoscaler must not both target one pool", hpas.Items[i].Name, pool.Name)}, nil
		}
	}
	var others autoscalingv1alpha1.WarmPoolAutoscalerList
	if err := r.Client.List(ctx, &others, client.InNamespace(pool.Namespace), client.MatchingFields{indexes.AutoscalerPool: pool.Name}); err != nil {
		return nil, fmt.Errorf("listing the autoscalers of the pool: %w", err)
	}
	if first := firstAutoscaler(others.Items); first != nil && first.Name != wpa.Name {
		return &autoscalerConflict{message: fmt.Sprintf("WarmPoolAutoscaler %s, created first, sets the replicas of SandboxWarmPool %s",
			first.Name, pool.Name)}, nil
	}
	return r.foreignReplicasWriter(ctx, wpa, pool, st, rules, now)
}

// hpaTargetsPool says whether hpa scales the pool of that name (its namespace's).
func hpaTargetsPool(hpa *autoscalingv2.HorizontalPodAutoscaler, pool string) bool {
	ref := hpa.Spec.ScaleTargetRef
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	return err == nil && gv.Group == extv1beta1.GroupVersion.Group && ref.Kind == policy.PoolKind.Kind && ref.Name == pool
}

// firstAutoscaler is the autoscaler created first (by name among those created in the same
// second), ignoring those being deleted; nil for none.
func firstAutoscaler(items []autoscalingv1alpha1.WarmPoolAutoscaler) *autoscalingv1alpha1.WarmPoolAutoscaler {
	var first *autoscalingv1alpha1.WarmPoolAutoscaler
	for i := range items {
		a := &items[i]
		if !a.DeletionTimestamp.IsZero() {
			continue
		}
		if first == nil || a.CreationTimestamp.Before(&first.CreationTimestamp) ||
			a.CreationTimestamp.Equal(&first.CreationTimestamp) && a.Name < first.Name {
			first = a
		}
	}
	return first
}

// foreignReplicasWriter reads who last set the pool's spec.replicas when the cache shows a
// value the autoscaler did not write, and returns a conflict while that write is recent.
// Until the autoscaler has scaled the pool once, whoever set the replicas before (the pool's
// creator) is no conflict: the autoscaler takes the field over.
//
// "Recent" counts from the write's time in the managedFields when it has one, else from when
// this process first saw the write: the API server records no time for writes through a
// custom resource's /scale (an HPA's, `kubectl scale`), and a new leader sees the write anew,
// holding off a little longer rather than less.
func (r *autoscalerReconciler) foreignReplicasWriter(ctx context.Context, wpa *autoscalingv1alpha1.WarmPoolAutoscaler,
	pool *extv1beta1.SandboxWarmPool, st *autoscalerState, rules autoscalerRules, now time.Time) (*autoscalerConflict, error) {
	if wpa.Status.LastScaleTime == nil {
		return nil, nil
	}
	current := int32(replicas(pool))
	if st.verifiedOK && current == st.verified {
		return nil, nil
	}
	if c := st.conflict; c != nil && current == st.conflictReplicas {
		if now.Before(c.until) {
			return c, nil // the write it found is still the last one
		}
		// Honoured for a hold: the field is the autoscaler's again from its next write.
		st.conflict, st.verified, st.verifiedOK = nil, current, true
		return nil, nil
	}
	st.conflict = nil
	fresh := &extv1beta1.SandboxWarmPool{}
	if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(pool), fresh); err != nil {
		return nil, fmt.Errorf("reading the pool's managedFields: %w", err)
	}
	manager, at, ok := replicasOwner(fresh.ManagedFields)
	if !ok || manager == AutoscalerFieldManager {
		st.verified, st.verifiedOK = int32(replicas(fresh)), true
		return nil, nil
	}
	// The autoscaler's own writes take the field: another manager owning it wrote after the
	// autoscaler's last write.
	since := now
	if !at.IsZero() && at.Before(now) {
		since = at
	}
	until := since.Add(max(rules.down.window, minConflictHold))
	if !now.Before(until) {
		st.verified, st.verifiedOK = int32(replicas(fresh)), true
		return nil, nil
	}
	st.conflict = &autoscalerConflict{
		message: fmt.Sprintf("field manager %q set the replicas of SandboxWarmPool %s to %d after the autoscaler's last scale; "+
			"the autoscaler leaves them until %s", manager, pool.Name, replicas(fresh), until.UTC().Format(time.RFC3339)),
		until: until,
	}
	st.conflictReplicas = current
	return st.conflict, nil
}

// replicasOwner is the field manager that owns spec.replicas in managedFields, and when it
// last wrote the object; with several (server-side apply may share a field), the most recent
// one. False when no entry holds the field.
func replicasOwner(entries []metav1.ManagedFieldsEntry) (string, time.Time, bool) {
	var manager string
	var at time.Time
	found := false
	for _, e := range entries {
		if e.FieldsV1 == nil || !ownsReplicas(e.FieldsV1.GetRawBytes()) {
			continue
		}
		var t time.Time
		if e.Time != nil {
			t = e.Time.Time
		}
		if !found || t.After(at) || t.Equal(at) && e.Manager == AutoscalerFieldManager {
			manager, at, found = e.Manager, t, true
		}
	}
	return manager, at, found
}

// ownsReplicas says whether a managedFields fieldset holds spec.replicas.
func ownsReplicas(raw []byte) bool {
	if !bytes.Contains(raw, []byte(`"f:replicas"`)) {
		return false
	}
	var set map[string]map[string]json.RawMessage
	if err := json.Unmarshal(raw, &set); err != nil {
		return false
	}
	_, ok := set["f:spec"]["f:replicas"]
	return ok
}

// hpaTargetPools are the pools an HPA's scaleTargetRef names (none when it names something
// else): for the HPA watch.
func hpaTargetPools(obj client.Object) []string {
	hpa, ok := obj.(*autoscalingv2.HorizontalPodAutoscaler)
	if !ok || !hpaTargetsPool(hpa, hpa.Spec.ScaleTargetRef.Name) {
		return nil
	}
	return []string{hpa.Spec.ScaleTargetRef.Name}
}
