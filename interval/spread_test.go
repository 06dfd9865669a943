package interval_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/wakuwaku-go/wakuwaku/interval"
)

func TestDueWithoutSpread(t *testing.T) {
	start := time.Date(2026, time.March, 1, 12, 0, 0, 0, time.UTC)
	for _, every := range []interval.Interval{
		interval.MustCron("@hourly"),
		interval.MustCron("@every 1m"),
		interval.AtLeast(time.Hour),
		interval.AtLeast(time.Hour).WithSpread(time.Minute), // no calendar slots: unchanged
		interval.MustCron("@hourly").WithSpread(time.Minute).WithSpread(0),
	} {
		if got := every.Due("report", start); !got.Equal(start) {
			t.Errorf("%v.Due(report, %v) = %v, want the slot's start", every, start, got)
		}
	}
}

// TestDueSpread checks that a spread's offsets are the same for a name
// wherever they are asked, fall inside the spread and the slot, and cover
// the spread evenly.
func TestDueSpread(t *testing.T) {
	start := time.Date(2026, time.March, 1, 12, 0, 0, 0, time.UTC)
	hourly := interval.MustCron("@hourly").WithSpread(10 * time.Minute)
	again := interval.MustCron("@hourly").WithSpread(10 * time.Minute)
	const n = 10_000
	var buckets [10]int
	for i := range n {
		name := "job-" + strconv.Itoa(i)
		due := hourly.Due(name, start)
		off := due.Sub(start)
		if off < 0 || off >= 10*time.Minute {
			t.Fatalf("Due(%s) = start + %v, want within [0, 10m)", name, off)
		}
		if off%time.Millisecond != 0 {
			t.Fatalf("Due(%s) = start + %v, want whole milliseconds", name, off)
		}
		if other := again.Due(name, start.Add(time.Hour)); other.Sub(start.Add(time.Hour)) != off {
			t.Fatalf("Due(%s) in the next slot = +%v, want +%v, the same offset", name, other.Sub(start.Add(time.Hour)), off)
		}
		buckets[off/time.Minute]++
	}
	for m, c := range buckets {
		if c < n/10*8/10 || c > n/10*12/10 {
			t.Errorf("minute %d of the spread holds %d of %d jobs, want about %d", m, c, n, n/10)
		}
	}
}

func TestDueSpreadShorterSlot(t *testing.T) {
	every := interval.MustCron("*/5 * * * * *").WithSpread(time.Hour)
	start := time.Date(2026, time.March, 1, 12, 0, 5, 0, time.UTC)
	for i := range 1000 {
		name := "job-" + strconv.Itoa(i)
		if off := every.Due(name, start).Sub(start); off < 0 || off >= 5*time.Second {
			t.Fatalf("Due(%s) = start + %v, want within the 5s slot", name, off)
		}
	}
}

// TestPlanSpreadTick checks what a tick due at a job's offset inside a
// slot plans: that slot, due when the tick was, and the next slot's start.
func TestPlanSpreadTick(t *testing.T) {
	for _, spec := range []string{"0 * * * *", "@every 1h", "CRON_TZ=America/New_York 0 * * * *"} {
		every := interval.MustCron(spec).WithSpread(10 * time.Minute)
		start := time.Date(2026, time.March, 1, 12, 0, 0, 0, time.UTC)
		due := every.Due("report", start)
		p := every.Plan(due, due.Add(3*time.Millisecond))
		if !p.Slot.Start.Equal(start) || !p.Scheduled.Equal(due) || p.Late || !p.HasNext || !p.Next.Equal(start.Add(time.Hour)) {
			t.Errorf("%s: Plan(%v) = slot %v, scheduled %v, late %v, next %v %v; want slot 12:00, scheduled %v, next 13:00",
				spec, due, p.Slot.Start, p.Scheduled, p.Late, p.Next, p.HasNext, due)
		}
	}
}

func TestSpreadString(t *testing.T) {
	if got, want := interval.MustCron("@hourly").WithSpread(10*time.Minute).WithoutStartupRun().String(),
		`cron "@hourly", spread 10m0s, no startup run`; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}
