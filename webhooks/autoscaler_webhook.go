package webhooks

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	autoscalingv1alpha1 "github.com/sandgate-dev/sandgate/api/autoscaling/v1alpha1"
	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	"github.com/sandgate-dev/sandgate/api/policy"
)

var autoscalerGK = autoscalingv1alpha1.GroupVersion.WithKind("WarmPoolAutoscaler").GroupKind()

// AutoscalerWebhook defaults and validates WarmPoolAutoscalers.
type AutoscalerWebhook struct{}

var (
	_ admission.Defaulter[*autoscalingv1alpha1.WarmPoolAutoscaler] = AutoscalerWebhook{}
	_ admission.Validator[*autoscalingv1alpha1.WarmPoolAutoscaler] = AutoscalerWebhook{}
)

// Default applies DefaultAutoscaler.
func (AutoscalerWebhook) Default(_ context.Context, a *autoscalingv1alpha1.WarmPoolAutoscaler) error {
	DefaultAutoscaler(a)
	return nil
}

// ValidateCreate applies ValidateAutoscaler.
func (AutoscalerWebhook) ValidateCreate(_ context.Context, a *autoscalingv1alpha1.WarmPoolAutoscaler) (admission.Warnings, error) {
	return nil, invalid(autoscalerGK, a.Name, ValidateAutoscaler(a))
}

// ValidateUpdate applies ValidateAutoscaler to what the update introduces.
func (AutoscalerWebhook) ValidateUpdate(_ context.Context, oldA, newA *autoscalingv1alpha1.WarmPoolAutoscaler) (admission.Warnings, error) {
	return nil, invalid(autoscalerGK, newA.Name, RatchetUpdate(ValidateAutoscaler(newA), ValidateAutoscaler(oldA)))
}

// ValidateDelete admits every deletion.
func (AutoscalerWebhook) ValidateDelete(context.Context, *autoscalingv1alpha1.WarmPoolAutoscaler) (admission.Warnings, error) {
	return nil, nil
}

// DefaultAutoscaler fills in a WarmPoolAutoscaler's defaults: minReplicas 1, targetSpare 2,
// scale-up at once without limit, scale-down after a 300 s window by at most 25% per 30 s,
// schedules in UTC. Each rule is defaulted on its own, so that a behavior that sets only a
// window keeps the default step and period.
func DefaultAutoscaler(a *autoscalingv1alpha1.WarmPoolAutoscaler) {
	s := &a.Spec
	if s.MinReplicas == nil {
		s.MinReplicas = ptr.To(autoscalingv1alpha1.DefaultMinReplicas)
	}
	if s.TargetSpare == nil {
		s.TargetSpare = ptr.To(autoscalingv1alpha1.DefaultTargetSpare)
	}
	if s.Behavior == nil {
		s.Behavior = &autoscalingv1alpha1.ScalingBehavior{}
	}
	if s.Behavior.ScaleUp == nil {
		s.Behavior.ScaleUp = &autoscalingv1alpha1.ScalingRules{}
	}
	if s.Behavior.ScaleDown == nil {
		s.Behavior.ScaleDown = &autoscalingv1alpha1.ScalingRules{}
	}
	defaultRules(s.Behavior.ScaleUp, autoscalingv1alpha1.DefaultScaleUpStabilizationWindowSeconds, nil,
		autoscalingv1alpha1.DefaultScaleUpPeriodSeconds)
	step := intstr.FromString(autoscalingv1alpha1.DefaultScaleDownMaxStep)
	defaultRules(s.Behavior.ScaleDown, autoscalingv1alpha1.DefaultScaleDownStabilizationWindowSeconds, &step,
		autoscalingv1alpha1.DefaultScaleDownPeriodSeconds)
	for i := range s.Schedules {
		if s.Schedules[i].TimeZone == "" {
			s.Schedules[i].TimeZone = autoscalingv1alpha1.DefaultTimeZone
		}
	}
}

func defaultRules(r *autoscalingv1alpha1.ScalingRules, window int32, step *intstr.IntOrString, period int32) {
	if r.StabilizationWindowSeconds == nil {
		r.StabilizationWindowSeconds = ptr.To(window)
	}
	if r.MaxStep == nil && step != nil {
		r.MaxStep = ptr.To(*step)
	}
	if r.PeriodSeconds == nil {
		r.PeriodSeconds = ptr.To(period)
	}
}

