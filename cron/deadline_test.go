package cron_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"testing/synctest"
	"time"

	"github.com/wakuwaku-go/wakuwaku/cron"
	"github.com/wakuwaku-go/wakuwaku/internal/redistest"
	"github.com/wakuwaku-go/wakuwaku/interval"
	"github.com/wakuwaku-go/wakuwaku/lock"
)

// TestRunDeadline runs jobs with a run deadline: a run that honours its
// context ends at the deadline with cause ErrRunDeadline; one that returns
// nil past it is a timeout too; one that returns in time is not; and the
// logger and the observer say timeout.
func TestRunDeadline(t *testing.T) {
	for _, tc := range []struct {
		name        string
		work        func(ctx context.Context) error
		took        time.Duration
		timeout     bool
		wantOutcome string
	}{
		{"honours its context", func(ctx context.Context) error {
			<-ctx.Done()
			return context.Cause(ctx)
		}, time.Minute, true, "timeout"},
		{"returns its own error", func(ctx context.Context) error {
			<-ctx.Done()
			return errors.New("gave up")
		}, time.Minute, true, "timeout"},
		{"ignores its context", func(ctx context.Context) error {
			time.Sleep(2 * time.Minute)
			return nil
		}, 2 * time.Minute, true, "timeout"},
		{"in time", func(ctx context.Context) error {
			time.Sleep(30 * time.Second)
			return nil
		}, 30 * time.Second, false, "ok"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var ev events
				var logs records
				var cause error
				job := cron.Func("bounded", interval.AtLeast(time.Hour), func(ctx context.Context, _ cron.Tick) error {
					err := tc.work(ctx)
					cause = context.Cause(ctx)
					return err
				}, cron.WithRunDeadline(time.Minute))
				start(t, []cron.Job{job}, cron.WithObserver(ev.observer()), cron.WithLogger(slog.New(&logs)))
				time.Sleep(5 * time.Minute)
				f := ev.of("finished")
				if len(f) != 1 {
					t.Fatalf("%d runs finished, want 1", len(f))
				}
				if got := errors.Is(f[0].err, cron.ErrRunDeadline); got != tc.timeout {
					t.Errorf("the run's error %v is ErrRunDeadline: %v, want %v", f[0].err, got, tc.timeout)
				}
				if tc.name == "returns its own error" && (f[0].err == nil || !errors.Is(f[0].err, cron.ErrRunDeadline) || f[0].err.Error() != "cron: run deadline exceeded (1m0s): gave up") {
					t.Errorf("the run's error = %v, want the deadline and the job's own", f[0].err)
				}
				if f[0].took != tc.took {
					t.Errorf("the run took %v, want %v", f[0].took, tc.took)
				}
				if tc.timeout != (cause == cron.ErrRunDeadline) && tc.name != "ignores its context" {
					t.Errorf("the run's context ended with cause %v", cause)
				}
				var outcome string
				for _, r := range logs.all() {
					if v := attr(r, "outcome"); v.Kind() == slog.KindString {
						outcome = v.String()
					}
				}
				if outcome != tc.wantOutcome {
					t.Errorf("the log's outcome = %q, want %q", outcome, tc.wantOutcome)
				}
			})
		})
	}
}

// TestRunDeadlineLeased runs a leased job whose first run outlasts its
// deadline: the record says timeout, and its slot's second attempt runs,
// as after any failure.
func TestRunDeadlineLeased(t *testing.T) {
	srv := redistest.Start(t)
	log := newJobLog()
	db := lock.NewDB(srv.Client(t))
	job := &deadlinedJob{leasedJob: leasedJob{
		testJob: testJob{name: "bounded", every: interval.AtLeast(time.Hour), process: log.work("r0", func(ctx context.Context, t cron.Tick) error {
			if t.Attempt == 1 {
				<-ctx.Done()
				return context.Cause(ctx)
			}
			return nil
		})},
		lease: cron.LeaseConfig{DB: db, Attempts: 2, Backoff: 50 * time.Millisecond},
	}, deadline: 100 * time.Millisecond}
	start(t, []cron.Job{job}, cron.WithReplica("r0"))
	if r := log.next(t, "the first attempt"); !errors.Is(r.err, cron.ErrRunDeadline) {
		t.Errorf("attempt 1 ended with %v, want %v", r.err, cron.ErrRunDeadline)
	}
	if r := log.next(t, "the second attempt"); r.err != nil || r.tick.Attempt != 2 || r.tick.Trigger != cron.TriggerRetry {
		t.Errorf("attempt %d (%v) ended with %v, want attempt 2, a retry, ok", r.tick.Attempt, r.tick.Trigger, r.err)
	}
	st := waitStatus(t, db, "bounded", func(st cron.JobStatus) bool { return st.SlotState == "done" })
	if st.LastFailure == nil || st.LastFailure.Outcome != "timeout" || st.LastFailure.Error != "cron: run deadline exceeded" {
		t.Errorf("the last failure = %+v, want outcome timeout with ErrRunDeadline's text", st.LastFailure)
	}
}

// deadlinedJob is a leased job with a run deadline.
type deadlinedJob struct {
	leasedJob
	deadline time.Duration
}

func (j *deadlinedJob) RunDeadline() time.Duration { return j.deadline }
