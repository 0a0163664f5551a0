package webhooks_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	autoscalingv1alpha1 "github.com/sandgate-dev/sandgate/api/autoscaling/v1alpha1"
	"github.com/sandgate-dev/sandgate/internal/testing/builders"
	"github.com/sandgate-dev/sandgate/webhooks"
)

func TestValidateAutoscaler(t *testing.T) {
	mk := func() *builders.AutoscalerWrapper { return builders.MakeAutoscaler("a", "ns", "pool") }
	for _, tc := range []struct {
		name string
		a    *autoscalingv1alpha1.WarmPoolAutoscaler
		want []string
	}{
		{name: "valid", a: mk().Min(2).Max(50).TargetSpare(3).ScaleUp(0, "", 0).ScaleDown(300, "25%", 30).
			Schedule("workday", "09:00", "17:30", "Europe/Paris", 20, "Monday", "Friday").
			Schedule("nightly", "22:00", "02:00", "", 10).Schedule("all-day", "00:00", "24:00", "UTC", 5).Obj()},
		{name: "pool name", a: builders.MakeAutoscaler("a", "ns", "Pool_1").Obj(), want: []string{"Invalid value spec.poolRef.name"}},
		{name: "no pool", a: builders.MakeAutoscaler("a", "ns", "").Obj(), want: []string{"Required value spec.poolRef.name"}},
		{name: "min above max", a: mk().Min(11).Max(10).Obj(), want: []string{"Invalid value spec.minReplicas"}},
		{name: "max zero", a: mk().Min(0).Max(0).Obj(), want: []string{"Invalid value spec.maxReplicas"}},
		{name: "max beyond the pool's bound", a: mk().Max(10001).Obj(), want: []string{"Invalid value spec.maxReplicas"}},
		{name: "negative spare", a: mk().TargetSpare(-1).Obj(), want: []string{"Invalid value spec.targetSpare"}},
		{name: "window and period out of range", a: mk().ScaleDown(3601, "", -1).Obj(),
			want: []string{"Invalid value spec.behavior.scaleDown.stabilizationWindowSeconds", "Invalid value spec.behavior.scaleDown.periodSeconds"}},
		{name: "step zero", a: mk().ScaleUp(0, "0", 0).Obj(), want: []string{"Invalid value spec.behavior.scaleUp.maxStep"}},
		{name: "step zero percent", a: mk().ScaleUp(0, "0%", 0).Obj(), want: []string{"Invalid value spec.behavior.scaleUp.maxStep"}},
		{name: "step not a number", a: mk().ScaleDown(0, "a few", 0).Obj(), want: []string{"Invalid value spec.behavior.scaleDown.maxStep"}},
		{name: "step as a number", a: mk().ScaleDown(0, "7", 0).Obj()},
		{name: "step above 100 percent", a: mk().ScaleUp(0, "200%", 0).Obj()},
		{name: "unknown zone", a: mk().Schedule("s", "09:00", "10:00", "Mars/Olympus_Mons", 1).Obj(),
			want: []string{"Invalid value spec.schedules[0].timeZone"}},
		{name: "machine-local zone", a: mk().Schedule("s", "09:00", "10:00", "Local", 1).Obj(),
			want: []string{"Invalid value spec.schedules[0].timeZone"}},
		{name: "bad clock times", a: mk().Schedule("s", "9:00", "25:00", "UTC", 1).Obj(),
			want: []string{"Invalid value spec.schedules[0].start", "Invalid value spec.schedules[0].end"}},
		{name: "start at 24:00", a: mk().Schedule("s", "24:00", "10:00", "UTC", 1).Obj(), want: []string{"Invalid value spec.schedules[0].start"}},
		{name: "empty window", a: mk().Schedule("s", "10:00", "10:00", "UTC", 1).Obj(), want: []string{"Invalid value spec.schedules[0].end"}},
		{name: "schedule minimum above max", a: mk().Max(10).Schedule("s", "09:00", "10:00", "UTC", 11).Obj(),
			want: []string{"Invalid value spec.schedules[0].minReplicas"}},
		{name: "days", a: mk().Schedule("s", "09:00", "10:00", "UTC", 1, "Monday", "Funday", "Monday").Obj(),
			want: []string{"Unsupported value spec.schedules[0].daysOfWeek[1]", "Duplicate value spec.schedules[0].daysOfWeek[2]"}},
		{name: "schedule names", a: mk().Schedule("Work Day", "09:00", "10:00", "UTC", 1).Schedule("Work Day", "11:00", "12:00", "UTC", 1).Obj(),
			want: []string{"Invalid value spec.schedules[0].name", "Duplicate value spec.schedules[1].name", "Invalid value spec.schedules[1].name"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, summary(webhooks.ValidateAutoscaler(tc.a))); diff != "" {
				t.Errorf("ValidateAutoscaler (-want +got):\n%s", diff)
			}
		})
	}
}

