package v1alpha1

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// PoolReference names a SandboxWarmPool in the autoscaler's namespace.
type PoolReference struct {
	// Name of the pool.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// ScalingRules say how fast the autoscaler moves its pool in one direction. They read like the
// rules of a HorizontalPodAutoscaler's behavior, with one policy each.
type ScalingRules struct {
	// StabilizationWindowSeconds is how far back the autoscaler looks at its own
	// recommendations before it moves: scaling down it takes the highest recommendation of the
	// window, scaling up the lowest. 0 moves at once. Defaults: 0 up, 300 down.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=3600
	StabilizationWindowSeconds *int32 `json:"stabilizationWindowSeconds,omitempty"`

	// MaxStep is the most members one step adds or removes: a number ("10") or a percentage of
	// the pool's current replicas ("25%", rounded up, at least one member). Unset is no limit.
	// Defaults: no limit up, "25%" down.
	// +optional
	// +kubebuilder:validation:XIntOrString
	MaxStep *intstr.IntOrString `json:"maxStep,omitempty"`

	// PeriodSeconds is the least time between two steps in this direction (a quarter second at
	// least, and a second with a MaxStep). Defaults: 0 up (a burst is answered as it arrives),
	// 30 down.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1800
	PeriodSeconds *int32 `json:"periodSeconds,omitempty"`
}

// ScalingBehavior is how fast the autoscaler scales up and down.
type ScalingBehavior struct {
	// ScaleUp defaults to no stabilization, no step limit and no period: a burst of claims
	// raises the pool the moment admission sees it.
	// +optional
	ScaleUp *ScalingRules `json:"scaleUp,omitempty"`

	// ScaleDown defaults to a 300 s stabilization window and at most 25% of the replicas per
	// 30 s: capacity follows demand down slowly, so that demand coming back finds it.
	// +optional
	ScaleDown *ScalingRules `json:"scaleDown,omitempty"`
}

// DayOfWeek is a day of the week, in English, as Go's time.Weekday names it.
// +kubebuilder:validation:Enum=Monday;Tuesday;Wednesday;Thursday;Friday;Saturday;Sunday
type DayOfWeek string

// Schedule is a recurring time window with a minimum of its own: for demand known in advance
// (a working day, a nightly batch), so that capacity is there before the first claim.
// +kubebuilder:validation:XValidation:rule="self.start != self.end",message="start and end must differ: the window would be empty"
type Schedule struct {
	// Name identifies the window in status and events.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`

	// DaysOfWeek on which the window opens; empty is every day. A window that ends past
	// midnight belongs to the day it opens.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=7
	DaysOfWeek []DayOfWeek `json:"daysOfWeek,omitempty"`

	// Start is when the window opens, "HH:MM" (24-hour clock) in TimeZone.
	// +required
	// +kubebuilder:validation:MaxLength=5
	// +kubebuilder:validation:Pattern=`^([01][0-9]|2[0-3]):[0-5][0-9]$`
	Start string `json:"start"`

	// End is when the window closes, "HH:MM" or "24:00", in TimeZone; an End before Start
	// closes the window the next day. End equal to Start is refused (an empty window).
	// +required
	// +kubebuilder:validation:MaxLength=5
	// +kubebuilder:validation:Pattern=`^(([01][0-9]|2[0-3]):[0-5][0-9]|24:00)$`
	End string `json:"end"`

	// TimeZone is an IANA time zone name ("Europe/Paris"); the operator carries its own copy
	// of the time zone database. Defaults to UTC.
	// +optional
	// +kubebuilder:default=UTC
	// +kubebuilder:validation:MaxLength=64
	TimeZone string `json:"timeZone,omitempty"`

	// MinReplicas is the pool's minimum while the window is open; at most maxReplicas.
	// +required
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=10000
	MinReplicas int32 `json:"minReplicas"`
}

// WarmPoolAutoscalerSpec is what the platform asks of an autoscaler.
// +kubebuilder:validation:XValidation:rule="!has(self.minReplicas) || self.minReplicas <= self.maxReplicas",message="minReplicas must not exceed maxReplicas"
// +kubebuilder:validation:XValidation:rule="!has(self.schedules) || self.schedules.all(s, s.minReplicas <= self.maxReplicas)",message="a schedule's minReplicas must not exceed maxReplicas"
type WarmPoolAutoscalerSpec struct {
	// PoolRef names the SandboxWarmPool, in the same namespace, whose replicas this autoscaler
	// sets through its /scale subresource.
	// +required
	PoolRef PoolReference `json:"poolRef"`

	// MinReplicas is the fewest members the autoscaler leaves the pool, outside any schedule.
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=10000
	MinReplicas *int32 `json:"minReplicas,omitempty"`

	// MaxReplicas is the most members the autoscaler gives the pool, whatever the demand: the
	// platform's bound on what claims can make it spend.
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10000
	MaxReplicas int32 `json:"maxReplicas"`

	// TargetSpare is how many members to keep ready above the claims expected during one
	// member start-up time: the pool's replicas are TargetSpare plus that expectation,
	// within MinReplicas, the open schedules' minimums and MaxReplicas.
	// +optional
	// +kubebuilder:default=2
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=10000
	TargetSpare *int32 `json:"targetSpare,omitempty"`

	// Behavior is how fast the pool follows demand up and down.
	// +optional
	Behavior *ScalingBehavior `json:"behavior,omitempty"`

	// Schedules are time windows with minimums of their own; the highest minimum of the open
	// windows applies on top of MinReplicas.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=32
	Schedules []Schedule `json:"schedules,omitempty"`
}

// DemandEstimate is what the autoscaler knows of its pool's demand.
type DemandEstimate struct {
	// ClaimsPerSecond is the claim arrival rate the autoscaler plans with: the higher of the
	// short-window (10 s) and the long-window (120 s) rate.
	// +optional
	ClaimsPerSecond resource.Quantity `json:"claimsPerSecond,omitempty"`

	// ShortWindowClaims and LongWindowClaims are the claims of the pool that arrived in the
	// last 10 s and 120 s.
	// +optional
	ShortWindowClaims int32 `json:"shortWindowClaims,omitempty"`
	// +optional
	LongWindowClaims int32 `json:"longWindowClaims,omitempty"`

	// MemberStartupMilliseconds is the member start-up time the autoscaler plans with: the
	// 90th percentile of the pool's recent members, from a member's creation to its Ready;
	// 5000 until a member has been measured.
	// +optional
	MemberStartupMilliseconds int64 `json:"memberStartupMilliseconds,omitempty"`

	// MemberStartupSamples is how many members that percentile is taken over.
	// +optional
	MemberStartupSamples int32 `json:"memberStartupSamples,omitempty"`

	// ExpectedClaimsDuringStartup is the claims expected while a new member starts:
	// ClaimsPerSecond times the start-up time, rounded up, or the claims that arrived during
	// the last start-up time when more (a burst).
	// +optional
	ExpectedClaimsDuringStartup int32 `json:"expectedClaimsDuringStartup,omitempty"`
}

// WarmPoolAutoscalerStatus is what the autoscaler observed and decided.
type WarmPoolAutoscalerStatus struct {
	// ObservedGeneration is the generation of the spec the status was decided from.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// CurrentReplicas is the pool's spec.replicas as last seen.
	// +optional
	CurrentReplicas int32 `json:"currentReplicas,omitempty"`

	// ReadyReplicas is the pool's status.readyReplicas as last seen.
	// +optional
	ReadyReplicas int32 `json:"readyReplicas,omitempty"`

	// DesiredReplicas is what the autoscaler wants the pool to have now, after its bounds
	// and its behavior.
	// +optional
	DesiredReplicas int32 `json:"desiredReplicas,omitempty"`

	// Demand is the demand estimate the decision was taken from.
	// +optional
	Demand *DemandEstimate `json:"demand,omitempty"`

	// ActiveSchedules names the schedules open when the status was written.
	// +optional
	// +listType=set
	ActiveSchedules []string `json:"activeSchedules,omitempty"`

	// LastScaleTime is when the autoscaler last changed the pool's replicas.
	// +optional
	LastScaleTime *metav1.Time `json:"lastScaleTime,omitempty"`

	// LastScaleReason says what that change was and why ("ScaledUp: 4 -> 12: ...").
	// +optional
	LastScaleReason string `json:"lastScaleReason,omitempty"`

	// Conditions: Ready, AbleToScale and ScalingActive.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// WarmPoolAutoscaler keeps a SandboxWarmPool's replicas at the claims expected during one
// member start-up time plus a spare, within bounds and schedules, deciding from the claims
// admission sees arrive.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=wpa
// +kubebuilder:printcolumn:name="Pool",type=string,JSONPath=".spec.poolRef.name"
// +kubebuilder:printcolumn:name="Min",type=integer,JSONPath=".spec.minReplicas"
// +kubebuilder:printcolumn:name="Max",type=integer,JSONPath=".spec.maxReplicas"
// +kubebuilder:printcolumn:name="Current",type=integer,JSONPath=".status.currentReplicas"
// +kubebuilder:printcolumn:name="Desired",type=integer,JSONPath=".status.desiredReplicas"
// +kubebuilder:printcolumn:name="Claims/s",type=string,JSONPath=".status.demand.claimsPerSecond"
// +kubebuilder:printcolumn:name="Able",type=string,JSONPath=".status.conditions[?(@.type=='AbleToScale')].status"
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=".status.conditions[?(@.type=='AbleToScale')].reason",priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=".metadata.creationTimestamp"
type WarmPoolAutoscaler struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec WarmPoolAutoscalerSpec `json:"spec"`
	// +optional
	Status WarmPoolAutoscalerStatus `json:"status,omitempty"`
}

// WarmPoolAutoscalerList is a list of WarmPoolAutoscalers.
// +kubebuilder:object:root=true
type WarmPoolAutoscalerList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []WarmPoolAutoscaler `json:"items"`
}

func init() {
	register(&WarmPoolAutoscaler{}, &WarmPoolAutoscalerList{})
}
