package cron_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wakuwaku-go/wakuwaku/cron"
	"github.com/wakuwaku-go/wakuwaku/internal/redistest"
	"github.com/wakuwaku-go/wakuwaku/interval"
	"github.com/wakuwaku-go/wakuwaku/lock"
)

// TestAddLeased adds a leased job to a runtime that started with none, on
// a real redis-server: it runs at once, its record is kept, and a run-now
// request reaches it (the runtime subscribes when the first leased job
// comes). A job with its lease's name is refused. Removed, it runs no
// more, and its record stays for the replicas that still run it.
func TestAddLeased(t *testing.T) {
	srv := redistest.Start(t)
	db := lock.NewDB(srv.Client(t))
	log := newJobLog()
	rt := start(t, []cron.Job{&testJob{name: "plain", every: interval.AtLeast(time.Hour)}}, cron.WithReplica("r0"))
	job := func(name string) cron.Job {
		return &leasedJob{
			testJob: testJob{name: name, every: interval.AtLeast(time.Hour), process: log.work("r0", nil)},
			lease:   cron.LeaseConfig{DB: db, Name: "export"},
		}
	}
	if err := rt.Add(job("export")); err != nil {
		t.Fatalf("Add = %v", err)
	}
	if r := log.next(t, "the startup run"); r.tick.Trigger != cron.TriggerSchedule {
		t.Errorf("the added job's first run has trigger %v, want schedule", r.tick.Trigger)
	}
	if err := rt.Add(job("export-2")); !errors.Is(err, cron.ErrInvalidJob) {
		t.Errorf("Add of another job of the same lease = %v, want %v", err, cron.ErrInvalidJob)
	}
	admin := cron.NewAdmin(db)
	waitStatus(t, db, "export", func(st cron.JobStatus) bool { return st.Last != nil })
	// The subscription may not be up when the request is published: ask
	// again until a run comes.
	var r jobRun
	for got := false; !got; {
		if err := admin.RunNow(t.Context(), "export"); err != nil {
			t.Fatal(err)
		}
		select {
		case r = <-log.ended:
			got = true
		case <-time.After(500 * time.Millisecond):
		}
	}
	if r.tick.Trigger != cron.TriggerRequest {
		t.Errorf("the run after RunNow has trigger %v, want request", r.tick.Trigger)
	}

	if err := rt.Remove(t.Context(), "export"); err != nil {
		t.Fatalf("Remove = %v", err)
	}
	if err := rt.Add(job("export-2")); err != nil {
		t.Errorf("Add of a job of the removed one's lease = %v, want it taken", err)
	}
	if _, err := admin.Status(t.Context(), "export"); err != nil {
		t.Errorf("Status after Remove = %v, want the record, which outlives the job on this replica", err)
	}
}

// TestRemoveLeasedRetry removes a leased job whose slot waits for its
// next attempt: the retry that was planned never runs.
func TestRemoveLeasedRetry(t *testing.T) {
	srv := redistest.Start(t)
	db := lock.NewDB(srv.Client(t))
	var ev events
	job := &leasedJob{
		testJob: testJob{name: "flaky", every: interval.AtLeast(time.Hour), process: func(context.Context, cron.Tick) error {
			return errors.New("fails")
		}},
		lease: cron.LeaseConfig{DB: db, Attempts: 3, Backoff: 300 * time.Millisecond},
	}
	rt := start(t, []cron.Job{job}, cron.WithObserver(ev.observer()))
	st := waitStatus(t, db, "flaky", func(st cron.JobStatus) bool { return st.Last != nil })
	if err := rt.Remove(t.Context(), "flaky"); err != nil {
		t.Fatal(err)
	}
	// Past the back-off, with a margin for a loaded machine: the record
	// shows the slot still waiting, its one attempt made.
	time.Sleep(time.Second)
	after, err := cron.NewAdmin(db).Status(t.Context(), "flaky")
	if err != nil {
		t.Fatal(err)
	}
	if after.Attempts != 1 || after.SlotState != "open" || len(ev.of("started")) != 1 {
		t.Errorf("after Remove: %d attempts (was %d), slot %s, %d runs started; want 1, open, 1",
			after.Attempts, st.Attempts, after.SlotState, len(ev.of("started")))
	}
}

