package cron_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"testing/synctest"
	"time"

	"github.com/wakuwaku-go/wakuwaku/cron"
	"github.com/wakuwaku-go/wakuwaku/interval"
)

var errRedisDown = errors.New("redis is down")

// TestAdmission puts an admission in front of a job that runs for a second
// and refuses, fails or panics on one of its ticks: that tick is skipped and
// reported, and counts for the schedule as a run that took no time.
func TestAdmission(t *testing.T) {
	const (
		held    = "held by another replica"
		skipped = "cron job skipped a run"
		failing = "cron job's admission failed; its runs are skipped until it succeeds"
	)
	tests := []struct {
		name       string
		every      interval.Interval
		refuse     uint64 // the run the admission refuses
		admit      func() (bool, string, error)
		starts     []time.Duration
		reason     string
		err        error
		panicked   bool
		logMessage string
		logLevel   slog.Level
	}{
		{
			name:  "AtLeast refused at startup",
			every: interval.AtLeast(10 * time.Second), refuse: 1,
			admit:  func() (bool, string, error) { return false, held, nil },
			starts: seconds(10, 20, 30),
			reason: held, logMessage: skipped, logLevel: slog.LevelDebug,
		},
		{
			name:  "AfterFinish refused",
			every: interval.AfterFinish(10 * time.Second), refuse: 2,
			admit:  func() (bool, string, error) { return false, held, nil },
			starts: seconds(0, 21, 32),
			reason: held, logMessage: skipped, logLevel: slog.LevelDebug,
		},
		{
			name:  "AfterStart refused without a reason",
			every: interval.AfterStart(10 * time.Second), refuse: 2,
			admit:  func() (bool, string, error) { return false, "", nil },
			starts: seconds(0, 20, 30),
			reason: cron.ReasonNotAdmitted, logMessage: skipped, logLevel: slog.LevelDebug,
		},
		{
			name:  "AtLeast admission error",
			every: interval.AtLeast(10 * time.Second), refuse: 2,
			admit:  func() (bool, string, error) { return true, "", errRedisDown },
			starts: seconds(0, 20, 30),
			reason: cron.ReasonAdmissionFailed, err: errRedisDown,
			logMessage: failing, logLevel: slog.LevelError,
		},
		{
			name:  "Cron admission panic",
			every: interval.MustCron("*/10 * * * * *"), refuse: 3,
			admit:  func() (bool, string, error) { panic(errRedisDown) },
			starts: seconds(0, 10, 30),
			reason: cron.ReasonAdmissionFailed, err: errRedisDown, panicked: true,
			logMessage: failing, logLevel: slog.LevelError,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				t0 := time.Now()
				var rec runs
				var ev events
				var logs records
				var admitted list[cron.Tick]
				job := &testJob{name: "leased", every: tc.every, process: sleeper(&rec, time.Second)}
				admit := func(ctx context.Context, tick cron.Tick) (bool, string, error) {
					admitted.add(tick)
					if ctx.Err() != nil {
						t.Errorf("admission's ctx.Err() = %v, want nil", ctx.Err())
					}
					if tick.Run == tc.refuse {
						return tc.admit()
					}
					return true, "", nil
				}
				start(t, []cron.Job{job}, cron.WithAdmission("leased", admit),
					cron.WithObserver(ev.observer()), cron.WithLogger(slog.New(&logs)))
				time.Sleep(35 * time.Second)

				starts, ticks, _ := rec.snapshot()
				wantTimes(t, "start", t0, starts, tc.starts)
				for i, tick := range ticks {
					if tick.Run == tc.refuse {
						t.Errorf("run %d ran (start[%d]), want it skipped", tc.refuse, i)
					}
				}
				if got := admitted.get(); len(got) != len(starts)+1 || got[0].Run != 1 {
					t.Errorf("admission saw %+v, want every tick from run 1", got)
				}

				skips := ev.of("skipped")
				if len(skips) != 1 {
					t.Fatalf("skipped %+v, want run %d", skips, tc.refuse)
				}
				s := skips[0]
				var p *cron.PanicError
				if s.tick.Run != tc.refuse || s.reason != tc.reason || !errors.Is(s.err, tc.err) || errors.As(s.err, &p) != tc.panicked {
					t.Errorf("skipped run %d, %q, %v; want run %d, %q, %v", s.tick.Run, s.reason, s.err, tc.refuse, tc.reason, tc.err)
				}
				if got := len(ev.of("started")); got != len(starts) {
					t.Errorf("observer saw %d runs start, want %d", got, len(starts))
				}

				logged := logs.find(tc.logMessage)
				if len(logged) != 1 {
					t.Fatalf("%d records %q, want 1", len(logged), tc.logMessage)
				}
				l := logged[0]
				logErr, _ := attr(l, "error").Any().(error)
				if l.Level != tc.logLevel || attr(l, "reason").String() != tc.reason || !errors.Is(logErr, tc.err) {
					t.Errorf("skip logged as %v %v, want level %v, reason %q, error %v", l.Level, l, tc.logLevel, tc.reason, tc.err)
				}
			})
		})
	}
}

// TestAdmissionSeesTheSlot checks that a Cron job's admission is handed
// the slot, so a lease can be keyed by it.
func TestAdmissionSeesTheSlot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		t0 := time.Now()
		time.Sleep(3 * time.Second)
		var seen list[time.Time]
		job := &testJob{name: "slots", every: interval.MustCron("*/10 * * * * *")}
		start(t, []cron.Job{job}, cron.WithAdmission("slots", func(_ context.Context, tick cron.Tick) (bool, string, error) {
			seen.add(tick.Scheduled)
			return true, "", nil
		}))
		time.Sleep(25 * time.Second)
		wantTimes(t, "admitted", t0, seen.get(), seconds(3, 10, 20))
	})
}
