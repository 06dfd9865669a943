package cron_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wakuwaku-go/wakuwaku/cron"
	"github.com/wakuwaku-go/wakuwaku/internal/redistest"
	"github.com/wakuwaku-go/wakuwaku/interval"
	"github.com/wakuwaku-go/wakuwaku/lock"
)

// jobRun is one run as the job itself saw it.
type jobRun struct {
	replica    string
	tick       cron.Tick
	start, end time.Time
	err        error
}

// jobLog is the runs of one job across replicas, as the job records them.
type jobLog struct {
	mu     sync.Mutex
	runs   []jobRun
	active int
	most   int // the most runs at once
	ended  chan jobRun
}

func newJobLog() *jobLog { return &jobLog{ended: make(chan jobRun, 100)} }

// work returns a job's Process for replica: it records the run, does do
// and returns its error.
func (l *jobLog) work(replica string, do func(ctx context.Context, t cron.Tick) error) func(context.Context, cron.Tick) error {
	return func(ctx context.Context, t cron.Tick) error {
		l.mu.Lock()
		l.active++
		l.most = max(l.most, l.active)
		l.mu.Unlock()
		r := jobRun{replica: replica, tick: t, start: time.Now()}
		defer func() { // a panic included
			r.end = time.Now()
			if v := recover(); v != nil {
				r.err = fmt.Errorf("panic: %v", v)
				defer panic(v)
			}
			l.mu.Lock()
			l.active--
			l.runs = append(l.runs, r)
			l.mu.Unlock()
			l.ended <- r
		}()
		if do != nil {
			r.err = do(ctx, t)
		}
		return r.err
	}
}

func (l *jobLog) all() ([]jobRun, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]jobRun(nil), l.runs...), l.most
}

// next waits for the next run to end.
func (l *jobLog) next(t *testing.T, what string) jobRun {
	t.Helper()
	select {
	case r := <-l.ended:
		return r
	case <-time.After(10 * time.Second):
		t.Fatalf("no run ended within 10s; want %s", what)
	}
	return jobRun{}
}

// startReplicas starts n runtimes over srv, each with its own client and
// its own copy of the job that job builds, named r0, r1, ...
func startReplicas(t *testing.T, srv *redistest.Server, n int, job func(replica string, db lock.DB) cron.Job) []*cron.Runtime {
	t.Helper()
	var rts []*cron.Runtime
	for i := range n {
		name := fmt.Sprintf("r%d", i)
		rt, err := cron.Start([]cron.Job{job(name, lock.NewDB(srv.Client(t)))}, cron.WithReplica(name))
		if err != nil {
			t.Fatal(err)
		}
		rts = append(rts, rt)
		t.Cleanup(func() { rt.Shutdown(context.Background()) })
	}
	return rts
}