// The webhook refuses with 422 and the field paths; an update is not refused for a problem
// the object already had.
func TestAutoscalerWebhookRefusesWith422(t *testing.T) {
	w := webhooks.AutoscalerWebhook{}
	bad := builders.MakeAutoscaler("a", "ns", "pool").Min(5).Max(3).Obj()
	_, err := w.ValidateCreate(request(someUser, admissionv1.Create), bad)
	if code(err) != 422 {
		t.Fatalf("create: code %d (%v), want 422", code(err), err)
	}
	if got := causes(err); len(got) != 1 || got[0].Field != "spec.minReplicas" {
		t.Errorf("causes %+v, want spec.minReplicas", got)
	}
	touched := bad.DeepCopy()
	touched.Spec.TargetSpare = ptr.To[int32](4)
	if _, err := w.ValidateUpdate(request(someUser, admissionv1.Update), bad, touched); err != nil {
		t.Errorf("an update that leaves the old problem as it was: %v", err)
	}
	worse := touched.DeepCopy()
	worse.Spec.Schedules = []autoscalingv1alpha1.Schedule{{Name: "s", Start: "09:00", End: "09:00", MinReplicas: 1}}
	if _, err := w.ValidateUpdate(request(someUser, admissionv1.Update), touched, worse); code(err) != 422 {
		t.Errorf("an update that adds a problem: code %d, want 422", code(err))
	}
}

// Defaulting fills every rule on its own: a behavior that sets only a window keeps the
// default step and period; what is set stays.
func TestDefaultAutoscaler(t *testing.T) {
	a := builders.MakeAutoscaler("a", "ns", "pool").Schedule("s", "09:00", "10:00", "", 1).Obj()
	a.Spec.Behavior = &autoscalingv1alpha1.ScalingBehavior{ScaleDown: &autoscalingv1alpha1.ScalingRules{StabilizationWindowSeconds: ptr.To[int32](60)}}
	webhooks.DefaultAutoscaler(a)
	pct := intstr.FromString("25%")
	want := autoscalingv1alpha1.WarmPoolAutoscalerSpec{
		PoolRef:     autoscalingv1alpha1.PoolReference{Name: "pool"},
		MinReplicas: ptr.To[int32](1), MaxReplicas: 10, TargetSpare: ptr.To[int32](2),
		Behavior: &autoscalingv1alpha1.ScalingBehavior{
			ScaleUp:   &autoscalingv1alpha1.ScalingRules{StabilizationWindowSeconds: ptr.To[int32](0), PeriodSeconds: ptr.To[int32](0)},
			ScaleDown: &autoscalingv1alpha1.ScalingRules{StabilizationWindowSeconds: ptr.To[int32](60), MaxStep: &pct, PeriodSeconds: ptr.To[int32](30)},
		},
		Schedules: []autoscalingv1alpha1.Schedule{{Name: "s", Start: "09:00", End: "10:00", TimeZone: "UTC", MinReplicas: 1}},
	}
	if diff := cmp.Diff(want, a.Spec); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if errs := webhooks.ValidateAutoscaler(a); len(errs) > 0 {
		t.Errorf("the defaults do not validate: %v", errs)
	}
	again := a.DeepCopy()
	webhooks.DefaultAutoscaler(again)
	if diff := cmp.Diff(a, again); diff != "" {
		t.Errorf("defaulting twice changes the object (-once +twice):\n%s", diff)
	}
}

// The sample of config/samples is admitted as written.
func TestAutoscalerSampleIsValid(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "config", "samples", "autoscaling_v1alpha1_warmpoolautoscaler.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	a := &autoscalingv1alpha1.WarmPoolAutoscaler{}
	if err := yaml.UnmarshalStrict(raw, a); err != nil {
		t.Fatal(err)
	}
	webhooks.DefaultAutoscaler(a)
	if errs := webhooks.ValidateAutoscaler(a); len(errs) > 0 {
		t.Errorf("the sample is refused: %v", errs)
	}
}
