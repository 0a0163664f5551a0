package v1alpha1

// Condition types of a WarmPoolAutoscaler.
const (
	// ConditionReady is True while the autoscaler sets its pool's replicas: AbleToScale and
	// ScalingActive both True. False carries the reason of the one that is not.
	ConditionReady = "Ready"
	// ConditionAbleToScale says whether the autoscaler may write the pool's replicas: False
	// while the pool is missing, while another writer sets them (ConflictingWriter), or while
	// writing its /scale fails.
	ConditionAbleToScale = "AbleToScale"
	// ConditionScalingActive says whether the replicas follow demand: True with reason
	// DemandDriven, or with the bound that holds them (MinReplicas, ScheduleMinimum,
	// MaxReplicas); False while the autoscaler cannot scale.
	ConditionScalingActive = "ScalingActive"
)

// Condition reasons.
const (
	ReasonScaling           = "Scaling"
	ReasonPoolNotFound      = "PoolNotFound"
	ReasonConflictingWriter = "ConflictingWriter"
	ReasonFailedScale       = "FailedScale"
	ReasonScaleWritable     = "ScaleWritable"
	ReasonDemandDriven      = "DemandDriven"
	ReasonMinReplicas       = "MinReplicas"
	ReasonScheduleMinimum   = "ScheduleMinimum"
	ReasonMaxReplicas       = "MaxReplicas"
)

// Event reasons.
const (
	// EventScaledUp and EventScaledDown (Normal): the autoscaler changed the pool's replicas;
	// the message says from what to what and why.
	EventScaledUp   = "ScaledUp"
	EventScaledDown = "ScaledDown"
	// EventConflictingWriter (Warning): another writer sets the pool's replicas; the
	// autoscaler stops writing them. One event per conflict, not one per reconcile.
	EventConflictingWriter = "ConflictingWriter"
	// EventConflictResolved (Normal): the other writer is gone; the autoscaler resumes.
	EventConflictResolved = "ConflictResolved"
	// EventFailedScale (Warning): writing the pool's /scale failed.
	EventFailedScale = "FailedScale"
)

// The defaults of the spec (applied at admission, and assumed by the controller for a field
// left unset by an object admitted before the defaults existed).
const (
	DefaultMinReplicas                         int32 = 1
	DefaultTargetSpare                         int32 = 2
	DefaultScaleUpStabilizationWindowSeconds   int32 = 0
	DefaultScaleUpPeriodSeconds                int32 = 0
	DefaultScaleDownStabilizationWindowSeconds int32 = 300
	DefaultScaleDownMaxStep                          = "25%"
	DefaultScaleDownPeriodSeconds              int32 = 30
	DefaultTimeZone                                  = "UTC"
)
