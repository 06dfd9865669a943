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

func TestAccessors(t *testing.T) {
	tests := []struct {
		every     interval.Interval
		str       string
		period    time.Duration
		hasPeriod bool
		spec      string
		isCron    bool
		overlaps  bool
		zero      bool
	}{
		{every: interval.AtLeast(time.Hour), str: "at least 1h0m0s", period: time.Hour, hasPeriod: true},
		{every: interval.AfterFinish(30 * time.Second), str: "after finish 30s", period: 30 * time.Second, hasPeriod: true},
		{every: interval.AfterStart(time.Minute), str: "after start 1m0s", period: time.Minute, hasPeriod: true, overlaps: true},
		{every: interval.MustCron("@hourly"), str: `cron "@hourly"`, spec: "@hourly", isCron: true},
		{every: interval.MustCron("CRON_TZ=Asia/Tokyo 0 9 * * *"), str: `cron "CRON_TZ=Asia/Tokyo 0 9 * * *"`, spec: "CRON_TZ=Asia/Tokyo 0 9 * * *", isCron: true},
		{every: interval.Interval{}, str: "no interval", zero: true},
	}
	for _, tc := range tests {
		t.Run(tc.str, func(t *testing.T) {
			if got := tc.every.String(); got != tc.str {
				t.Errorf("String() = %q, want %q", got, tc.str)
			}
			if got, ok := tc.every.Period(); got != tc.period || ok != tc.hasPeriod {
				t.Errorf("Period() = %v, %t; want %v, %t", got, ok, tc.period, tc.hasPeriod)
			}
			if got, ok := tc.every.Spec(); got != tc.spec || ok != tc.isCron {
				t.Errorf("Spec() = %q, %t; want %q, %t", got, ok, tc.spec, tc.isCron)
			}
			if got := tc.every.Overlaps(); got != tc.overlaps {
				t.Errorf("Overlaps() = %t, want %t", got, tc.overlaps)
			}
			if got := tc.every.IsZero(); got != tc.zero {
				t.Errorf("IsZero() = %t, want %t", got, tc.zero)
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