// TestReplaceLeasedByPlain replaces leased jobs whose start announces
// them to their records (they have no startup run) by jobs without a
// lease, at once: the start's goroutine, which announces 200 jobs one
// after the other, skips the replaced ones. It once read the replaced
// jobs' absent records and crashed.
func TestReplaceLeasedByPlain(t *testing.T) {
	srv := redistest.Start(t)
	db := lock.NewDB(srv.Client(t))
	every := interval.AtLeast(time.Hour).WithoutStartupRun()
	var jobs []cron.Job
	for i := range 200 {
		jobs = append(jobs, &leasedJob{testJob: testJob{name: fmt.Sprint("report-", i), every: every}, lease: cron.LeaseConfig{DB: db}})
	}
	rt, err := cron.Start(jobs)
	if err != nil {
		t.Fatal(err)
	}
	for i := 100; i < 200; i++ {
		if err := rt.Replace(&testJob{name: fmt.Sprint("report-", i), every: every}); err != nil {
			t.Fatal(err)
		}
	}
	// The announcements reach the replaced jobs once report-99's is made.
	waitStatus(t, db, "report-99", func(cron.JobStatus) bool { return true })
	time.Sleep(200 * time.Millisecond)
	if err := rt.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// tagged is a client whose type can be compared but whose values can't: it
// holds a slice in an interface field, and a map keyed by it panics. It
// subscribes, as the *redis.Client it embeds does.
type tagged struct {
	*redis.Client
	tags any
}

// TestLeasedClientNotComparable runs leased jobs whose DB's client can't
// key a map although its type could: the runtime groups them per job, as
// it does clients whose type can't be compared, and does not panic.
func TestLeasedClientNotComparable(t *testing.T) {
	srv := redistest.Start(t)
	db := lock.NewDB(tagged{Client: srv.Client(t), tags: []string{"a"}})
	log := newJobLog()
	var jobs []cron.Job
	for _, name := range []string{"export", "import"} {
		jobs = append(jobs, &leasedJob{
			testJob: testJob{name: name, every: interval.AtLeast(time.Hour), process: log.work("r0", nil)},
			lease:   cron.LeaseConfig{DB: db, Name: name},
		})
	}
	start(t, jobs, cron.WithReplica("r0"))
	ran := map[string]bool{}
	for range jobs {
		ran[log.next(t, "a startup run").tick.Job] = true
	}
	if !ran["export"] || !ran["import"] {
		t.Errorf("startup runs of %v, want export and import", ran)
	}
	for _, name := range []string{"export", "import"} {
		waitStatus(t, db, name, func(st cron.JobStatus) bool { return st.Last != nil })
	}
}

// TestReplaceLeasedRetry replaces a leased AtLeast job whose slot gets two
// attempts after its first attempt failed: the replaced job still makes
// the second attempt at the slot, whether Replace comes during the
// back-off or while the failing run still goes on. Replace used to drop
// the planned retry (it was the old job's), and the slot stayed open with
// one attempt until its lease ran out.
func TestReplaceLeasedRetry(t *testing.T) {
	for _, tc := range []struct {
		name      string
		duringRun bool // Replace while the failing run goes on, else during its back-off
	}{
		{name: "during the back-off"},
		{name: "while the failing run goes on", duringRun: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := redistest.Start(t)
			db := lock.NewDB(srv.Client(t))
			log := newJobLog()
			release := make(chan struct{})
			var failed atomic.Bool
			job := func() cron.Job {
				return &leasedJob{
					testJob: testJob{name: "flaky", every: interval.AtLeast(time.Hour), process: log.work("r0", func(context.Context, cron.Tick) error {
						if failed.CompareAndSwap(false, true) {
							if tc.duringRun {
								<-release
							}
							return errors.New("the first attempt fails")
						}
						return nil
					})},
					lease: cron.LeaseConfig{DB: db, Attempts: 2, Backoff: 300 * time.Millisecond},
				}
			}
			rt := start(t, []cron.Job{job()}, cron.WithReplica("r0"))
			if tc.duringRun {
				waitStatus(t, db, "flaky", func(st cron.JobStatus) bool { return st.Running != nil })
			} else {
				waitStatus(t, db, "flaky", func(st cron.JobStatus) bool { return st.SlotState == "open" })
			}
			if err := rt.Replace(job()); err != nil {
				t.Fatal(err)
			}
			close(release)
			if r := log.next(t, "the failing attempt"); r.err == nil {
				t.Fatalf("the first run succeeded; want it to fail")
			}
			r := log.next(t, "the second attempt")
			if r.err != nil || r.tick.Attempt != 2 || r.tick.Trigger != cron.TriggerRetry {
				t.Errorf("second run: attempt %d, trigger %v, %v; want attempt 2, retry, success", r.tick.Attempt, r.tick.Trigger, r.err)
			}
			waitStatus(t, db, "flaky", func(st cron.JobStatus) bool { return st.SlotState == "done" })
		})
	}
}

// TestReplaceLeasedKeepsTick replaces a leased AtLeast job, on a real
// redis-server, by a release that changes its attempts but not its
// interval: its next tick stays where its last run put it. Replace used
// to count the interval again from the Replace, so Replaces that each
// replica got within an interval of the last kept the job from running
// at all (seeds 3002553, 3003256 and 3007384: no run for over two
// intervals).
func TestReplaceLeasedKeepsTick(t *testing.T) {
	srv := redistest.Start(t)
	db := lock.NewDB(srv.Client(t))
	log := newJobLog()
	job := func(attempts int) cron.Job {
		return &leasedJob{
			testJob: testJob{name: "sync", every: interval.AtLeast(time.Hour), process: log.work("r0", nil)},
			lease:   cron.LeaseConfig{DB: db, Attempts: attempts},
		}
	}
	rt := start(t, []cron.Job{job(1)}, cron.WithReplica("r0"))
	log.next(t, "the startup run")
	next := func() time.Time {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			if jobs := rt.Jobs(); len(jobs) == 1 && jobs[0].HasNext {
				return jobs[0].Next
			}
			if time.Now().After(deadline) {
				t.Fatalf("Jobs = %+v after 10s, want sync's next tick", rt.Jobs())
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	before := next()
	if err := rt.Replace(job(2)); err != nil {
		t.Fatal(err)
	}
	if after := next(); !after.Equal(before) {
		t.Errorf("next tick after Replace = %v, want %v: the interval did not change, nor the last run", after.Format(time.RFC3339Nano), before.Format(time.RFC3339Nano))
	}
}
