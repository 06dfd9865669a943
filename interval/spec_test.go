package interval_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/wakuwaku-go/wakuwaku/interval"
)

func TestCronInvalid(t *testing.T) {
	specs := []string{
		"",
		"   ",
		"* * * *",
		"* * * * * * *",
		"61 * * * *",
		"*/0 * * * *",
		"5-1 * * * *",
		"@fortnightly",
		"@every soon",
		"@every",
		"@every1h",
		"@every 0s",
		"@every -1h",
		"@every 500ms",
		"@every 999ms",
		"@every 1300000h",
		"@every 87601h",
		"CRON_TZ=UTC @every 0s",
		"CRON_TZ=Mars/Olympus_Mons 0 9 * * *",
		"CRON_TZ=UTC",
		"CRON_TZ=UTC   ",
		"TZ=UTC",
		"CRON_TZ= 0 9 * * *",
		"0 0 30 2 *",
		"0 0 31 4 *",
	}
	for _, spec := range specs {
		t.Run(spec, func(t *testing.T) {
			got, err := interval.Cron(spec)
			var specErr *interval.SpecError
			if !errors.As(err, &specErr) {
				t.Fatalf("Cron(%q) = %v, %v; want a *SpecError", spec, got, err)
			}
			if specErr.Spec != spec || specErr.Err == nil {
				t.Errorf("Cron(%q) error = %#v, want Spec %q and a cause", spec, specErr, spec)
			}
			if !got.IsZero() {
				t.Errorf("Cron(%q) = %v with an error, want the zero Interval", spec, got)
			}
			t.Log(err)
		})
	}
}

func TestMustCronPanics(t *testing.T) {
	defer func() {
		err, _ := recover().(error)
		var specErr *interval.SpecError
		if !errors.As(err, &specErr) {
			t.Errorf("MustCron(%q) panicked with %v, want a *SpecError", "nope", err)
		}
	}()
	interval.MustCron("nope")
}

func TestNextSlot(t *testing.T) {
	tokyo := mustZone(t, "Asia/Tokyo")
	newYork := mustZone(t, "America/New_York")
	tests := []struct {
		name  string
		spec  string
		after time.Time
		want  time.Time
	}{
		{"five fields", "30 * * * *", t0, t0.Add(30 * time.Minute)},
		{"seconds field", "*/15 * * * * *", t0.Add(time.Second), t0.Add(15 * time.Second)},
		{"strictly after", "0 * * * *", t0, t0.Add(time.Hour)},
		{"hourly", "@hourly", t0.Add(time.Nanosecond), t0.Add(time.Hour)},
		{"every is on a grid from the epoch", "@every 90s", t0, t0.Add(90 * time.Second)},
		{"every between grid points", "@every 90s", t0.Add(time.Second), t0.Add(90 * time.Second)},
		{"every with a fraction", "@every 1.5s", t0.Add(time.Second), t0.Add(1500 * time.Millisecond)},
		{"every 7m", "@every 7m", t0, onGrid(t0, 7*time.Minute)},
		{"CRON_TZ", "CRON_TZ=Asia/Tokyo 0 9 * * *", t0, time.Date(2026, time.March, 2, 9, 0, 0, 0, tokyo)},
		{"TZ", "TZ=Asia/Tokyo 0 9 * * *", t0, time.Date(2026, time.March, 2, 9, 0, 0, 0, tokyo)},
		{"CRON_TZ then a tab", "CRON_TZ=Asia/Tokyo\t0 9 * * *", t0, time.Date(2026, time.March, 2, 9, 0, 0, 0, tokyo)},
		// New York moves to summer time on 8 March 2026: 9:30 is 14:30 UTC
		// before and 13:30 UTC after.
		{"before DST", "CRON_TZ=America/New_York 30 9 * * *", time.Date(2026, time.March, 7, 0, 0, 0, 0, time.UTC), time.Date(2026, time.March, 7, 14, 30, 0, 0, time.UTC)},
		{"after DST", "CRON_TZ=America/New_York 30 9 * * *", time.Date(2026, time.March, 7, 15, 0, 0, 0, time.UTC), time.Date(2026, time.March, 8, 13, 30, 0, 0, time.UTC)},
		{"leap day", "0 0 29 2 *", t0, time.Date(2028, time.February, 29, 0, 0, 0, 0, time.UTC)},
		{"zone of the input", "0 9 * * *", t0.In(newYork), time.Date(2026, time.March, 1, 9, 0, 0, 0, newYork)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			every, err := interval.Cron(tc.spec)
			if err != nil {
				t.Fatal(err)
			}
			slot, ok := every.NextSlot(tc.after)
			if got := slot.Start; !ok || !got.Equal(tc.want) {
				t.Errorf("Cron(%q).NextSlot(%v) = %v, %t; want %v, true", tc.spec, tc.after, got, ok, tc.want)
			}
		})
	}
}