// ValidateAutoscaler checks a WarmPoolAutoscaler: a valid pool name; replica bounds within
// 0 and the pool's own bound (extv1beta1.MaxWarmPoolReplicas), minReplicas at most
// maxReplicas; behavior windows, periods and steps in range; schedules with unique names,
// known days, readable clock times that make a non-empty window, a time zone the operator can
// load, and a minimum within maxReplicas.
func ValidateAutoscaler(a *autoscalingv1alpha1.WarmPoolAutoscaler) field.ErrorList {
	spec := field.NewPath("spec")
	s := &a.Spec
	errs := ValidateReferenceName(s.PoolRef.Name, spec.Child("poolRef", "name"))
	errs = append(errs, replicaBound(s.MaxReplicas, 1, spec.Child("maxReplicas"))...)
	if s.MinReplicas != nil {
		errs = append(errs, replicaBound(*s.MinReplicas, 0, spec.Child("minReplicas"))...)
		if *s.MinReplicas > s.MaxReplicas {
			errs = append(errs, field.Invalid(spec.Child("minReplicas"), *s.MinReplicas,
				fmt.Sprintf("must not exceed maxReplicas (%d)", s.MaxReplicas)))
		}
	}
	if s.TargetSpare != nil {
		errs = append(errs, replicaBound(*s.TargetSpare, 0, spec.Child("targetSpare"))...)
	}
	if b := s.Behavior; b != nil {
		errs = append(errs, validateScalingRules(b.ScaleUp, spec.Child("behavior", "scaleUp"))...)
		errs = append(errs, validateScalingRules(b.ScaleDown, spec.Child("behavior", "scaleDown"))...)
	}
	names := sets.New[string]()
	for i, sch := range s.Schedules {
		p := spec.Child("schedules").Index(i)
		if names.Has(sch.Name) {
			errs = append(errs, field.Duplicate(p.Child("name"), sch.Name))
		}
		names.Insert(sch.Name)
		errs = append(errs, validateSchedule(&sch, s.MaxReplicas, p)...)
	}
	return errs
}

// replicaBound checks n is between lowest and the pool's MaxWarmPoolReplicas.
func replicaBound(n, lowest int32, fldPath *field.Path) field.ErrorList {
	if n < lowest || n > extv1beta1.MaxWarmPoolReplicas {
		return field.ErrorList{field.Invalid(fldPath, n, fmt.Sprintf("must be between %d and %d", lowest, extv1beta1.MaxWarmPoolReplicas))}
	}
	return nil
}

// Bounds of the behavior's windows and periods (the CRD schema has the same).
const (
	maxStabilizationWindowSeconds = 3600
	maxPeriodSeconds              = 1800
)

func validateScalingRules(r *autoscalingv1alpha1.ScalingRules, fldPath *field.Path) field.ErrorList {
	if r == nil {
		return nil
	}
	var errs field.ErrorList
	if w := r.StabilizationWindowSeconds; w != nil && (*w < 0 || *w > maxStabilizationWindowSeconds) {
		errs = append(errs, field.Invalid(fldPath.Child("stabilizationWindowSeconds"), *w,
			fmt.Sprintf("must be between 0 and %d", maxStabilizationWindowSeconds)))
	}
	if p := r.PeriodSeconds; p != nil && (*p < 0 || *p > maxPeriodSeconds) {
		errs = append(errs, field.Invalid(fldPath.Child("periodSeconds"), *p, fmt.Sprintf("must be between 0 and %d", maxPeriodSeconds)))
	}
	if r.MaxStep != nil {
		if _, _, err := policy.ParseMaxStep(*r.MaxStep); err != nil {
			errs = append(errs, field.Invalid(fldPath.Child("maxStep"), r.MaxStep.String(), err.Error()))
		}
	}
	return errs
}

func validateSchedule(s *autoscalingv1alpha1.Schedule, maxReplicas int32, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Label(s.Name) {
		errs = append(errs, field.Invalid(p.Child("name"), s.Name, msg))
	}
	days := sets.New[autoscalingv1alpha1.DayOfWeek]()
	for j, d := range s.DaysOfWeek {
		if days.Has(d) {
			errs = append(errs, field.Duplicate(p.Child("daysOfWeek").Index(j), d))
		}
		days.Insert(d)
		errs = append(errs, enum(string(d), p.Child("daysOfWeek").Index(j), "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")...)
	}
	start, startErr := policy.ParseClock(s.Start)
	switch {
	case startErr != nil:
		errs = append(errs, field.Invalid(p.Child("start"), s.Start, "must be HH:MM, from 00:00 to 23:59"))
	case start == 24*60:
		errs = append(errs, field.Invalid(p.Child("start"), s.Start, "a window opens at 23:59 at the latest; use 00:00"))
	}
	end, endErr := policy.ParseClock(s.End)
	if endErr != nil {
		errs = append(errs, field.Invalid(p.Child("end"), s.End, "must be HH:MM, from 00:00 to 24:00"))
	}
	if startErr == nil && endErr == nil && start == end {
		errs = append(errs, field.Invalid(p.Child("end"), s.End, "must differ from start: the window would be empty (00:00 to 24:00 is the whole day)"))
	}
	if _, err := policy.LoadTimeZone(s.TimeZone); err != nil {
		errs = append(errs, field.Invalid(p.Child("timeZone"), s.TimeZone, "must be an IANA time zone name such as Europe/Paris or UTC"))
	}
	if s.MinReplicas < 0 || s.MinReplicas > maxReplicas {
		errs = append(errs, field.Invalid(p.Child("minReplicas"), s.MinReplicas, fmt.Sprintf("must be between 0 and maxReplicas (%d)", maxReplicas)))
	}
	return errs
}
