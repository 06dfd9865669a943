package interval_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/wakuwaku-go/wakuwaku/interval"
)

var t0 = time.Date(2026, time.March, 1, 12, 0, 0, 0, time.UTC)

func at(offset time.Duration) time.Time { return t0.Add(offset) }

func TestNext(t *testing.T) {
	const d = 10 * time.Second
	tests := []struct {
		name          string
		every         interval.Interval
		start, finish time.Duration
		want          time.Duration
	}{
		{"AtLeast/fast", interval.AtLeast(d), 0, 2 * time.Second, d},
		{"AtLeast/slow", interval.AtLeast(d), 0, 25 * time.Second, 25 * time.Second},
		{"AtLeast/exactly one period", interval.AtLeast(d), 0, d, d},
		{"AtLeast/skipped", interval.AtLeast(d), 0, 0, d},
		{"AfterFinish/fast", interval.AfterFinish(d), 0, 2 * time.Second, 12 * time.Second},
		{"AfterFinish/slow", interval.AfterFinish(d), 0, 25 * time.Second, 35 * time.Second},
		{"AfterFinish/skipped", interval.AfterFinish(d), 0, 0, d},
		{"AfterStart/fast", interval.AfterStart(d), 0, 2 * time.Second, d},
		{"AfterStart/slow", interval.AfterStart(d), 0, 25 * time.Second, d},
		{"Cron/fast", interval.MustCron("*/10 * * * * *"), 0, 2 * time.Second, d},
		{"Cron/slow skips the slots the run covers", interval.MustCron("*/10 * * * * *"), 0, 25 * time.Second, 30 * time.Second},
		{"Cron/finishing on a slot runs it", interval.MustCron("*/10 * * * * *"), 0, 20 * time.Second, 20 * time.Second},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := tc.every.Next(at(tc.start), at(tc.finish))
			if !ok || !got.Equal(at(tc.want)) {
				t.Errorf("%v.Next(+%v, +%v) = %v, %t; want %v, true", tc.every, tc.start, tc.finish, got, ok, at(tc.want))
			}
		})
	}
}

func TestNextZero(t *testing.T) {
	if got, ok := (interval.Interval{}).Next(t0, t0); ok {
		t.Errorf("Interval{}.Next = %v, true; want false", got)
	}
}

func TestString(t *testing.T) {
	tests := []struct {
		every interval.Interval
		str   string
		zero  bool
	}{
		{every: interval.AtLeast(time.Hour), str: "at least 1h0m0s"},
		{every: interval.AfterFinish(30 * time.Second), str: "after finish 30s"},
		{every: interval.AfterStart(time.Minute), str: "after start 1m0s"},
		{every: interval.MustCron("@hourly"), str: `cron "@hourly"`},
		{every: interval.MustCron("@every 2s"), str: `cron "@every 2s"`},
		{every: interval.MustCron("CRON_TZ=Asia/Tokyo 0 9 * * *"), str: `cron "CRON_TZ=Asia/Tokyo 0 9 * * *"`},
		{every: interval.MustCron("0 3 * * *").WithoutStartupRun(), str: `cron "0 3 * * *", no startup run`},
		{every: interval.Interval{}, str: "no interval", zero: true},
		{every: interval.Interval{}.WithoutStartupRun(), str: "no interval", zero: true},
	}
	for _, tc := range tests {
		t.Run(tc.str, func(t *testing.T) {
			if got := tc.every.String(); got != tc.str {
				t.Errorf("String() = %q, want %q", got, tc.str)
			}
			if got := tc.every.IsZero(); got != tc.zero {
				t.Errorf("IsZero() = %t, want %t", got, tc.zero)
			}
		})
	}
}

func TestPlanDuration(t *testing.T) {
	const d = 10 * time.Second
	tests := []struct {
		name     string
		every    interval.Interval
		due, now time.Duration
		want     interval.Plan
	}{
		{"AtLeast/on time", interval.AtLeast(d), 0, time.Millisecond,
			interval.Plan{Scheduled: at(0), Slot: interval.Slot{Start: at(time.Millisecond), End: at(d + time.Millisecond)}, AtFinish: true}},
		{"AtLeast/late", interval.AtLeast(d), 0, 25 * time.Second,
			interval.Plan{Scheduled: at(0), Slot: interval.Slot{Start: at(25 * time.Second), End: at(35 * time.Second)}, Late: true, AtFinish: true}},
		{"AfterFinish/on time", interval.AfterFinish(d), 0, 0,
			interval.Plan{Scheduled: at(0), Slot: interval.Slot{Start: at(0), End: at(d)}, AtFinish: true}},
		{"AfterStart/on time counts from due", interval.AfterStart(d), 0, time.Second,
			interval.Plan{Scheduled: at(0), Slot: interval.Slot{Start: at(0), End: at(d)}, Overlap: true, Next: at(d), HasNext: true}},
		{"AfterStart/late goes on from now", interval.AfterStart(d), 0, 25 * time.Second,
			interval.Plan{Scheduled: at(0), Slot: interval.Slot{Start: at(25 * time.Second), End: at(35 * time.Second)}, Late: true, Overlap: true, Next: at(35 * time.Second), HasNext: true}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.every.Plan(at(tc.due), at(tc.now))
			if got != tc.want {
				t.Errorf("%v.Plan(+%v, +%v) = %+v, want %+v", tc.every, tc.due, tc.now, got, tc.want)
			}
			if key, ok := got.Slot.Key(); ok {
				t.Errorf("%v.Plan(...).Slot.Key() = %q, true; a duration policy's slot has no key", tc.every, key)
			}
		})
	}
}