func TestNextSlotNotCron(t *testing.T) {
	for _, every := range []interval.Interval{interval.AtLeast(time.Second), {}} {
		if got, ok := every.NextSlot(t0); ok {
			t.Errorf("%v.NextSlot = %v, true; want false", every, got)
		}
		if got, ok := every.LatestSlot(t0, t0.Add(time.Hour)); ok {
			t.Errorf("%v.LatestSlot = %v, true; want false", every, got)
		}
	}
}

func TestLatestSlot(t *testing.T) {
	tests := []struct {
		name         string
		spec         string
		after, until time.Duration
		want         time.Duration
		ok           bool
	}{
		{"none yet", "*/10 * * * * *", 0, 9 * time.Second, 0, false},
		{"one", "*/10 * * * * *", 0, 10 * time.Second, 10 * time.Second, true},
		{"until is inclusive", "*/10 * * * * *", 0, 30 * time.Second, 30 * time.Second, true},
		{"after is exclusive", "*/10 * * * * *", 10 * time.Second, 15 * time.Second, 0, false},
		{"a day of seconds", "* * * * * *", 0, 24*time.Hour + 500*time.Millisecond, 24 * time.Hour, true},
		{"a year of hours", "@hourly", 0, 365*24*time.Hour + 59*time.Minute, 365 * 24 * time.Hour, true},
		{"a dense hour long ago", "* * 13 * * *", 0, 20 * time.Hour, 2*time.Hour - time.Second, true},
		{"until before after", "* * * * * *", time.Hour, 0, 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			every := interval.MustCron(tc.spec)
			slot, ok := every.LatestSlot(at(tc.after), at(tc.until))
			got := slot.Start
			if ok != tc.ok || (ok && !got.Equal(at(tc.want))) {
				t.Errorf("Cron(%q).LatestSlot(+%v, +%v) = %v, %t; want %v, %t", tc.spec, tc.after, tc.until, got, ok, at(tc.want), tc.ok)
			}
		})
	}
}

func FuzzCron(f *testing.F) {
	for _, spec := range []string{
		"* * * * *", "*/5 * * * * *", "0 9 * * MON-FRI", "0 0 1 JAN,JUL ?",
		"@hourly", "@every 1h30m", "@every -1s", "@every 1.5s", "@every 2562047h", "@yearly",
		"CRON_TZ=America/New_York 30 1 * * *", "CRON_TZ=America/Sao_Paulo 0 0 4 11 *", "TZ=Europe/London */15 * * * *",
		"CRON_TZ=Europe/Paris 0 3 * * *", "TZ=UTC @daily", "CRON_TZ=UTC", "CRON_TZ=",
		"", "nope", "61 * * * *", "1-2-3 * * * *", "*/0 * * * *", "0 0 30 2 *",
	} {
		f.Add(spec, int64(0))
	}
	f.Fuzz(func(t *testing.T, spec string, offset int64) {
		every, err := interval.Cron(spec)
		if err != nil {
			var specErr *interval.SpecError
			if !errors.As(err, &specErr) || specErr.Spec != spec {
				t.Fatalf("Cron(%q) error = %v, want a *SpecError quoting the spec", spec, err)
			}
			return
		}
		if got, want := every.String(), fmt.Sprintf("cron %q", spec); got != want {
			t.Fatalf("Cron(%q).String() = %s, want %s", spec, got, want)
		}
		after := t0.Add(time.Duration(offset % int64(100*365*24*time.Hour)))
		slot, ok := every.NextSlot(after)
		next := slot.Start
		if ok && !next.After(after) {
			t.Fatalf("Cron(%q).NextSlot(%v) = %v, not after its input", spec, after, next)
		}
		if next, ok := every.Next(after, after); ok && !next.After(after) {
			t.Fatalf("Cron(%q).Next(%v, %v) = %v, not after its input", spec, after, after, next)
		}
		if ok {
			if !slot.End.After(next) {
				t.Fatalf("Cron(%q).NextSlot(%v) = %v, ending at %v", spec, after, slot, slot.End)
			}
			if latest, found := every.LatestSlot(after, next); !found || !latest.Start.Equal(next) {
				t.Fatalf("Cron(%q).LatestSlot(%v, %v) = %v, %t; want %v", spec, after, next, latest, found, next)
			}
		}
	})
}

func mustZone(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

// onGrid returns the first multiple of d since the Unix epoch after t.
func onGrid(t time.Time, d time.Duration) time.Time {
	ns := t.UnixNano()
	return time.Unix(0, (ns/int64(d)+1)*int64(d)).UTC()
}
