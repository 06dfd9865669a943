package cron_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/wakuwaku-go/wakuwaku/cron"
	"github.com/wakuwaku-go/wakuwaku/interval"
)

// names returns the names Jobs lists.
func names(rt *cron.Runtime) []string {
	var out []string
	for _, j := range rt.Jobs() {
		out = append(out, j.Name)
	}
	return out
}

// TestAdd adds jobs to a running runtime: each runs at once (unless it has
// no startup run), then on its schedule, and Jobs lists it with its next
// tick.
func TestAdd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		t0 := time.Now()
		var a, b runs
		rt := start(t, []cron.Job{&testJob{name: "first", every: interval.AtLeast(time.Hour)}})
		time.Sleep(10 * time.Minute)
		if err := rt.Add(&testJob{name: "added", every: interval.AtLeast(time.Hour), process: sleeper(&a, 0)}); err != nil {
			t.Fatalf("Add = %v", err)
		}
		if err := rt.Add(&testJob{name: "quiet", every: interval.MustCron("0 * * * *").WithoutStartupRun(), process: sleeper(&b, 0)}); err != nil {
			t.Fatalf("Add = %v", err)
		}
		synctest.Wait()
		jobs := rt.Jobs()
		if got, want := names(rt), []string{"added", "first", "quiet"}; !slices.Equal(got, want) {
			t.Fatalf("Jobs = %v, want %v", got, want)
		}
		for _, j := range jobs {
			want := map[string]time.Duration{"added": 70 * time.Minute, "first": time.Hour, "quiet": time.Hour}[j.Name]
			if !j.HasNext || j.Next.Sub(t0) != want {
				t.Errorf("Jobs: %s next at +%v (%v), want +%v", j.Name, j.Next.Sub(t0), j.HasNext, want)
			}
		}
		time.Sleep(2*time.Hour + time.Minute)
		starts, _, _ := a.snapshot()
		wantTimes(t, "start of added", t0, starts, []time.Duration{10 * time.Minute, 70 * time.Minute, 130 * time.Minute})
		starts, _, _ = b.snapshot()
		wantTimes(t, "start of quiet", t0, starts, []time.Duration{time.Hour, 2 * time.Hour})
	})
}

func TestAddRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt, err := cron.Start([]cron.Job{&testJob{name: "a", every: interval.AtLeast(time.Hour)}})
		if err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			name string
			job  cron.Job
		}{
			{"nil", nil},
			{"taken name", &testJob{name: "a", every: interval.AtLeast(time.Minute)}},
			{"zero interval", &testJob{name: "b"}},
			{"negative deadline", cron.Func("c", interval.AtLeast(time.Minute), func(context.Context, cron.Tick) error { return nil }, cron.WithRunDeadline(-time.Second))},
		} {
			if err := rt.Add(tc.job); !errors.Is(err, cron.ErrInvalidJob) {
				t.Errorf("Add(%s) = %v, want %v", tc.name, err, cron.ErrInvalidJob)
			}
		}
		if got := names(rt); !slices.Equal(got, []string{"a"}) {
			t.Errorf("Jobs after refused Adds = %v, want [a]", got)
		}
		if err := rt.Shutdown(t.Context()); err != nil {
			t.Fatal(err)
		}
		if err := rt.Add(&testJob{name: "late", every: interval.AtLeast(time.Hour)}); !errors.Is(err, cron.ErrShutdown) {
			t.Errorf("Add after Shutdown = %v, want %v", err, cron.ErrShutdown)
		}
		if err := rt.Remove(t.Context(), "a"); !errors.Is(err, cron.ErrShutdown) {
			t.Errorf("Remove after Shutdown = %v, want %v", err, cron.ErrShutdown)
		}
		if jobs := rt.Jobs(); jobs != nil {
			t.Errorf("Jobs after Shutdown = %v, want none", jobs)
		}
	})
}

