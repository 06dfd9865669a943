package cron_test

import (
	"context"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/wakuwaku-go/wakuwaku/cron"
	"github.com/wakuwaku-go/wakuwaku/interval"
)

// seconds turns whole seconds into durations, to keep the tables short.
func seconds(ss ...int) []time.Duration {
	out := make([]time.Duration, len(ss))
	for i, s := range ss {
		out[i] = time.Duration(s) * time.Second
	}
	return out
}

// TestSchedule watches one job for 96 seconds of the bubble's clock, with
// runs faster and slower than its 10-second interval, and checks when each
// run started. The bubble's clock starts at 2000-01-01 00:00:00 UTC, which
// is a slot of the Cron spec; Cron jobs are started 3 seconds later so that
// the startup run is not on a slot.
func TestSchedule(t *testing.T) {
	const watch = 96 * time.Second
	tests := []struct {
		name      string
		every     interval.Interval
		delay     time.Duration // from the bubble's start to Start
		runFor    time.Duration
		starts    []time.Duration // when each run started, from the bubble's start
		scheduled []time.Duration // the Scheduled of each run that started
		runs      []uint64        // the Run of each run that started
		skipped   []time.Duration // the Scheduled of each skipped tick
		overlap   int             // how many runs were in progress at most
	}{
		{
			name:  "AtLeast/fast",
			every: interval.AtLeast(10 * time.Second), runFor: time.Second,
			starts: seconds(0, 10, 20, 30, 40, 50, 60, 70, 80, 90),
			runs:   []uint64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, overlap: 1,
		},
		{
			name:  "AtLeast/slow",
			every: interval.AtLeast(10 * time.Second), runFor: 25 * time.Second,
			starts: seconds(0, 25, 50, 75),
			runs:   []uint64{1, 2, 3, 4}, overlap: 1,
		},
		{
			name:  "AfterFinish/fast",
			every: interval.AfterFinish(10 * time.Second), runFor: time.Second,
			starts: seconds(0, 11, 22, 33, 44, 55, 66, 77, 88),
			runs:   []uint64{1, 2, 3, 4, 5, 6, 7, 8, 9}, overlap: 1,
		},
		{
			name:  "AfterFinish/slow",
			every: interval.AfterFinish(10 * time.Second), runFor: 25 * time.Second,
			starts: seconds(0, 35, 70),
			runs:   []uint64{1, 2, 3}, overlap: 1,
		},
		{
			name:  "AfterStart/fast",
			every: interval.AfterStart(10 * time.Second), runFor: time.Second,
			starts: seconds(0, 10, 20, 30, 40, 50, 60, 70, 80, 90),
			runs:   []uint64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, overlap: 1,
		},
		{
			name:  "AfterStart/slow",
			every: interval.AfterStart(10 * time.Second), runFor: 25 * time.Second,
			starts: seconds(0, 10, 20, 30, 40, 50, 60, 70, 80, 90),
			runs:   []uint64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, overlap: 3,
		},
		{
			name:  "Cron/fast",
			every: interval.MustCron("*/10 * * * * *"), delay: 3 * time.Second, runFor: time.Second,
			starts: seconds(3, 10, 20, 30, 40, 50, 60, 70, 80, 90),
			runs:   []uint64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, overlap: 1,
		},
		{
			name:  "Cron/slow",
			every: interval.MustCron("*/10 * * * * *"), delay: 3 * time.Second, runFor: 25 * time.Second,
			starts:  seconds(3, 30, 60, 90),
			runs:    []uint64{1, 4, 7, 10},
			skipped: seconds(10, 20, 40, 50, 70, 80), overlap: 1,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				t0 := time.Now()
				time.Sleep(tc.delay)
				var rec runs
				var ev events
				job := &testJob{name: "job", every: tc.every, process: sleeper(&rec, tc.runFor)}
				rt, err := cron.Start([]cron.Job{job}, cron.WithObserver(ev.observer()))
				if err != nil {
					t.Fatal(err)
				}
				time.Sleep(watch - tc.delay)
				if err := rt.Shutdown(t.Context()); err != nil {
					t.Fatalf("Shutdown = %v", err)
				}

				starts, ticks, overlap := rec.snapshot()
				t.Logf("%v, runs of %v: started at %v", tc.every, tc.runFor, since(t0, starts))
				wantTimes(t, "start", t0, starts, tc.starts)
				// In a bubble a run starts exactly when it is due.
				wantTimes(t, "scheduled", t0, scheduled(ticks), tc.starts)
				if got := runNumbers(ticks); !slices.Equal(got, tc.runs) {
					t.Errorf("runs = %v, want %v", got, tc.runs)
				}
				if overlap != tc.overlap {
					t.Errorf("at most %d runs at once, want %d", overlap, tc.overlap)
				}
				skips := ev.of("skipped")
				wantTimes(t, "skipped", t0, scheduled(eventTicks(skips)), tc.skipped)
				for i, s := range skips {
					if s.reason != cron.ReasonStillRunning || s.err != nil {
						t.Errorf("skip[%d] = %q, %v; want %q, nil", i, s.reason, s.err, cron.ReasonStillRunning)
					}
				}
			})
		})
	}
}