func TestFirst(t *testing.T) {
	tests := []struct {
		every interval.Interval
		want  time.Time
	}{
		{interval.AtLeast(time.Hour), t0},
		{interval.MustCron("0 3 * * *"), t0},
		{interval.AtLeast(time.Hour).WithoutStartupRun(), t0.Add(time.Hour)},
		{interval.AfterStart(time.Minute).WithoutStartupRun(), t0.Add(time.Minute)},
		{interval.MustCron("0 3 * * *").WithoutStartupRun(), time.Date(2026, time.March, 2, 3, 0, 0, 0, time.UTC)},
		{interval.MustCron("@every 7m").WithoutStartupRun(), onGrid(t0, 7*time.Minute)},
	}
	for _, tc := range tests {
		t.Run(tc.every.String(), func(t *testing.T) {
			if got, ok := tc.every.First(t0); !ok || !got.Equal(tc.want) {
				t.Errorf("%v.First(%v) = %v, %t; want %v, true", tc.every, t0, got, ok, tc.want)
			}
		})
	}
	if got, ok := (interval.Interval{}).First(t0); ok {
		t.Errorf("Interval{}.First = %v, true; want false", got)
	}
}

func TestCheckLease(t *testing.T) {
	tests := []struct {
		every interval.Interval
		ttl   time.Duration
		ok    bool
	}{
		{interval.AtLeast(time.Hour), 0, true},
		{interval.AtLeast(time.Hour), 59 * time.Minute, true},
		{interval.AtLeast(time.Hour), time.Hour, false},
		{interval.AfterFinish(time.Hour), 2 * time.Hour, false},
		{interval.AfterStart(time.Hour), time.Hour, false},
		{interval.AtLeast(time.Hour), -time.Second, false},
		{interval.MustCron("@hourly"), 3 * time.Hour, true},
		{interval.MustCron("@every 1m"), time.Hour, true},
		{interval.MustCron("@hourly"), -time.Second, false},
		{interval.MustCron("@hourly").WithSpread(10 * time.Minute), 0, true},
		{interval.MustCron("@hourly").WithSpread(10 * time.Minute), 11 * time.Minute, true},
		{interval.MustCron("@hourly").WithSpread(10 * time.Minute), 10 * time.Minute, false},
		{interval.MustCron("@hourly").WithSpread(10 * time.Minute), 5 * time.Minute, false},
		{interval.MustCron("@hourly").WithSpread(10 * time.Minute), -time.Second, false},
		{interval.AtLeast(time.Hour).WithSpread(10 * time.Minute), 5 * time.Minute, true}, // no spread: its own slots
		{interval.Interval{}, 0, false},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%v/%v", tc.every, tc.ttl), func(t *testing.T) {
			if err := tc.every.CheckLease(tc.ttl); (err == nil) != tc.ok {
				t.Errorf("%v.CheckLease(%v) = %v, want ok %t", tc.every, tc.ttl, err, tc.ok)
			}
		})
	}
}

func TestLeaseEnd(t *testing.T) {
	tests := []struct {
		name string
		slot interval.Slot
		ttl  time.Duration
		want time.Time
	}{
		{"duration policy default", interval.AtLeast(time.Hour).Plan(t0, t0).Slot, 0, t0.Add(55 * time.Minute)},
		{"duration policy given", interval.AtLeast(time.Hour).Plan(t0, t0).Slot, 10 * time.Minute, t0.Add(10 * time.Minute)},
		{"taken late still ends where its tick says", interval.AfterStart(time.Hour).Plan(t0, t0.Add(time.Second)).Slot, 0, t0.Add(55 * time.Minute)},
		{"cron default is two slots", interval.MustCron("@hourly").Plan(t0, t0).Slot, 0, t0.Add(2 * time.Hour)},
		{"cron given", interval.MustCron("@hourly").Plan(t0, t0).Slot, time.Minute, t0.Add(time.Minute)},
		{"every default", interval.MustCron("@every 2s").Plan(t0, t0.Add(time.Second)).Slot, 0, t0.Add(4 * time.Second)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.slot.LeaseEnd(tc.ttl); !got.Equal(tc.want) {
				t.Errorf("%v.LeaseEnd(%v) = %v, want %v", tc.slot, tc.ttl, got, tc.want)
			}
		})
	}
}

func TestDurationMustBePositive(t *testing.T) {
	constructors := []struct {
		name string
		new  func(time.Duration) interval.Interval
	}{
		{"AtLeast", interval.AtLeast},
		{"AfterFinish", interval.AfterFinish},
		{"AfterStart", interval.AfterStart},
	}
	for _, c := range constructors {
		for _, d := range []time.Duration{0, -time.Second} {
			t.Run(fmt.Sprintf("%s(%v)", c.name, d), func(t *testing.T) {
				want := fmt.Sprintf("interval: %s(%v): the duration must be positive", c.name, d)
				defer func() {
					if got := recover(); got != want {
						t.Errorf("%s(%v) panicked with %v, want %q", c.name, d, got, want)
					}
				}()
				c.new(d)
			})
		}
	}
}

func TestEqual(t *testing.T) {
	if interval.AtLeast(time.Hour) != interval.AtLeast(time.Hour) {
		t.Error("AtLeast(1h) != AtLeast(1h)")
	}
	if interval.AtLeast(time.Hour) == interval.AfterFinish(time.Hour) {
		t.Error("AtLeast(1h) == AfterFinish(1h)")
	}
}
