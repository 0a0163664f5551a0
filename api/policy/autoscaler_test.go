package policy

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	autoscalingv1alpha1 "github.com/sandgate-dev/sandgate/api/autoscaling/v1alpha1"
)

func TestParseClock(t *testing.T) {
	cases := map[string]struct {
		in      string
		want    int
		wantErr bool
	}{
		"midnight":        {in: "00:00", want: 0},
		"morning":         {in: "09:30", want: 570},
		"last minute":     {in: "23:59", want: 1439},
		"end of day":      {in: "24:00", want: 1440},
		"past end of day": {in: "24:01", wantErr: true},
		"no colon":        {in: "0930", wantErr: true},
		"one digit hour":  {in: "9:30", wantErr: true},
		"minute 60":       {in: "10:60", wantErr: true},
		"hour 25":         {in: "25:00", wantErr: true},
		"signs":           {in: "-1:00", wantErr: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := ParseClock(tc.in)
			if (err != nil) != tc.wantErr {
				t.Fatalf("ParseClock(%q) error %v, want error %t", tc.in, err, tc.wantErr)
			}
			if got != tc.want {
				t.Errorf("ParseClock(%q) = %d, want %d", tc.in, got, tc.want)
			}
		})
	}
}

// A window is open from its start (included) to its end (excluded), on its days, in its
// zone; one that ends before it starts closes the next day and belongs to the day it opened.
// Next is the earliest boundary of any window after the moment asked about.
func TestOpenSchedulesAppliesTheWindowsOpenAtTheMoment(t *testing.T) {
	workday := autoscalingv1alpha1.Schedule{Name: "workday", Start: "09:00", End: "17:00", TimeZone: "Europe/Paris",
		DaysOfWeek: []autoscalingv1alpha1.DayOfWeek{"Monday", "Tuesday", "Wednesday", "Thursday", "Friday"}, MinReplicas: 20}
	nightly := autoscalingv1alpha1.Schedule{Name: "nightly", Start: "22:00", End: "02:00", MinReplicas: 50,
		DaysOfWeek: []autoscalingv1alpha1.DayOfWeek{"Friday"}}
	lunch := autoscalingv1alpha1.Schedule{Name: "lunch", Start: "12:00", End: "13:00", TimeZone: "Europe/Paris", MinReplicas: 30}
	all := []autoscalingv1alpha1.Schedule{workday, nightly, lunch}
	// 2026-11-27 is a Friday; Paris is UTC+1 in November.
	utc := func(day, hour, minute int) time.Time { return time.Date(2026, 11, day, hour, minute, 0, 0, time.UTC) }
	cases := map[string]struct {
		at   time.Time
		want OpenWindows
	}{
		"before the workday": {at: utc(27, 7, 59), want: OpenWindows{Next: utc(27, 8, 0)}},
		"workday opens (start included)": {at: utc(27, 8, 0),
			want: OpenWindows{Minimum: 20, Names: []string{"workday"}, Next: utc(27, 11, 0)}},
		"lunch inside the workday: the higher minimum": {at: utc(27, 11, 30),
			want: OpenWindows{Minimum: 30, Names: []string{"workday", "lunch"}, Next: utc(27, 12, 0)}},
		"workday closes (end excluded)": {at: utc(27, 16, 0), want: OpenWindows{Next: utc(27, 22, 0)}},
		"friday night window opens": {at: utc(27, 22, 0),
			want: OpenWindows{Minimum: 50, Names: []string{"nightly"}, Next: utc(28, 2, 0)}},
		"past midnight it still belongs to friday": {at: utc(28, 1, 59),
			want: OpenWindows{Minimum: 50, Names: []string{"nightly"}, Next: utc(28, 2, 0)}},
		"saturday: no workday, lunch only": {at: utc(28, 11, 0),
			want: OpenWindows{Minimum: 30, Names: []string{"lunch"}, Next: utc(28, 12, 0)}},
		"saturday night: nightly is friday's only": {at: utc(28, 23, 0), want: OpenWindows{Next: utc(29, 11, 0)}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, errs := OpenSchedules(all, tc.at)
			if len(errs) > 0 {
				t.Fatalf("errors: %v", errs)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// A window that ends at 24:00 closes at the next midnight; the clock is the zone's wall
// clock, whatever its offset that day.
func TestOpenSchedulesFollowsTheZonesWallClock(t *testing.T) {
	evening := autoscalingv1alpha1.Schedule{Name: "evening", Start: "18:00", End: "24:00", TimeZone: "America/New_York", MinReplicas: 5}
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Skipf("no time zone database: %v", err)
	}
	// Summer (UTC-4) and winter (UTC-5): the window opens at 18:00 local both times.
	for _, day := range []time.Time{time.Date(2026, 7, 1, 0, 0, 0, 0, ny), time.Date(2026, 12, 1, 0, 0, 0, 0, ny)} {
		opens := day.Add(18 * time.Hour)
		closes := time.Date(day.Year(), day.Month(), day.Day()+1, 0, 0, 0, 0, ny)
		for at, want := range map[time.Time]bool{opens.Add(-time.Second): false, opens: true, closes.Add(-time.Second): true, closes: false} {
			got, errs := OpenSchedules([]autoscalingv1alpha1.Schedule{evening}, at)
			if len(errs) > 0 {
				t.Fatal(errs)
			}
			if (got.Minimum == 5) != want {
				t.Errorf("at %s: open %t, want %t", at, got.Minimum == 5, want)
			}
		}
	}
}

// A schedule that cannot be read is skipped and reported; the others still apply.
func TestOpenSchedulesSkipsWhatItCannotRead(t *testing.T) {
	schedules := []autoscalingv1alpha1.Schedule{
		{Name: "zone", Start: "00:00", End: "24:00", TimeZone: "Mars/Olympus_Mons", MinReplicas: 9},
		{Name: "empty", Start: "10:00", End: "10:00", MinReplicas: 9},
		{Name: "day", Start: "00:00", End: "24:00", DaysOfWeek: []autoscalingv1alpha1.DayOfWeek{"Caturday"}, MinReplicas: 9},
		{Name: "ok", Start: "00:00", End: "24:00", MinReplicas: 3},
	}
	got, errs := OpenSchedules(schedules, time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC))
	if len(errs) != 3 {
		t.Errorf("errors %v, want one for each of the three unreadable schedules", errs)
	}
	if got.Minimum != 3 || !cmp.Equal(got.Names, []string{"ok"}) {
		t.Errorf("got %+v, want only schedule ok open", got)
	}
}
