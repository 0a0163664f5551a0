package builders

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	autoscalingv1alpha1 "github.com/sandgate-dev/sandgate/api/autoscaling/v1alpha1"
)

// AutoscalerWrapper builds a WarmPoolAutoscaler.
type AutoscalerWrapper struct {
	autoscalingv1alpha1.WarmPoolAutoscaler
}

// MakeAutoscaler starts a WarmPoolAutoscaler of pool with maxReplicas 10 and the rest left to
// the defaults.
func MakeAutoscaler(name, ns, pool string) *AutoscalerWrapper {
	return &AutoscalerWrapper{autoscalingv1alpha1.WarmPoolAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: autoscalingv1alpha1.WarmPoolAutoscalerSpec{
			PoolRef:     autoscalingv1alpha1.PoolReference{Name: pool},
			MaxReplicas: 10,
		},
	}}
}

// Obj returns the WarmPoolAutoscaler.
func (w *AutoscalerWrapper) Obj() *autoscalingv1alpha1.WarmPoolAutoscaler {
	return &w.WarmPoolAutoscaler
}

// Min sets minReplicas.
func (w *AutoscalerWrapper) Min(n int32) *AutoscalerWrapper { w.Spec.MinReplicas = ptr.To(n); return w }

// Max sets maxReplicas.
func (w *AutoscalerWrapper) Max(n int32) *AutoscalerWrapper { w.Spec.MaxReplicas = n; return w }

// TargetSpare sets targetSpare.
func (w *AutoscalerWrapper) TargetSpare(n int32) *AutoscalerWrapper {
	w.Spec.TargetSpare = ptr.To(n)
	return w
}

// ScaleUp sets the scale-up rules: stabilization window, max step ("" for none) and period.
func (w *AutoscalerWrapper) ScaleUp(windowSeconds int32, maxStep string, periodSeconds int32) *AutoscalerWrapper {
	w.behavior().ScaleUp = rules(windowSeconds, maxStep, periodSeconds)
	return w
}

// ScaleDown sets the scale-down rules: stabilization window, max step ("" for none) and period.
func (w *AutoscalerWrapper) ScaleDown(windowSeconds int32, maxStep string, periodSeconds int32) *AutoscalerWrapper {
	w.behavior().ScaleDown = rules(windowSeconds, maxStep, periodSeconds)
	return w
}

func (w *AutoscalerWrapper) behavior() *autoscalingv1alpha1.ScalingBehavior {
	if w.Spec.Behavior == nil {
		w.Spec.Behavior = &autoscalingv1alpha1.ScalingBehavior{}
	}
	return w.Spec.Behavior
}

func rules(windowSeconds int32, maxStep string, periodSeconds int32) *autoscalingv1alpha1.ScalingRules {
	r := &autoscalingv1alpha1.ScalingRules{StabilizationWindowSeconds: ptr.To(windowSeconds), PeriodSeconds: ptr.To(periodSeconds)}
	if maxStep != "" {
		r.MaxStep = ptr.To(intstr.Parse(maxStep))
	}
	return r
}

// Schedule adds a schedule of minReplicas from start to end ("HH:MM") in zone on days (none:
// every day).
func (w *AutoscalerWrapper) Schedule(name, start, end, zone string, minReplicas int32, days ...autoscalingv1alpha1.DayOfWeek) *AutoscalerWrapper {
	w.Spec.Schedules = append(w.Spec.Schedules, autoscalingv1alpha1.Schedule{
		Name: name, Start: start, End: end, TimeZone: zone, MinReplicas: minReplicas, DaysOfWeek: days,
	})
	return w
}
