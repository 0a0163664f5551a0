package policy

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/intstr"

	autoscalingv1alpha1 "github.com/sandgate-dev/sandgate/api/autoscaling/v1alpha1"
)

// The rules of a WarmPoolAutoscaler that admission and its controller both read: admission
// refuses a window or a step that cannot be read (ParseClock, LoadTimeZone, ParseMaxStep) and
// the controller applies them (OpenSchedules, ParseMaxStep). Both read them here, so what
// admission accepts is what the controller understands.

// ParseMaxStep reads a behavior's maxStep: a number of members (at least 1) or a percentage
// of the current replicas ("25%", at least 1%).
func ParseMaxStep(v intstr.IntOrString) (n int32, percent bool, err error) {
	if v.Type == intstr.Int {
		if v.IntVal < 1 {
			return 0, false, errors.New("a number of members must be at least 1 (leave maxStep unset for no limit)")
		}
		return v.IntVal, false, nil
	}
	s, isPercent := strings.CutSuffix(v.StrVal, "%")
	p, err := strconv.ParseInt(s, 10, 32)
	if err != nil || !isPercent {
		return 0, false, errors.New("must be a number of members (10) or a percentage of the current replicas (25%)")
	}
	if p < 1 {
		return 0, false, errors.New("a percentage must be at least 1% (leave maxStep unset for no limit)")
	}
	return int32(p), true, nil
}

// ParseClock reads "HH:MM" (00:00 to 23:59) or "24:00" as minutes after midnight.
func ParseClock(s string) (int, error) {
	if len(s) != 5 || s[2] != ':' {
		return 0, fmt.Errorf("%q is not HH:MM", s)
	}
	h, errH := strconv.Atoi(s[:2])
	m, errM := strconv.Atoi(s[3:])
	if errH != nil || errM != nil || h < 0 || m < 0 || m > 59 || h > 24 || (h == 24 && m != 0) {
		return 0, fmt.Errorf("%q is not a time of day between 00:00 and 24:00", s)
	}
	return h*60 + m, nil
}

// zones caches the locations LoadTimeZone read: parsing a zone file for every reconcile
// would cost more than the rest of the decision.
var zones sync.Map // string -> *time.Location

// LoadTimeZone returns the IANA time zone name ("" is UTC). "Local" is refused: it would be
// whatever zone the operator's machine runs in.
func LoadTimeZone(name string) (*time.Location, error) {
	if name == "" {
		name = autoscalingv1alpha1.DefaultTimeZone
	}
	if name == "Local" {
		return nil, errors.New(`"Local" is the operator machine's zone, not a zone of the schedule`)
	}
	if loc, ok := zones.Load(name); ok {
		return loc.(*time.Location), nil
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, err
	}
	zones.Store(name, loc)
	return loc, nil
}

// OpenWindows is what the schedules say at one moment.
type OpenWindows struct {
	// Minimum is the highest MinReplicas of the open windows; 0 when none is open.
	Minimum int32
	// Names of the open windows, in the order of the spec.
	Names []string
	// Next is the earliest moment after the one asked about at which a window opens or
	// closes (zero when no schedule can be read): when to look again.
	Next time.Time
}

// OpenSchedules applies schedules at t. A schedule that cannot be read (admission refuses
// them; an object admitted before a rule existed may have one) is skipped and returned in
// errs.
func OpenSchedules(schedules []autoscalingv1alpha1.Schedule, t time.Time) (OpenWindows, []error) {
	var out OpenWindows
	var errs []error
	for _, s := range schedules {
		open, next, err := scheduleAt(s, t)
		if err != nil {
			errs = append(errs, fmt.Errorf("schedule %s: %w", s.Name, err))
			continue
		}
		if open {
			out.Names = append(out.Names, s.Name)
			out.Minimum = max(out.Minimum, s.MinReplicas)
		}
		if !next.IsZero() && (out.Next.IsZero() || next.Before(out.Next)) {
			out.Next = next
		}
	}
	return out, errs
}

// scheduleAt says whether s is open at t and when it next opens or closes after t.
//
// A window belongs to the day it opens: with an end before its start it closes the next
// day, so the windows that can be open at t opened today or yesterday (local time). Clock
// times are wall-clock times of the zone: on a day a daylight saving change skips or repeats
// an hour, time.Date's normalization decides (a start in a skipped hour opens an hour later).
func scheduleAt(s autoscalingv1alpha1.Schedule, t time.Time) (open bool, next time.Time, err error) {
	start, err := ParseClock(s.Start)
	if err != nil {
		return false, time.Time{}, err
	}
	if start == 24*60 {
		return false, time.Time{}, fmt.Errorf("start %q: a window opens at 23:59 at the latest", s.Start)
	}
	end, err := ParseClock(s.End)
	if err != nil {
		return false, time.Time{}, err
	}
	if start == end {
		return false, time.Time{}, fmt.Errorf("start and end are both %s: the window is empty", s.Start)
	}
	loc, err := LoadTimeZone(s.TimeZone)
	if err != nil {
		return false, time.Time{}, err
	}
	days := map[time.Weekday]bool{}
	for _, d := range s.DaysOfWeek {
		wd, ok := weekdays[d]
		if !ok {
			return false, time.Time{}, fmt.Errorf("%q is not a day of the week", d)
		}
		days[wd] = true
	}
	local := t.In(loc)
	y, m, d := local.Date()
	// Yesterday's window may still be open; the next boundary is at most a week away.
	for offset := -1; offset <= 8; offset++ {
		day := time.Date(y, m, d+offset, 0, 0, 0, 0, loc)
		if len(days) > 0 && !days[day.Weekday()] {
			continue
		}
		opens := time.Date(y, m, d+offset, 0, start, 0, 0, loc)
		closes := time.Date(y, m, d+offset, 0, end, 0, 0, loc)
		if end < start {
			closes = time.Date(y, m, d+offset+1, 0, end, 0, 0, loc)
		}
		if !opens.After(t) && t.Before(closes) {
			open = true
		}
		for _, b := range []time.Time{opens, closes} {
			if b.After(t) && (next.IsZero() || b.Before(next)) {
				next = b
			}
		}
	}
	return open, next, nil
}

var weekdays = map[autoscalingv1alpha1.DayOfWeek]time.Weekday{
	"Sunday": time.Sunday, "Monday": time.Monday, "Tuesday": time.Tuesday, "Wednesday": time.Wednesday,
	"Thursday": time.Thursday, "Friday": time.Friday, "Saturday": time.Saturday,
}
