package cron_test

import (
	"context"
	"errors"
	"log/slog"
	"runtime"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/wakuwaku-go/wakuwaku/cron"
	"github.com/wakuwaku-go/wakuwaku/interval"
)

var (
	errBoom  = errors.New("boom")
	errKaput = errors.New("kaput")
)

// TestFailuresKeepTheSchedule makes run 2 of a job return an error and run
// 3 panic, and checks that both are logged and observed and that the job
// keeps its schedule under every policy.
func TestFailuresKeepTheSchedule(t *testing.T) {
	policies := []interval.Interval{
		interval.AtLeast(10 * time.Second),
		interval.AfterFinish(10 * time.Second),
		interval.AfterStart(10 * time.Second),
		interval.MustCron("*/10 * * * * *"),
	}
	for _, every := range policies {
		t.Run(every.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				t0 := time.Now()
				var rec runs
				var ev events
				var logs records
				job := &testJob{name: "flaky", every: every, process: func(_ context.Context, tick cron.Tick) error {
					rec.begin(tick)
					defer rec.end()
					switch tick.Run {
					case 2:
						return errBoom
					case 3:
						panic(errKaput)
					}
					return nil
				}}
				start(t, []cron.Job{job}, cron.WithObserver(ev.observer()), cron.WithLogger(slog.New(&logs)))
				time.Sleep(45 * time.Second)

				starts, _, _ := rec.snapshot()
				wantTimes(t, "start", t0, starts, seconds(0, 10, 20, 30, 40))

				finished := ev.of("finished")
				if len(finished) != 5 {
					t.Fatalf("%d runs finished, want 5", len(finished))
				}
				for i, e := range finished {
					var p *cron.PanicError
					switch {
					case i == 1 && !errors.Is(e.err, errBoom):
						t.Errorf("finished[1].err = %v, want %v", e.err, errBoom)
					case i == 2 && (!errors.As(e.err, &p) || p.Value != errKaput || len(p.Stack) == 0 || e.tick.Run != 3):
						t.Errorf("finished[2] = run %d, %v; want run 3, a *PanicError of %v with its stack", e.tick.Run, e.err, errKaput)
					case i != 1 && i != 2 && e.err != nil:
						t.Errorf("finished[%d].err = %v, want nil", i, e.err)
					}
				}

				failed := logs.find("cron job failed")
				if len(failed) != 1 {
					t.Fatalf("%d failures logged, want 1", len(failed))
				}
				if err, _ := attr(failed[0], "error").Any().(error); failed[0].Level != slog.LevelError ||
					attr(failed[0], "job").String() != "flaky" || attr(failed[0], "tick").Uint64() != 2 || !errors.Is(err, errBoom) {
					t.Errorf("failure logged as %v %v, want level ERROR, job flaky, run 2, error %v", failed[0].Level, failed[0], errBoom)
				}
				panicked := logs.find("cron job panicked")
				if len(panicked) != 1 {
					t.Fatalf("%d panics logged, want 1", len(panicked))
				}
				if p := panicked[0]; p.Level != slog.LevelError || attr(p, "tick").Uint64() != 3 ||
					attr(p, "panic").Any() != errKaput || attr(p, "stack").String() == "" {
					t.Errorf("panic logged as %v %v, want level ERROR, run 3, its value and stack", p.Level, p)
				}
				if got := len(logs.find("cron job finished")); got != 3 {
					t.Errorf("%d successful runs logged, want 3", got)
				}
			})
		})
	}
}

// TestGoexitKeepsTheSchedule checks that a run that ends its goroutine
// (runtime.Goexit, as t.FailNow does) still counts as finished.
func TestGoexitKeepsTheSchedule(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		t0 := time.Now()
		var rec runs
		job := &testJob{name: "goexit", every: interval.AtLeast(10 * time.Second), process: func(_ context.Context, tick cron.Tick) error {
			rec.begin(tick)
			if tick.Run == 1 {
				runtime.Goexit()
			}
			return nil
		}}
		start(t, []cron.Job{job})
		time.Sleep(25 * time.Second)
		starts, _, _ := rec.snapshot()
		wantTimes(t, "start", t0, starts, seconds(0, 10, 20))
	})
}

// TestPanicValues checks what a PanicError says and unwraps to.
func TestPanicValues(t *testing.T) {
	tests := []struct {
		name   string
		value  any
		unwrap error
	}{
		{"error", errKaput, errKaput},
		{"string", "kaput", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var ev events
				job := &testJob{name: "panics", every: interval.AtLeast(time.Hour), process: func(context.Context, cron.Tick) error {
					panic(tc.value)
				}}
				start(t, []cron.Job{job}, cron.WithObserver(ev.observer()))
				synctest.Wait()
				finished := ev.of("finished")
				if len(finished) != 1 {
					t.Fatalf("%d runs finished, want 1", len(finished))
				}
				var p *cron.PanicError
				if !errors.As(finished[0].err, &p) {
					t.Fatalf("err = %v, want a *PanicError", finished[0].err)
				}
				if got := p.Unwrap(); got != tc.unwrap {
					t.Errorf("Unwrap() = %v, want %v", got, tc.unwrap)
				}
				if p.Error() == "" || !slices.Contains(p.Stack, '\n') {
					t.Errorf("PanicError = %q with stack %q, want a message and a stack", p.Error(), p.Stack)
				}
			})
		})
	}
}

// TestPanicNil checks that panic(nil) is recovered and reported like any
// other panic (since Go 1.21 its value is a *runtime.PanicNilError).
func TestPanicNil(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var ev events
		job := &testJob{name: "nil", every: interval.AtLeast(time.Hour), process: func(context.Context, cron.Tick) error {
			panic(nil)
		}}
		start(t, []cron.Job{job}, cron.WithObserver(ev.observer()))
		synctest.Wait()
		var pne *runtime.PanicNilError
		if finished := ev.of("finished"); len(finished) != 1 || !errors.As(finished[0].err, &pne) {
			t.Errorf("finished = %+v, want one run failed with a *runtime.PanicNilError", finished)
		}
	})
}