// TestRecordRetriesUntilSuccess runs a job whose slots get three attempts
// and whose first two runs fail, on three replicas: the third attempt
// succeeds, no two runs overlap, and the record says so.
func TestRecordRetriesUntilSuccess(t *testing.T) {
	srv := redistest.Start(t)
	log := newJobLog()
	var mu sync.Mutex
	failures := 0
	startReplicas(t, srv, 3, func(replica string, db lock.DB) cron.Job {
		return &leasedJob{
			testJob: testJob{name: "flaky", every: interval.AtLeast(time.Hour), process: log.work(replica, func(context.Context, cron.Tick) error {
				mu.Lock()
				defer mu.Unlock()
				if failures < 2 {
					failures++
					return fmt.Errorf("failure %d", failures)
				}
				return nil
			})},
			lease: cron.LeaseConfig{DB: db, Attempts: 3, Backoff: 100 * time.Millisecond},
		}
	})
	for i, want := range []string{"failure 1", "failure 2", ""} {
		r := log.next(t, fmt.Sprintf("attempt %d", i+1))
		if got := fmt.Sprint(r.err); (want == "" && r.err != nil) || (want != "" && got != want) || r.tick.Attempt != i+1 {
			t.Fatalf("run %d: attempt %d, %v; want attempt %d, %q", i+1, r.tick.Attempt, r.err, i+1, want)
		}
		if wantTrigger := map[bool]cron.Trigger{true: cron.TriggerSchedule, false: cron.TriggerRetry}[i == 0]; r.tick.Trigger != wantTrigger {
			t.Errorf("run %d: trigger %v, want %v", i+1, r.tick.Trigger, wantTrigger)
		}
	}
	runs, most := log.all()
	if most != 1 {
		t.Errorf("%d runs at once, want 1", most)
	}
	for i := 1; i < len(runs); i++ {
		if gap := runs[i].start.Sub(runs[i-1].end); gap < 100*time.Millisecond {
			t.Errorf("attempt %d started %v after the previous ended, want the back-off, 100ms, at least", i+1, gap)
		}
	}
	st := waitStatus(t, lock.NewDB(srv.Client(t)), "flaky", func(st cron.JobStatus) bool { return st.Running == nil && st.Last != nil })
	if st.SlotState != "done" || st.Attempts != 3 || st.Last.Outcome != "ok" || st.Last.Attempt != 3 || st.Last.Trigger != cron.TriggerRetry {
		t.Errorf("status = slot %s after %d attempts, last %+v; want done after 3, the last ok at attempt 3 (retry)", st.SlotState, st.Attempts, st.Last)
	}
	if f := st.LastFailure; f == nil || f.Outcome != "error" || f.Error != "failure 2" || f.Attempt != 2 {
		t.Errorf("status.LastFailure = %+v, want attempt 2's error, failure 2", f)
	}
	// Nothing ran a fourth time.
	time.Sleep(300 * time.Millisecond)
	if runs, _ := log.all(); len(runs) != 3 {
		t.Errorf("%d runs, want 3", len(runs))
	}
}

// TestRecordAttemptsSpent checks that a slot whose every attempt fails is
// recorded as failed after its last, and not run again.
func TestRecordAttemptsSpent(t *testing.T) {
	srv := redistest.Start(t)
	log := newJobLog()
	startReplicas(t, srv, 2, func(replica string, db lock.DB) cron.Job {
		return &leasedJob{
			testJob: testJob{name: "broken", every: interval.AtLeast(time.Hour), process: log.work(replica, func(context.Context, cron.Tick) error {
				panic("broken")
			})},
			lease: cron.LeaseConfig{DB: db, Attempts: 2, Backoff: 50 * time.Millisecond},
		}
	})
	log.next(t, "attempt 1")
	log.next(t, "attempt 2")
	st := waitStatus(t, lock.NewDB(srv.Client(t)), "broken", func(st cron.JobStatus) bool { return st.SlotState == "failed" })
	if f := st.LastFailure; f == nil || f.Outcome != "panic" || f.Attempt != 2 || !strings.Contains(f.Error, "broken") {
		t.Errorf("status.LastFailure = %+v, want attempt 2's panic", f)
	}
	time.Sleep(300 * time.Millisecond)
	if runs, _ := log.all(); len(runs) != 2 {
		t.Errorf("%d runs, want 2: the slot's attempts are spent", len(runs))
	}
}

// TestRecordAtMostOnce checks the default: a failed run is not retried.
func TestRecordAtMostOnce(t *testing.T) {
	srv := redistest.Start(t)
	log := newJobLog()
	startReplicas(t, srv, 3, func(replica string, db lock.DB) cron.Job {
		return &leasedJob{
			testJob: testJob{name: "once", every: interval.AtLeast(time.Hour), process: log.work(replica, func(context.Context, cron.Tick) error {
				return errors.New("failed")
			})},
			lease: cron.LeaseConfig{DB: db},
		}
	})
	log.next(t, "the first run")
	st := waitStatus(t, lock.NewDB(srv.Client(t)), "once", func(st cron.JobStatus) bool { return st.SlotState == "failed" })
	if st.Attempts != 1 || st.LastFailure == nil || st.LastFailure.Error != "failed" {
		t.Errorf("status = %+v, want one failed attempt", st)
	}
	time.Sleep(300 * time.Millisecond)
	if runs, _ := log.all(); len(runs) != 1 {
		t.Errorf("%d runs, want 1", len(runs))
	}
}