// TestRemoveIdle removes a job between its runs: it never runs again, and
// its name is free.
func TestRemoveIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		t0 := time.Now()
		var a runs
		rt := start(t, []cron.Job{
			&testJob{name: "a", every: interval.MustCron("*/10 * * * *"), process: sleeper(&a, 0)},
			&testJob{name: "b", every: interval.AtLeast(time.Hour)},
		})
		time.Sleep(25 * time.Minute)
		if err := rt.Remove(t.Context(), "a"); err != nil {
			t.Fatalf("Remove = %v", err)
		}
		if err := rt.Remove(t.Context(), "a"); !errors.Is(err, cron.ErrUnknownJob) {
			t.Errorf("Remove again = %v, want %v", err, cron.ErrUnknownJob)
		}
		if got := names(rt); !slices.Equal(got, []string{"b"}) {
			t.Errorf("Jobs = %v, want [b]", got)
		}
		time.Sleep(time.Hour)
		starts, _, _ := a.snapshot()
		wantTimes(t, "start of a", t0, starts, []time.Duration{0, 10 * time.Minute, 20 * time.Minute})
		if err := rt.Add(&testJob{name: "a", every: interval.AtLeast(time.Hour)}); err != nil {
			t.Errorf("Add of a removed job's name = %v", err)
		}
	})
}

// TestRemoveRunInProgress removes a job whose run is in progress, in a
// goroutine of its own (its first run) and in one of the runtime's workers
// (a quick job's later run): Remove waits for the run while its context
// lasts, then cancels the run's context with cause ErrRemoved; no other
// run is touched, and no further tick of the job starts one.
func TestRemoveRunInProgress(t *testing.T) {
	for _, tc := range []struct {
		name  string
		run   uint64 // the run that blocks
		every interval.Interval
	}{
		{"first run", 1, interval.AtLeast(time.Minute)},
		{"worker run", 3, interval.AfterStart(time.Minute)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var ev events
				blocked := make(chan struct{})
				var cause error
				job := &testJob{name: "slow", every: tc.every, process: func(ctx context.Context, tk cron.Tick) error {
					if tk.Run != tc.run {
						return nil
					}
					close(blocked)
					<-ctx.Done()
					cause = context.Cause(ctx)
					return cause
				}}
				other := &testJob{name: "other", every: interval.AtLeast(time.Hour), process: func(ctx context.Context, _ cron.Tick) error {
					time.Sleep(time.Hour)
					return ctx.Err()
				}}
				rt := start(t, []cron.Job{job, other}, cron.WithObserver(ev.observer()))
				<-blocked
				time.Sleep(time.Second)

				// A while to wait, then the run is cancelled.
				ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
				defer cancel()
				t0 := time.Now()
				if err := rt.Remove(ctx, "slow"); !errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("Remove = %v, want %v", err, context.DeadlineExceeded)
				}
				if d := time.Since(t0); d != 30*time.Second {
					t.Errorf("Remove returned after %v, want 30s, when its context ended", d)
				}
				synctest.Wait()
				if !errors.Is(cause, cron.ErrRemoved) {
					t.Errorf("the run's context ended with cause %v, want %v", cause, cron.ErrRemoved)
				}
				time.Sleep(10 * time.Minute)
				var slowRuns int
				for _, e := range ev.of("started") {
					if e.tick.Job == "slow" {
						slowRuns++
					}
				}
				if slowRuns != int(tc.run) {
					t.Errorf("slow started %d runs, want %d: none after Remove", slowRuns, tc.run)
				}
				for _, e := range ev.of("finished") {
					if e.tick.Job == "other" {
						t.Errorf("other's run finished with %v while it should still run", e.err)
					}
				}
			})
		})
	}
}

// TestRemoveWaits removes a job whose run is in progress with a context
// that lasts: Remove returns nil once the run returned by itself.
func TestRemoveWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		job := &testJob{name: "slow", every: interval.AtLeast(time.Minute), process: func(ctx context.Context, _ cron.Tick) error {
			time.Sleep(5 * time.Minute)
			return ctx.Err()
		}}
		var ev events
		rt := start(t, []cron.Job{job}, cron.WithObserver(ev.observer()))
		time.Sleep(time.Minute)
		t0 := time.Now()
		if err := rt.Remove(t.Context(), "slow"); err != nil {
			t.Errorf("Remove = %v, want nil", err)
		}
		if d := time.Since(t0); d != 4*time.Minute {
			t.Errorf("Remove returned after %v, want 4m, when the run ended", d)
		}
		if f := ev.of("finished"); len(f) != 1 || f[0].err != nil {
			t.Errorf("finished = %+v, want one run that returned nil", f)
		}
	})
}