// TestAfterStartOverlapLimit checks that an AfterStart job slower than its
// interval holds no more runs than its limit, and skips the ticks beyond.
func TestAfterStartOverlapLimit(t *testing.T) {
	tests := []struct {
		name    string
		opts    []cron.Option
		runFor  time.Duration
		watch   time.Duration
		starts  []time.Duration
		skipped []time.Duration
		overlap int
	}{
		{
			name:   "WithMaxOverlap(2)",
			opts:   []cron.Option{cron.WithMaxOverlap(2)},
			runFor: 35 * time.Second, watch: 96 * time.Second,
			starts:  seconds(0, 10, 40, 50, 80, 90),
			skipped: seconds(20, 30, 60, 70),
			overlap: 2,
		},
		{
			name:   "default",
			runFor: time.Hour, watch: 75 * time.Second,
			starts:  seconds(0, 10, 20, 30),
			skipped: seconds(40, 50, 60, 70),
			overlap: cron.DefaultMaxOverlap,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				t0 := time.Now()
				var rec runs
				var ev events
				job := &testJob{name: "pile", every: interval.AfterStart(10 * time.Second), process: sleeper(&rec, tc.runFor)}
				rt, err := cron.Start([]cron.Job{job}, append(tc.opts, cron.WithObserver(ev.observer()))...)
				if err != nil {
					t.Fatal(err)
				}
				time.Sleep(tc.watch)
				if err := rt.Shutdown(t.Context()); err != nil {
					t.Fatalf("Shutdown = %v", err)
				}

				starts, _, overlap := rec.snapshot()
				wantTimes(t, "start", t0, starts, tc.starts)
				if overlap != tc.overlap {
					t.Errorf("at most %d runs at once, want %d", overlap, tc.overlap)
				}
				skips := ev.of("skipped")
				wantTimes(t, "skipped", t0, scheduled(eventTicks(skips)), tc.skipped)
				for i, s := range skips {
					if s.reason != cron.ReasonTooManyRuns {
						t.Errorf("skip[%d] = %q, want %q", i, s.reason, cron.ReasonTooManyRuns)
					}
				}
			})
		})
	}
}

// TestCronTimeZone runs a job at 9:30 in New York across the switch to
// summer time (2 April 2000): the slot moves from 14:30 to 13:30 UTC. With
// runs of 30 hours, the slots that come while a run is going are skipped.
func TestCronTimeZone(t *testing.T) {
	newYork, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	utc := func(day, hour, minute int) time.Time {
		return time.Date(2000, time.March, day, hour, minute, 0, 0, time.UTC)
	}
	begin := utc(31, 0, 0)
	tests := []struct {
		name    string
		runFor  time.Duration
		starts  []time.Time
		skipped []time.Time
	}{
		{
			name:   "fast",
			runFor: time.Minute,
			starts: []time.Time{begin, utc(31, 14, 30), utc(32, 14, 30), utc(33, 13, 30)},
		},
		{
			name:    "slow",
			runFor:  30 * time.Hour,
			starts:  []time.Time{begin, utc(32, 14, 30)},
			skipped: []time.Time{utc(31, 14, 30), utc(33, 13, 30)},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				time.Sleep(time.Until(begin))
				var rec runs
				var ev events
				job := &testJob{name: "report", every: interval.MustCron("CRON_TZ=America/New_York 30 9 * * *"), process: sleeper(&rec, tc.runFor)}
				start(t, []cron.Job{job}, cron.WithObserver(ev.observer()))
				time.Sleep(3 * 24 * time.Hour)

				starts, ticks, _ := rec.snapshot()
				t.Logf("started at %v", starts)
				wantTimes(t, "start", begin, starts, since(begin, tc.starts))
				wantTimes(t, "scheduled", begin, scheduled(ticks), since(begin, tc.starts))
				for i, tick := range ticks[1:] {
					if local := tick.Scheduled.In(newYork); local.Hour() != 9 || local.Minute() != 30 {
						t.Errorf("scheduled[%d] = %v, want 9:30 in New York", i+1, local)
					}
				}
				wantTimes(t, "skipped", begin, scheduled(eventTicks(ev.of("skipped"))), since(begin, tc.skipped))
			})
		})
	}
}