// TestRecordRunLeaseLost takes a run's lease away while it runs: the run's
// context is cancelled with cause lock.ErrLeaseLost, and its end is not
// recorded as the run of another's lease.
func TestRecordRunLeaseLost(t *testing.T) {
	srv := redistest.Start(t)
	raw := srv.Client(t)
	log := newJobLog()
	started := make(chan struct{})
	startReplicas(t, srv, 1, func(replica string, db lock.DB) cron.Job {
		return &leasedJob{
			testJob: testJob{name: "long", every: interval.AtLeast(time.Hour), process: log.work(replica, func(ctx context.Context, _ cron.Tick) error {
				close(started)
				<-ctx.Done()
				return context.Cause(ctx)
			})},
			lease: cron.LeaseConfig{DB: db, RunTTL: 300 * time.Millisecond},
		}
	})
	<-started
	// Another run's token: what a replica that took over would leave.
	if err := raw.HSet(t.Context(), "@@wakuwaku-cron:{@@wakuwaku-entity:Lock:cron:long}", "run", "someone else").Err(); err != nil {
		t.Fatal(err)
	}
	r := log.next(t, "the run, cancelled")
	if !errors.Is(r.err, lock.ErrLeaseLost) {
		t.Errorf("the run's context ended with cause %v, want lock.ErrLeaseLost", r.err)
	}
	if got := raw.HGet(t.Context(), "@@wakuwaku-cron:{@@wakuwaku-entity:Lock:cron:long}", "run").Val(); got != "someone else" {
		t.Errorf("the record's run = %q after the cancelled run ended, want the other's, untouched", got)
	}
}

// TestRecordLongRunHeldAcrossIntervals runs a job whose runs last seven
// intervals and one and a half run leases on three replicas: its run
// lease, extended by heartbeat, keeps every other replica from starting
// it, however long it runs.
func TestRecordLongRunHeldAcrossIntervals(t *testing.T) {
	srv := redistest.Start(t)
	log := newJobLog()
	startReplicas(t, srv, 3, func(replica string, db lock.DB) cron.Job {
		return &leasedJob{
			testJob: testJob{name: "slow", every: interval.AtLeast(200 * time.Millisecond), process: log.work(replica, func(ctx context.Context, _ cron.Tick) error {
				time.Sleep(1500 * time.Millisecond)
				return ctx.Err()
			})},
			// The run outlasts its run lease, so only the heartbeat keeps
			// it; a heartbeat comes every third of RunTTL, so a lease is
			// lost only if the runtime stalls for two thirds of a second
			// (a race-built test binary on a busy machine stalled for
			// 200 ms against a 300 ms lease).
			lease: cron.LeaseConfig{DB: db, RunTTL: time.Second},
		}
	})
	for range 3 {
		if r := log.next(t, "a run"); r.err != nil {
			t.Errorf("run on %s: %v", r.replica, r.err)
		}
	}
	runs, most := log.all()
	if most != 1 {
		t.Errorf("%d runs at once across 3 replicas, want 1", most)
	}
	for i := 1; i < len(runs); i++ {
		if runs[i].start.Before(runs[i-1].end) {
			t.Errorf("run %d started at %v, before run %d ended at %v", i+1, runs[i].start, i, runs[i-1].end)
		}
	}
}