// TestReplace replaces a job's interval by name: its next tick is the new
// interval's first after now, with no startup run, and a run in progress
// is not overlapped.
func TestReplace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		t0 := time.Now()
		var old, repl runs
		rt := start(t, []cron.Job{&testJob{name: "report", every: interval.AtLeast(time.Hour), process: sleeper(&old, 20*time.Minute)}})
		time.Sleep(10 * time.Minute)
		if err := rt.Replace(&testJob{name: "report", every: interval.MustCron("*/15 * * * *"), process: sleeper(&repl, 0)}); err != nil {
			t.Fatalf("Replace = %v", err)
		}
		if err := rt.Replace(&testJob{name: "nobody", every: interval.AtLeast(time.Hour)}); !errors.Is(err, cron.ErrUnknownJob) {
			t.Errorf("Replace(nobody) = %v, want %v", err, cron.ErrUnknownJob)
		}
		jobs := rt.Jobs()
		if len(jobs) != 1 || jobs[0].Interval.String() != `cron "*/15 * * * *"` || jobs[0].Next.Sub(t0) != 15*time.Minute || jobs[0].Running != 1 {
			t.Errorf("Jobs = %+v, want report on */15, next at +15m, running 1", jobs)
		}
		time.Sleep(40 * time.Minute)
		starts, _, maxActive := old.snapshot()
		wantTimes(t, "start of the old job", t0, starts, []time.Duration{0})
		// The 15 min slot comes while the old run goes on (until 20 min):
		// skipped.
		starts, _, _ = repl.snapshot()
		wantTimes(t, "start of the new job", t0, starts, []time.Duration{30 * time.Minute, 45 * time.Minute})
		if maxActive != 1 {
			t.Errorf("%d runs at once, want 1", maxActive)
		}
	})
}

// TestReplaceDurationCountsFromLastRun replaces a duration policy's
// interval twice within an interval, as a deploy and its rollback do: the
// next tick counts each new interval from the last run, not from the
// Replace, so the pair does not put the job's run off by the time between
// them and the last run (simulator seed 40511: no run for 2h8m of an
// hourly job).
func TestReplaceDurationCountsFromLastRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		t0 := time.Now()
		var rec runs
		rt := start(t, []cron.Job{&testJob{name: "report", every: interval.AfterFinish(time.Hour), process: sleeper(&rec, 0)}})
		time.Sleep(50 * time.Minute) // the startup run ended at t0
		if err := rt.Replace(&testJob{name: "report", every: interval.AfterFinish(30 * time.Minute), process: sleeper(&rec, 0)}); err != nil {
			t.Fatalf("Replace = %v", err)
		}
		if jobs := rt.Jobs(); len(jobs) != 1 || !jobs[0].Next.Equal(t0.Add(50*time.Minute)) {
			t.Errorf("Jobs = %+v after a Replace 50m after the last run by AfterFinish(30m), want next at once (+50m)", jobs)
		}
		synctest.Wait()
		if err := rt.Replace(&testJob{name: "report", every: interval.AfterFinish(time.Hour), process: sleeper(&rec, 0)}); err != nil {
			t.Fatalf("Replace = %v", err)
		}
		time.Sleep(2*time.Hour + 30*time.Minute)
		starts, _, _ := rec.snapshot()
		wantTimes(t, "start", t0, starts, []time.Duration{0, 50 * time.Minute, 110 * time.Minute, 170 * time.Minute})
	})
}

// TestSpread runs jobs whose interval spreads their runs: each runs at its
// own offset into each slot, told in its tick, which names the slot.
func TestSpread(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		t0 := time.Now() // midnight: a slot's start
		every := interval.MustCron("0 * * * *").WithSpread(10 * time.Minute)
		recs := map[string]*runs{"a": new(runs), "b": new(runs), "c": new(runs)}
		var jobs []cron.Job
		for name, rec := range recs {
			jobs = append(jobs, &testJob{name: name, every: every, process: sleeper(rec, 0)})
		}
		start(t, jobs)
		time.Sleep(3 * time.Hour)
		for name, rec := range recs {
			off := every.Due(name, t0).Sub(t0)
			if off <= 0 {
				t.Fatalf("%s's offset is %v, want one inside the spread", name, off)
			}
			starts, ticks, _ := rec.snapshot()
			wantTimes(t, "start of "+name, t0, starts, []time.Duration{0, time.Hour + off, 2*time.Hour + off})
			for i, tk := range ticks[1:] {
				slot := t0.Add(time.Duration(i+1) * time.Hour)
				if !tk.Slot.Start.Equal(slot) || !tk.Scheduled.Equal(slot.Add(off)) {
					t.Errorf("%s run %d: slot %v, scheduled %v; want slot %v, scheduled %v", name, i+2, tk.Slot.Start, tk.Scheduled, slot, slot.Add(off))
				}
			}
		}
	})
}