// TestJobsDoNotWaitForEachOther runs a job whose run takes an hour beside
// one that runs every 10 seconds: the second keeps its schedule.
func TestJobsDoNotWaitForEachOther(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		t0 := time.Now()
		var slow, fast runs
		start(t, []cron.Job{
			&testJob{name: "slow", every: interval.AtLeast(10 * time.Second), process: sleeper(&slow, time.Hour)},
			&testJob{name: "fast", every: interval.AtLeast(10 * time.Second), process: sleeper(&fast, time.Second)},
		})
		time.Sleep(45 * time.Second)
		starts, _, _ := fast.snapshot()
		wantTimes(t, "start", t0, starts, seconds(0, 10, 20, 30, 40))
		starts, _, _ = slow.snapshot()
		wantTimes(t, "slow start", t0, starts, seconds(0))
	})
}

// TestBurstRunsDoNotWaitForBlockedOnes runs 1,001 jobs due at one
// instant, of which the first blocks in its second run until the test
// ends: the other 1,000 finish that tick all the same. The first runs are
// quick, so that the second ones go to the runtime's workers, where the
// blocked run sits in a chunk ahead of others.
func TestBurstRunsDoNotWaitForBlockedOnes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 1000
		every := interval.MustCron("*/10 * * * * *")
		release := make(chan struct{})
		blocked := make(chan struct{})
		var finished atomic.Int64
		jobs := []cron.Job{&testJob{name: "blocker", every: every, process: func(_ context.Context, tick cron.Tick) error {
			if tick.Run == 2 {
				close(blocked)
				<-release
			}
			return nil
		}}}
		for i := range n {
			jobs = append(jobs, &testJob{name: "job-" + strconv.Itoa(i), every: every, process: func(_ context.Context, tick cron.Tick) error {
				if tick.Run == 2 {
					finished.Add(1)
				}
				return nil
			}})
		}
		start(t, jobs)
		t.Cleanup(func() { close(release) }) // before the Shutdown that start registered

		time.Sleep(15 * time.Second) // the bubble's clock starts on a slot: the next is 10 s in
		synctest.Wait()
		select {
		case <-blocked:
		default:
			t.Fatal("the blocker's second run did not start")
		}
		if got := finished.Load(); got != n {
			t.Errorf("%d of the other jobs' second runs finished beside the blocked one, want %d", got, n)
		}
	})
}

// TestStartupRunsBeforeStartReturns checks that Start has begun every
// job's startup run when it returns, without the clock moving.
func TestStartupRunsBeforeStartReturns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		t0 := time.Now()
		var ev events
		jobs := make([]cron.Job, 3)
		for i, every := range []interval.Interval{interval.AtLeast(time.Hour), interval.AfterStart(time.Hour), interval.MustCron("@yearly")} {
			jobs[i] = &testJob{name: every.String(), every: every}
		}
		start(t, jobs, cron.WithObserver(ev.observer()))
		synctest.Wait()
		finished := ev.of("finished")
		if len(finished) != len(jobs) {
			t.Fatalf("%d runs finished, want %d", len(finished), len(jobs))
		}
		for _, e := range finished {
			if !e.tick.Scheduled.Equal(t0) || !e.tick.Started.Equal(t0) || e.tick.Run != 1 {
				t.Errorf("startup run of %s = %+v, want run 1 scheduled and started at %v", e.tick.Job, e.tick, t0)
			}
		}
	})
}

// TestProcessContext checks that runs get a live context that is not
// cancelled when Shutdown waits for them in time.
func TestProcessContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		errs := make(chan error, 1)
		job := &testJob{name: "ctx", every: interval.AtLeast(time.Hour), process: func(ctx context.Context, _ cron.Tick) error {
			time.Sleep(time.Minute)
			errs <- ctx.Err()
			return nil
		}}
		rt := start(t, []cron.Job{job})
		if err := rt.Shutdown(t.Context()); err != nil {
			t.Fatalf("Shutdown = %v", err)
		}
		if err := <-errs; err != nil {
			t.Errorf("run's ctx.Err() = %v, want nil", err)
		}
	})
}
