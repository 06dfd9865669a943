package cron_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/wakuwaku-go/wakuwaku/cron"
	"github.com/wakuwaku-go/wakuwaku/interval"
	"github.com/wakuwaku-go/wakuwaku/lock"
)

// TestFunc checks that a job made by Func has the name, interval and work
// it was given, and is Leased exactly when it has a lease.
func TestFunc(t *testing.T) {
	every := interval.AtLeast(time.Hour)
	lease := cron.LeaseConfig{DB: lock.NewDB(nil), Name: "reports", TTL: time.Minute}
	tests := []struct {
		name   string
		opts   []cron.FuncOption
		leased bool
	}{
		{"plain", nil, false},
		{"leased", []cron.FuncOption{cron.WithLease(lease)}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got cron.Tick
			j := cron.Func("report", every, func(_ context.Context, tick cron.Tick) error {
				got = tick
				return errKaput
			}, tc.opts...)
			if name := cron.JobName(j); name != "report" {
				t.Errorf("JobName = %q, want %q", name, "report")
			}
			if j.Interval() != every {
				t.Errorf("Interval = %v, want %v", j.Interval(), every)
			}
			if err := j.Process(t.Context(), cron.Tick{Run: 7}); !errors.Is(err, errKaput) || got.Run != 7 {
				t.Errorf("Process = %v with run %d, want %v with run 7", err, got.Run, errKaput)
			}
			l, ok := j.(cron.Leased)
			if ok != tc.leased {
				t.Fatalf("Func(...) is Leased = %v, want %v", ok, tc.leased)
			}
			if got := l; ok && (got.Lease().Name != lease.Name || got.Lease().TTL != lease.TTL) {
				t.Errorf("Lease = %+v, want %+v", l.Lease(), lease)
			}
		})
	}
}

// TestFuncRunsOnSchedule checks that a Func job runs at startup and then
// on its schedule, and not at startup when its interval says so.
func TestFuncRunsOnSchedule(t *testing.T) {
	tests := []struct {
		name  string
		every interval.Interval
		want  []time.Duration
	}{
		{"startup", interval.AtLeast(time.Hour), []time.Duration{0, time.Hour, 2 * time.Hour}},
		{"without startup", interval.AtLeast(time.Hour).WithoutStartupRun(), []time.Duration{time.Hour, 2 * time.Hour}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				t0 := time.Now()
				var rec runs
				start(t, []cron.Job{cron.Func("f", tc.every, sleeper(&rec, 0))})
				time.Sleep(2*time.Hour + time.Minute)
				starts, _, _ := rec.snapshot()
				wantTimes(t, "start", t0, starts, tc.want)
			})
		})
	}
}

// TestFuncPanicsOnNil checks Func's refusal of a nil function and a nil
// option.
func TestFuncPanicsOnNil(t *testing.T) {
	tests := []struct {
		name string
		f    func(context.Context, cron.Tick) error
		opts []cron.FuncOption
	}{
		{"nil func", nil, nil},
		{"nil option", func(context.Context, cron.Tick) error { return nil }, []cron.FuncOption{nil}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Errorf("Func did not panic")
				}
			}()
			cron.Func("f", interval.AtLeast(time.Hour), tc.f, tc.opts...)
		})
	}
}
