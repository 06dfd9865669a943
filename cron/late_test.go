package cron_test

import (
	"log/slog"
	"slices"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/wakuwaku-go/wakuwaku/cron"
	"github.com/wakuwaku-go/wakuwaku/interval"
)

// steppedClock is the runtime's clock in TestLateWakeUp: the bubble's clock
// plus a step the test sets, as when a machine stalls or its clock jumps
// while the runtime's timer waits.
type steppedClock struct{ step atomic.Int64 }

func (c *steppedClock) now() time.Time {
	return time.Now().Add(time.Duration(c.step.Load()))
}

// TestLateWakeUp steps the runtime's clock an hour ahead 5 seconds after
// Start, while the job's timer waits: when the timer fires, the job is an
// hour behind its schedule. It must run once, not once per missed tick, and
// go on on time from there.
func TestLateWakeUp(t *testing.T) {
	const stall = time.Hour
	tests := []struct {
		name      string
		every     interval.Interval
		delay     time.Duration
		starts    []time.Duration // by the runtime's clock, from the bubble's start
		scheduled []time.Duration
	}{
		{
			name:      "AtLeast",
			every:     interval.AtLeast(10 * time.Second),
			starts:    []time.Duration{0, stall + 10*time.Second, stall + 20*time.Second, stall + 30*time.Second},
			scheduled: []time.Duration{0, 10 * time.Second, stall + 20*time.Second, stall + 30*time.Second},
		},
		{
			name:      "AfterFinish",
			every:     interval.AfterFinish(10 * time.Second),
			starts:    []time.Duration{0, stall + 11*time.Second, stall + 22*time.Second, stall + 33*time.Second},
			scheduled: []time.Duration{0, 11 * time.Second, stall + 22*time.Second, stall + 33*time.Second},
		},
		{
			name:      "AfterStart",
			every:     interval.AfterStart(10 * time.Second),
			starts:    []time.Duration{0, stall + 10*time.Second, stall + 20*time.Second, stall + 30*time.Second},
			scheduled: []time.Duration{0, 10 * time.Second, stall + 20*time.Second, stall + 30*time.Second},
		},
		{
			// A Cron job runs the latest slot it missed.
			name:      "Cron",
			every:     interval.MustCron("*/10 * * * * *"),
			delay:     3 * time.Second,
			starts:    []time.Duration{3 * time.Second, stall + 10*time.Second, stall + 20*time.Second, stall + 30*time.Second},
			scheduled: []time.Duration{3 * time.Second, stall + 10*time.Second, stall + 20*time.Second, stall + 30*time.Second},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				t0 := time.Now()
				time.Sleep(tc.delay)
				var clock steppedClock
				var ev events
				var rec runs
				var logs records
				job := &testJob{name: "late", every: tc.every, process: sleeper(&rec, time.Second)}
				start(t, []cron.Job{job}, cron.WithClock(clock.now), cron.WithObserver(ev.observer()), cron.WithLogger(slog.New(&logs)))
				time.Sleep(5 * time.Second)
				clock.step.Store(int64(stall))
				time.Sleep(31*time.Second + 500*time.Millisecond - tc.delay)

				started := eventTicks(ev.of("started"))
				starts := make([]time.Time, len(started))
				for i, tick := range started {
					starts[i] = tick.Started
				}
				t.Logf("started at %v", since(t0, starts))
				wantTimes(t, "start", t0, starts, tc.starts)
				wantTimes(t, "scheduled", t0, scheduled(started), tc.scheduled)
				if got, want := runNumbers(started), []uint64{1, 2, 3, 4}; !slices.Equal(got, want) {
					t.Errorf("runs = %v, want %v", got, want)
				}
				if late := logs.find("cron job is late; missed ticks run once"); len(late) != 1 || attr(late[0], "tick").Uint64() != 2 {
					t.Errorf("late runs logged: %v, want run 2", late)
				}
				if skips := ev.of("skipped"); len(skips) != 0 {
					t.Errorf("skipped %+v, want none", skips)
				}
			})
		})
	}
}