// TestRecordPauseResumeRunNow pauses a job from an Admin, checks that no
// replica runs it, asks for a run now, which exactly one replica runs
// although the job is paused, and resumes it.
func TestRecordPauseResumeRunNow(t *testing.T) {
	srv := redistest.Start(t)
	log := newJobLog()
	var sk skips
	for i := range 3 {
		name := fmt.Sprintf("r%d", i)
		db := lock.NewDB(srv.Client(t))
		job := &leasedJob{
			testJob: testJob{name: "steered", every: interval.AtLeast(100 * time.Millisecond).WithoutStartupRun(), process: log.work(name, nil)},
			lease:   cron.LeaseConfig{DB: db},
		}
		rt, err := cron.Start([]cron.Job{job}, cron.WithReplica(name), cron.WithObserver(sk.observer()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { rt.Shutdown(context.Background()) })
	}
	admin := cron.NewAdmin(lock.NewDB(srv.Client(t)))
	log.next(t, "a scheduled run")
	if err := admin.Pause(t.Context(), "steered"); err != nil {
		t.Fatal(err)
	}
	// A run that began before the pause may end after it.
	time.Sleep(200 * time.Millisecond)
	drain(log)
	paused := time.Now()
	time.Sleep(500 * time.Millisecond)
	if runs := runsSince(log, paused); len(runs) != 0 {
		t.Errorf("%d runs while paused, want none", len(runs))
	}
	if reasons, _ := sk.get(); !contains(reasons, cron.ReasonPaused) {
		t.Errorf("skips = %q, want %q among them", reasons, cron.ReasonPaused)
	}
	st, err := admin.Status(t.Context(), "steered")
	if err != nil || !st.Paused {
		t.Errorf("Status = %+v, %v; want paused", st, err)
	}

	asked := time.Now()
	if err := admin.RunNow(t.Context(), "steered"); err != nil {
		t.Fatal(err)
	}
	r := log.next(t, "the requested run")
	if r.tick.Trigger != cron.TriggerRequest {
		t.Errorf("run after RunNow: trigger %v, want %v", r.tick.Trigger, cron.TriggerRequest)
	}
	if d := r.start.Sub(asked); d > 2*time.Second {
		t.Errorf("the requested run started %v after RunNow, want about a second at most", d)
	}
	time.Sleep(500 * time.Millisecond)
	if runs := runsSince(log, asked); len(runs) != 1 {
		t.Errorf("%d runs after one RunNow while paused, want 1", len(runs))
	}
	st, _ = admin.Status(t.Context(), "steered")
	if st.RunRequested || st.Last == nil || st.Last.Trigger != cron.TriggerRequest || st.Last.Replica != r.replica {
		t.Errorf("Status after the requested run = requested %v, last %+v; want no request left, the last run requested, on %s", st.RunRequested, st.Last, r.replica)
	}

	if err := admin.Resume(t.Context(), "steered"); err != nil {
		t.Fatal(err)
	}
	if r := log.next(t, "a run after Resume"); r.tick.Trigger != cron.TriggerSchedule {
		t.Errorf("run after Resume: trigger %v, want schedule", r.tick.Trigger)
	}
	if err := admin.Pause(t.Context(), "no-such-job"); !errors.Is(err, cron.ErrUnknownJob) {
		t.Errorf("Pause(no-such-job) = %v, want ErrUnknownJob", err)
	}
}

// TestRecordStatusJSON checks what Status says about a job that ran, and
// its JSON.
func TestRecordStatusJSON(t *testing.T) {
	srv := redistest.Start(t)
	log := newJobLog()
	startReplicas(t, srv, 1, func(replica string, db lock.DB) cron.Job {
		return &leasedJob{
			testJob: testJob{name: "report", every: interval.AtLeast(time.Hour), process: log.work(replica, nil)},
			lease:   cron.LeaseConfig{DB: db},
		}
	})
	log.next(t, "the startup run")
	st := waitStatus(t, lock.NewDB(srv.Client(t)), "report", func(st cron.JobStatus) bool { return st.Last != nil })
	if st.Last.Replica != "r0" || st.Last.Outcome != "ok" || st.NextDue.IsZero() || st.SeenBy != "r0" {
		t.Errorf("status = %+v, last %+v; want r0's ok run and a next due time", st, st.Last)
	}
	if d := st.NextDue.Sub(st.Last.Started); d < 59*time.Minute || d > 61*time.Minute {
		t.Errorf("next due %v after the last start, want an hour", d)
	}
	b, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	var back map[string]any
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	last, _ := back["last"].(map[string]any)
	if back["job"] != "report" || back["paused"] != false || last["trigger"] != "schedule" || last["outcome"] != "ok" || back["nextDue"] == nil {
		t.Errorf("JSON = %s, want job, paused, nextDue and last.trigger, last.outcome", b)
	}
	jobs, err := cron.NewAdmin(lock.NewDB(srv.Client(t))).Jobs(t.Context())
	if err != nil || len(jobs) != 1 || jobs[0].Job != "report" {
		t.Errorf("Jobs() = %v, %v; want report's", jobs, err)
	}
}

// TestRecordRefusedNames checks that Start refuses a leased job whose name
// would break its record's hash tag, and bad record settings.
func TestRecordRefusedNames(t *testing.T) {
	db := lock.NewDB(redistest.Start(t).Client(t))
	for _, tc := range []struct {
		name  string
		lease cron.LeaseConfig
	}{
		{"a{b", cron.LeaseConfig{DB: db}},
		{"a}b", cron.LeaseConfig{DB: db}},
		{"ok", cron.LeaseConfig{DB: db, Attempts: -1}},
		{"ok", cron.LeaseConfig{DB: db, RunTTL: -time.Second}},
		{"ok", cron.LeaseConfig{DB: db, CatchUp: -time.Second}},
	} {
		job := &leasedJob{testJob: testJob{name: tc.name, every: interval.AtLeast(time.Hour)}, lease: tc.lease}
		rt, err := cron.Start([]cron.Job{job})
		if !errors.Is(err, cron.ErrInvalidJob) {
			rt.Shutdown(context.Background())
			t.Errorf("Start(%q, %+v) = %v, want ErrInvalidJob", tc.name, tc.lease, err)
		}
	}
}

// waitStatus polls the job's status until ok says it is what the test
// waits for, and returns it; it fails the test after 10s.
func waitStatus(t *testing.T, db lock.DB, job string, ok func(cron.JobStatus) bool) cron.JobStatus {
	t.Helper()
	admin := cron.NewAdmin(db)
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, err := admin.Status(t.Context(), job)
		if err == nil && ok(st) {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("Status(%s) = %+v, %v after 10s", job, st, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func drain(l *jobLog) {
	for {
		select {
		case <-l.ended:
		default:
			return
		}
	}
}

func runsSince(l *jobLog, since time.Time) []jobRun {
	runs, _ := l.all()
	var out []jobRun
	for _, r := range runs {
		if r.start.After(since) {
			out = append(out, r)
		}
	}
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// TestRecordOnCluster runs leased jobs on a three-master Redis Cluster: a
// record shares its hash slot with the seed's lease key, Jobs finds the
// records on every master, and a run-now request reaches the replicas over
// the cluster's Pub/Sub.
func TestRecordOnCluster(t *testing.T) {
	cl := redistest.StartCluster(t, 3)
	names := []string{"report", "cleanup", "invoices", "index", "mail", "backup"}
	logs := make(map[string]*jobLog)
	for _, n := range names {
		logs[n] = newJobLog()
	}
	for i := range 2 {
		replica := fmt.Sprintf("r%d", i)
		db := lock.NewDB(cl.Client(t))
		var jobs []cron.Job
		for j, n := range names {
			every := interval.AtLeast(time.Hour)
			if j%2 == 1 {
				every = interval.MustCron("0 * * * *")
			}
			jobs = append(jobs, &leasedJob{testJob: testJob{name: n, every: every, process: logs[n].work(replica, nil)}, lease: cron.LeaseConfig{DB: db}})
		}
		rt, err := cron.Start(jobs, cron.WithReplica(replica))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { rt.Shutdown(context.Background()) })
	}
	for _, n := range names {
		logs[n].next(t, n+"'s startup run")
	}
	raw := cl.Client(t)
	masters := make(map[int64]bool)
	for _, n := range names {
		record := raw.ClusterKeySlot(t.Context(), "@@wakuwaku-cron:{@@wakuwaku-entity:Lock:cron:"+n+"}").Val()
		lease := raw.ClusterKeySlot(t.Context(), "@@wakuwaku-entity:Lock:cron:"+n).Val()
		if record != lease {
			t.Errorf("job %s: the record's hash slot is %d, its lease's %d; want one", n, record, lease)
		}
		masters[int64(cl.SlotOwner(t, int(record)))] = true
	}
	if len(masters) < 2 {
		t.Logf("the records are on %d master(s) only", len(masters))
	}
	admin := cron.NewAdmin(lock.NewDB(raw))
	var jobs []cron.JobStatus
	deadline := time.Now().Add(10 * time.Second)
	for {
		var err error
		jobs, err = admin.Jobs(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		done := 0
		for _, j := range jobs {
			if j.Last != nil {
				done++
			}
		}
		if done == len(names) || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if len(jobs) != len(names) {
		t.Errorf("Jobs() found %d records across %d masters, want %d", len(jobs), len(masters), len(names))
	}
	if err := admin.RunNow(t.Context(), "mail"); err != nil {
		t.Fatal(err)
	}
	if r := logs["mail"].next(t, "mail's requested run"); r.tick.Trigger != cron.TriggerRequest {
		t.Errorf("mail's run after RunNow: trigger %v, want request", r.tick.Trigger)
	}
	time.Sleep(300 * time.Millisecond)
	if runs, _ := logs["mail"].all(); len(runs) != 2 {
		t.Errorf("mail ran %d times, want its startup run and one requested", len(runs))
	}
}

// TestRecordCatchUpDuration checks a duration policy's catch-up: a job
// deployed and stopped at once has no run in its first interval; started
// again after it, one replica of three catches up; started again within
// the interval, none does.
func TestRecordCatchUpDuration(t *testing.T) {
	srv := redistest.Start(t)
	log := newJobLog()
	job := func(replica string, db lock.DB) cron.Job {
		return &leasedJob{
			testJob: testJob{name: "often", every: interval.AtLeast(time.Second).WithoutStartupRun(), process: log.work(replica, nil)},
			lease:   cron.LeaseConfig{DB: db, CatchUp: time.Hour},
		}
	}
	for _, rt := range startReplicas(t, srv, 1, job) {
		waitStatus(t, lock.NewDB(srv.Client(t)), "often", func(cron.JobStatus) bool { return true })
		rt.Shutdown(t.Context())
	}
	time.Sleep(1100 * time.Millisecond)
	startReplicas(t, srv, 3, job)
	if r := log.next(t, "the catch-up run"); r.tick.Trigger != cron.TriggerCatchUp {
		t.Errorf("trigger = %v, want catch-up", r.tick.Trigger)
	}
	startReplicas(t, srv, 2, job)
	time.Sleep(300 * time.Millisecond)
	runs, _ := log.all()
	caught := 0
	for _, r := range runs {
		if r.tick.Trigger == cron.TriggerCatchUp {
			caught++
		}
	}
	if caught != 1 {
		t.Errorf("%d catch-up runs, want one across 5 starts within the interval", caught)
	}
}

// TestRecordAnnounced checks that a job whose first tick is still to come
// has a record as soon as it starts, so that operators can see and pause
// it.
func TestRecordAnnounced(t *testing.T) {
	srv := redistest.Start(t)
	startReplicas(t, srv, 1, func(replica string, db lock.DB) cron.Job {
		return &leasedJob{
			testJob: testJob{name: "nightly", every: interval.MustCron("0 3 * * *").WithoutStartupRun()},
			lease:   cron.LeaseConfig{DB: db},
		}
	})
	st := waitStatus(t, lock.NewDB(srv.Client(t)), "nightly", func(cron.JobStatus) bool { return true })
	if d := time.Until(st.NextDue); st.SeenBy != "r0" || d <= 0 || d > 24*time.Hour || st.Last != nil {
		t.Errorf("status of a job not yet run = %+v, want r0's announcement with its next due time", st)
	}
	if err := cron.NewAdmin(lock.NewDB(srv.Client(t))).Pause(t.Context(), "nightly"); err != nil {
		t.Errorf("Pause of an announced job = %v", err)
	}
}

// TestClockSkew runs a leased runtime whose clock is five seconds ahead:
// its observer hears of the skew at start and the log warns of it; one on
// the true clock hears of none to speak of.
func TestClockSkew(t *testing.T) {
	srv := redistest.Start(t)
	for _, tc := range []struct {
		name   string
		offset time.Duration
		warn   bool
	}{
		{"ahead", 5 * time.Second, true},
		{"true", 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			skews := make(chan time.Duration, 1)
			var logs records
			job := &leasedJob{testJob: testJob{name: "skew-" + tc.name, every: interval.AtLeast(time.Hour)}, lease: cron.LeaseConfig{DB: lock.NewDB(srv.Client(t))}}
			rt, err := cron.Start([]cron.Job{job},
				cron.WithClock(func() time.Time { return time.Now().Add(tc.offset) }),
				cron.WithLogger(slog.New(&logs)),
				cron.WithObserver(cron.Observer{ClockSkew: func(d time.Duration) { skews <- d }}))
			if err != nil {
				t.Fatal(err)
			}
			var skew time.Duration
			select {
			case skew = <-skews:
			case <-time.After(10 * time.Second):
				t.Fatal("no clock skew reported within 10s of the start")
			}
			rt.Shutdown(context.Background())
			if d := skew - tc.offset; d < -time.Second || d > time.Second {
				t.Errorf("skew = %v, want about %v", skew, tc.offset)
			}
			if warned := len(logs.find("cron runtime's clock disagrees with Redis's")) > 0; warned != tc.warn {
				t.Errorf("warned = %v, want %v", warned, tc.warn)
			}
		})
	}
}

// TestRecordRunNowThroughDBOptions checks that run-now requests reach a
// job whose DB was made with options (an observer of lock operations):
// the runtime subscribes through the caller's own client beneath them.
// It once looked for Subscribe on the DB's wrapper, found none, and left
// requests to the next tick, an hour away here.
func TestRecordRunNowThroughDBOptions(t *testing.T) {
	srv := redistest.Start(t)
	log := newJobLog()
	startReplicas(t, srv, 1, func(replica string, _ lock.DB) cron.Job {
		db := lock.NewDB(srv.Client(t), lock.WithObserver(func(lock.Event) {}))
		return &leasedJob{testJob: testJob{name: "observed", every: interval.AtLeast(time.Hour), process: log.work(replica, nil)}, lease: cron.LeaseConfig{DB: db}}
	})
	log.next(t, "the startup run")
	waitStatus(t, lock.NewDB(srv.Client(t)), "observed", func(st cron.JobStatus) bool { return st.Last != nil })
	waitListening(t, srv.Client(t), 1)
	if err := cron.NewAdmin(lock.NewDB(srv.Client(t))).RunNow(t.Context(), "observed"); err != nil {
		t.Fatal(err)
	}
	if r := log.next(t, "the requested run"); r.tick.Trigger != cron.TriggerRequest {
		t.Errorf("trigger = %v, want request", r.tick.Trigger)
	}
}

// TestRetryPastSlotEndWarned: an attempt that fails so late that its
// back-off runs past its slot's claim window gets no retry: its completion
// closes the slot as failed (R12, claim window over), and the replica says
// so at Warn instead of dropping the retry in silence.
func TestRetryPastSlotEndWarned(t *testing.T) {
	db := lock.NewDB(redistest.Start(t).Client(t))
	var logs records
	failed := make(chan struct{}, 10)
	job := &leasedJob{
		testJob: testJob{name: "late", every: interval.AtLeast(time.Second), process: func(context.Context, cron.Tick) error {
			time.Sleep(300 * time.Millisecond)
			failed <- struct{}{}
			return errors.New("failed late")
		}},
		// The slot's lease ends 11/12 of a second after the tick; the
		// retry would be due 300 ms + 800 ms after it.
		lease: cron.LeaseConfig{DB: db, Attempts: 2, Backoff: 800 * time.Millisecond},
	}
	rt, err := cron.Start([]cron.Job{job}, cron.WithLogger(slog.New(&logs)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Shutdown(context.Background()) })
	<-failed
	const msg = "cron job's slot failed: its claim window ends before its retry would be due"
	deadline := time.Now().Add(10 * time.Second)
	for len(logs.find(msg)) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no %q within 10s", msg)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if r := logs.find(msg)[0]; r.Level != slog.LevelWarn || attr(r, "job").String() != "late" || attr(r, "slot").String() == "<nil>" {
		t.Errorf("%q at %v with job=%v slot=%v, want Warn, job late and its slot", msg, r.Level, attr(r, "job"), attr(r, "slot"))
	}
}

// TestRecordRunNowFiledUnderItsSlot asks for a run of a paused Cron job
// some slots after its last run, and for a run of a duration policy's job
// within its slot: the record, its history, the run's Tick and its log
// record name one slot, the one the request arrived in (PROTOCOL.md, R9),
// and the record's slot is untouched. The record used to file a Cron
// job's requested run under the record's slot, an earlier one than its
// Tick named, and a duration policy's Tick named a slot of its own from
// the request on, which the record never had.
func TestRecordRunNowFiledUnderItsSlot(t *testing.T) {
	for _, tc := range []struct {
		name  string
		every interval.Interval
		pause bool
	}{
		{"cron", interval.MustCron("* * * * * *"), true},
		{"duration", interval.AtLeast(time.Hour), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := redistest.Start(t)
			log := newJobLog()
			var logs records
			db := lock.NewDB(srv.Client(t))
			job := &leasedJob{
				testJob: testJob{name: "asked", every: tc.every, process: log.work("r0", nil)},
				lease:   cron.LeaseConfig{DB: db},
			}
			start(t, []cron.Job{job}, cron.WithReplica("r0"), cron.WithLogger(slog.New(&logs)))
			admin := cron.NewAdmin(db)
			log.next(t, "the startup run")
			before := waitStatus(t, db, "asked", func(st cron.JobStatus) bool { return st.Last != nil && st.Running == nil })
			if tc.pause {
				if err := admin.Pause(t.Context(), "asked"); err != nil {
					t.Fatal(err)
				}
				// The replica's clock passes into a later slot, which no
				// tick opens while the job is paused.
				time.Sleep(1100 * time.Millisecond)
				drain(log)
				before = waitStatus(t, db, "asked", func(st cron.JobStatus) bool { return st.Running == nil })
			}
			if err := admin.RunNow(t.Context(), "asked"); err != nil {
				t.Fatal(err)
			}
			r := log.next(t, "the requested run")
			for r.tick.Trigger != cron.TriggerRequest {
				r = log.next(t, "the requested run")
			}
			st := waitStatus(t, db, "asked", func(st cron.JobStatus) bool {
				return st.Last != nil && st.Last.Trigger == cron.TriggerRequest
			})
			slot, ok := r.tick.Slot.Key()
			if !ok {
				slot = r.tick.Slot.Start.UTC().Format(time.RFC3339Nano)
			}
			if st.Last.Slot != slot || st.History[0].Slot != slot {
				t.Errorf("the requested run's Tick names slot %s (%v); the record files it under %q, its history under %q: want one slot",
					slot, r.tick.Slot, st.Last.Slot, st.History[0].Slot)
			}
			var logged []string
			for _, rec := range logs.find("cron job started") {
				if attr(rec, "trigger").String() == "request" {
					logged = append(logged, attr(rec, "slot").String())
				}
			}
			if len(logged) != 1 || logged[0] != r.tick.Slot.String() {
				t.Errorf("the requested run's log records name slots %q, want %q, as its Tick", logged, r.tick.Slot.String())
			}
			if st.Slot != before.Slot || st.SlotState != before.SlotState || st.Attempts != before.Attempts {
				t.Errorf("after the requested run, the record's slot is %s, %s, %d attempts; want it untouched: %s, %s, %d",
					st.Slot, st.SlotState, st.Attempts, before.Slot, before.SlotState, before.Attempts)
			}
			if tc.pause {
				if slot == before.Slot {
					t.Errorf("the requested run names slot %s, the record's before it: want a later one, the slot it arrived in", slot)
				}
			} else if slot != st.Slot {
				t.Errorf("a duration policy's requested run names slot %s, want the record's, %s", slot, st.Slot)
			}
		})
	}
}

// waitListening waits until n clients subscribe to the run-now channel on
// c's server: a request published before a replica's subscription is up
// waits in the record for its next claim (the protocol's promise), which
// a test that asks for a run right after a start would wait for.
func waitListening(t *testing.T, c *redis.Client, n int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		subs, err := c.PubSubNumSub(t.Context(), "@@wakuwaku-cron:run-now").Result()
		if err == nil && subs["@@wakuwaku-cron:run-now"] >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("fewer than %d replicas listen for run-now requests after 10s (%v, %v)", n, subs, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
