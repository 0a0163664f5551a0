package operator

// The warm pool autoscaler's schedules name IANA time zones: the operator carries the zone
// database, so that admission and the controller read a schedule the same way on every node,
// whatever the image holds (the distroless base has one today; a scratch image would not).
import _ "time/tzdata"
