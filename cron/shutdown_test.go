package cron_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/wakuwaku-go/wakuwaku/cron"
	"github.com/wakuwaku-go/wakuwaku/interval"
)

// Every test here runs in a synctest bubble, which fails the test if a
// goroutine is left when the test function returns: passing them shows that
// Shutdown leaves none of the runtime's.

// TestShutdownWaitsForRunInProgress calls Shutdown 5 seconds into a
// 30-second run: it returns nil when the run is done, and the run's context
// was never cancelled.
func TestShutdownWaitsForRunInProgress(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		t0 := time.Now()
		ctxErr := make(chan error, 1)
		job := &testJob{name: "slow", every: interval.AtLeast(time.Hour), process: func(ctx context.Context, _ cron.Tick) error {
			time.Sleep(30 * time.Second)
			ctxErr <- ctx.Err()
			return nil
		}}
		rt, err := cron.Start([]cron.Job{job})
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Second)
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		if err := rt.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown = %v, want nil", err)
		}
		if got := time.Since(t0); got != 30*time.Second {
			t.Errorf("Shutdown returned at +%v, want +30s", got)
		}
		if err := <-ctxErr; err != nil {
			t.Errorf("run's ctx.Err() = %v, want nil", err)
		}
	})
}

// TestShutdownCancelsAtDeadline calls Shutdown with a 10-second deadline
// during a run that waits for its context: at the deadline the run is
// cancelled with cause ErrShutdown and Shutdown returns the deadline's
// error; a second call waits for the cancelled run.
func TestShutdownCancelsAtDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		t0 := time.Now()
		var ev events
		job := &testJob{name: "stubborn", every: interval.AtLeast(time.Hour), process: func(ctx context.Context, _ cron.Tick) error {
			<-ctx.Done()
			time.Sleep(time.Second) // cleaning up
			return context.Cause(ctx)
		}}
		rt, err := cron.Start([]cron.Job{job}, cron.WithObserver(ev.observer()))
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Second)
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		if err := rt.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Shutdown = %v, want %v", err, context.DeadlineExceeded)
		}
		if got := time.Since(t0); got != 15*time.Second {
			t.Errorf("Shutdown returned at +%v, want +15s", got)
		}

		if err := rt.Shutdown(t.Context()); err != nil {
			t.Errorf("second Shutdown = %v, want nil", err)
		}
		if got := time.Since(t0); got != 16*time.Second {
			t.Errorf("second Shutdown returned at +%v, want +16s", got)
		}
		finished := ev.of("finished")
		if len(finished) != 1 || !errors.Is(finished[0].err, cron.ErrShutdown) {
			t.Errorf("finished = %+v, want one run that saw cause %v", finished, cron.ErrShutdown)
		}
	})
}

// TestShutdownTwice checks that Shutdown may be called again, and from
// several goroutines at once, and on a nil runtime.
func TestShutdownTwice(t *testing.T) {
	tests := []struct {
		name   string
		runFor time.Duration
	}{
		{"idle", 0},
		{"busy", time.Minute},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var rec runs
				job := &testJob{name: "job", every: interval.AtLeast(time.Hour), process: sleeper(&rec, tc.runFor)}
				rt, err := cron.Start([]cron.Job{job})
				if err != nil {
					t.Fatal(err)
				}
				synctest.Wait()
				var wg sync.WaitGroup
				for i := range 3 {
					wg.Go(func() {
						if err := rt.Shutdown(t.Context()); err != nil {
							t.Errorf("Shutdown #%d = %v, want nil", i, err)
						}
					})
				}
				wg.Wait()
				if err := rt.Shutdown(t.Context()); err != nil {
					t.Errorf("Shutdown after Shutdown = %v, want nil", err)
				}
			})
		})
	}
	var rt *cron.Runtime
	if err := rt.Shutdown(t.Context()); err != nil {
		t.Errorf("(*Runtime)(nil).Shutdown = %v, want nil", err)
	}
}

// TestShutdownStopsScheduling checks that no run starts after Shutdown,
// not even the next run of a job whose run was in progress.
func TestShutdownStopsScheduling(t *testing.T) {
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
				job := &testJob{name: "job", every: every, process: sleeper(&rec, 8*time.Second)}
				rt, err := cron.Start([]cron.Job{job})
				if err != nil {
					t.Fatal(err)
				}
				time.Sleep(15 * time.Second)
				if err := rt.Shutdown(t.Context()); err != nil {
					t.Fatalf("Shutdown = %v", err)
				}
				time.Sleep(time.Hour)
				starts, _, _ := rec.snapshot()
				want := seconds(0, 10)
				if every == interval.AfterFinish(10*time.Second) {
					want = seconds(0)
				}
				wantTimes(t, "start", t0, starts, want)
			})
		})
	}
}

// TestShutdownWithoutJobs stops a runtime that never had anything to run.
func TestShutdownWithoutJobs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt, err := cron.Start(nil)
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Hour)
		if err := rt.Shutdown(t.Context()); err != nil {
			t.Errorf("Shutdown = %v, want nil", err)
		}
	})
}

// TestShutdownWithEndedContext calls Shutdown with a context that has
// already ended: an idle runtime still stops cleanly and returns nil, and a
// busy one cancels its run at once.
func TestShutdownWithEndedContext(t *testing.T) {
	tests := []struct {
		name string
		busy bool
		want error
	}{
		{"idle", false, nil},
		{"busy", true, context.Canceled},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				t0 := time.Now()
				var ev events
				job := &testJob{name: "job", every: interval.AtLeast(time.Hour), process: func(ctx context.Context, _ cron.Tick) error {
					if tc.busy {
						<-ctx.Done()
						return context.Cause(ctx)
					}
					return nil
				}}
				rt, err := cron.Start([]cron.Job{job}, cron.WithObserver(ev.observer()))
				if err != nil {
					t.Fatal(err)
				}
				synctest.Wait()
				ctx, cancel := context.WithCancel(t.Context())
				cancel()
				if err := rt.Shutdown(ctx); !errors.Is(err, tc.want) {
					t.Errorf("Shutdown = %v, want %v", err, tc.want)
				}
				if err := rt.Shutdown(t.Context()); err != nil {
					t.Errorf("second Shutdown = %v, want nil", err)
				}
				if got := time.Since(t0); got != 0 {
					t.Errorf("Shutdown took %v, want no time", got)
				}
				if finished := ev.of("finished"); len(finished) != 1 || tc.busy != errors.Is(finished[0].err, cron.ErrShutdown) {
					t.Errorf("finished = %+v, want one run, cancelled with %v: %t", finished, cron.ErrShutdown, tc.busy)
				}
			})
		})
	}
}
