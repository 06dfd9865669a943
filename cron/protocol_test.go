package cron_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wakuwaku-go/wakuwaku/cron"
	"github.com/wakuwaku-go/wakuwaku/internal/redistest"
	"github.com/wakuwaku-go/wakuwaku/interval"
	"github.com/wakuwaku-go/wakuwaku/lock"
)

// The tests of this file hold the record protocol (PROTOCOL.md) to its
// rows on a real redis-server, one bug each that it once had.

// TestProtocolRunNowDuringScheduledRun asks for a run while the scheduled
// run of a duration policy is going, on one replica whose slots get two
// attempts: the job runs twice, the slot's run and the requested one. A
// follow-up of the refused request used to claim as a tick, find the
// replica's own lease and open a second slot in the same hour.
func TestProtocolRunNowDuringScheduledRun(t *testing.T) {
	srv := redistest.Start(t)
	log := newJobLog()
	release := make(chan struct{})
	var first atomic.Bool
	startReplicas(t, srv, 1, func(replica string, db lock.DB) cron.Job {
		return &leasedJob{
			testJob: testJob{name: "hourly", every: interval.AtLeast(time.Hour), process: log.work(replica, func(ctx context.Context, _ cron.Tick) error {
				if first.CompareAndSwap(false, true) {
					<-release
				}
				return nil
			})},
			lease: cron.LeaseConfig{DB: db, Attempts: 2, RunTTL: 150 * time.Millisecond, Backoff: 50 * time.Millisecond},
		}
	})
	admin := cron.NewAdmin(lock.NewDB(srv.Client(t)))
	waitStatus(t, lock.NewDB(srv.Client(t)), "hourly", func(st cron.JobStatus) bool { return st.Running != nil })
	if err := admin.RunNow(t.Context(), "hourly"); err != nil {
		t.Fatal(err)
	}
	// Several run leases pass while the scheduled run goes on.
	time.Sleep(500 * time.Millisecond)
	close(release)
	log.next(t, "the scheduled run")
	if r := log.next(t, "the requested run"); r.tick.Trigger != cron.TriggerRequest {
		t.Errorf("second run: trigger %v, want request", r.tick.Trigger)
	}
	time.Sleep(600 * time.Millisecond)
	runs, most := log.all()
	if len(runs) != 2 || most != 1 {
		for _, r := range runs {
			t.Logf("run: trigger %v attempt %d at %v", r.tick.Trigger, r.tick.Attempt, r.start.Format(time.StampMilli))
		}
		t.Fatalf("%d runs, %d at once; want 2 (the slot's and the request's), one at a time", len(runs), most)
	}
}

// TestProtocolRetryWonElsewhere fails a slot's first attempt on replica a,
// whose retry timer then comes late (its admission holds it up): replica b
// runs the retry, which succeeds. a's timer must find the slot done; it
// used to claim as a tick, find its own lease and run the slot again as a
// fresh attempt 1.
func TestProtocolRetryWonElsewhere(t *testing.T) {
	srv := redistest.Start(t)
	log := newJobLog()
	var failed atomic.Bool
	job := func(replica string) cron.Job {
		return &leasedJob{
			testJob: testJob{name: "flaky", every: interval.AtLeast(time.Hour), process: log.work(replica, func(context.Context, cron.Tick) error {
				if failed.CompareAndSwap(false, true) {
					return errors.New("first attempt fails")
				}
				return nil
			})},
			lease: cron.LeaseConfig{DB: lock.NewDB(srv.Client(t)), Attempts: 2, Backoff: 200 * time.Millisecond},
		}
	}
	late := cron.WithAdmission("flaky", func(_ context.Context, tick cron.Tick) (bool, string, error) {
		if tick.Run > 1 { // not the startup run: a's retry
			time.Sleep(400 * time.Millisecond)
		}
		return true, "", nil
	})
	a, err := cron.Start([]cron.Job{job("a")}, cron.WithReplica("a"), late)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Shutdown(context.Background()) })
	if r := log.next(t, "attempt 1 on a"); r.err == nil || r.replica != "a" {
		t.Fatalf("first run: %s, %v; want a failure on a", r.replica, r.err)
	}
	waitStatus(t, lock.NewDB(srv.Client(t)), "flaky", func(st cron.JobStatus) bool { return st.Running == nil && st.SlotState == "open" })
	startReplicas(t, srv, 1, func(string, lock.DB) cron.Job { return job("b") })
	if r := log.next(t, "attempt 2"); r.err != nil || r.replica != "b" || r.tick.Attempt != 2 {
		t.Fatalf("second run: %s attempt %d, %v; want b's successful attempt 2", r.replica, r.tick.Attempt, r.err)
	}
	time.Sleep(800 * time.Millisecond) // a's retry comes, late
	if runs, _ := log.all(); len(runs) != 2 {
		for _, r := range runs {
			t.Logf("run on %s: trigger %v attempt %d, %v", r.replica, r.tick.Trigger, r.tick.Attempt, r.err)
		}
		t.Fatalf("%d runs, want 2: the slot was done", len(runs))
	}
}

// TestProtocolRecordOutlivesItsSlots starts a business-hours job on a
// Friday half a second before 17:45 (its clock set there), and lets it
// claim the day's last slot: its record must live until the next tick,
// Monday 09:00, at least, so that a pause set now holds then and a restart
// tonight does not run 17:45 again. It used to live 3 slots of the start's,
// 45 minutes. A replica of another version whose next tick is sooner must
// not shorten it.
func TestProtocolRecordOutlivesItsSlots(t *testing.T) {
	srv := redistest.Start(t)
	raw := srv.Client(t)
	friday := time.Date(2026, 12, 4, 17, 44, 59, 500e6, time.UTC)
	offset := time.Until(friday)
	clock := cron.WithClock(func() time.Time { return time.Now().Add(offset) })
	start := func(replica, spec string) {
		t.Helper()
		job := &leasedJob{
			testJob: testJob{name: "business", every: interval.MustCron(spec)},
			lease:   cron.LeaseConfig{DB: lock.NewDB(srv.Client(t))},
		}
		rt, err := cron.Start([]cron.Job{job}, clock, cron.WithReplica(replica))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { rt.Shutdown(context.Background()) })
		// Its startup run's claim, run or refused, and a's 17:45 tick.
		waitStatus(t, lock.NewDB(srv.Client(t)), "business", func(st cron.JobStatus) bool {
			return st.SeenBy == replica && st.Running == nil && (replica != "a" || strings.HasSuffix(st.Slot, "17:45:00Z"))
		})
	}
	monday := time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC)
	key := "@@wakuwaku-cron:{@@wakuwaku-entity:Lock:cron:business}"
	wantTTL := func(when string) {
		t.Helper()
		time.Sleep(50 * time.Millisecond) // the completion
		ttl, err := raw.PTTL(t.Context(), key).Result()
		if err != nil {
			t.Fatal(err)
		}
		if left := monday.Sub(friday); ttl < left {
			t.Errorf("%s: the record's TTL is %v, want at least %v, until the next tick", when, ttl, left)
		}
	}
	start("a", "CRON_TZ=UTC */15 9-17 * * 1-5")
	wantTTL("after the 17:45 slot")
	start("b", "CRON_TZ=UTC */10 * * * *")
	wantTTL("after a replica whose next tick is sooner")
}

// TestProtocolOutageDuringRun stalls Redis while a run is going, until
// after its run lease ran out: the run can't be recorded, and the slot,
// which gets two attempts, must still get its second once Redis answers.
// It used to stay "running" with its deadline in the past until the next
// tick, an hour later.
func TestProtocolOutageDuringRun(t *testing.T) {
	srv := redistest.Start(t)
	opts := srv.Options()
	opts.MaxRetries, opts.ReadTimeout, opts.WriteTimeout = -1, 100*time.Millisecond, 100*time.Millisecond
	c := redis.NewClient(opts)
	t.Cleanup(func() { c.Close() })
	log := newJobLog()
	started := make(chan struct{}, 10)
	job := &leasedJob{
		testJob: testJob{name: "report", every: interval.AtLeast(time.Hour), process: log.work("r", func(ctx context.Context, t cron.Tick) error {
			started <- struct{}{}
			if t.Attempt == 1 {
				<-ctx.Done() // the run lease is lost while Redis stalls
				return context.Cause(ctx)
			}
			return nil
		})},
		lease: cron.LeaseConfig{DB: lock.NewDB(c), Attempts: 2, RunTTL: 300 * time.Millisecond, Backoff: 100 * time.Millisecond},
	}
	rt, err := cron.Start([]cron.Job{job})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Shutdown(context.Background()) })
	<-started
	srv.Pause(t)
	r := log.next(t, "attempt 1, cancelled")
	if !errors.Is(r.err, lock.ErrLeaseLost) {
		t.Errorf("attempt 1 returned %v, want its lease lost", r.err)
	}
	time.Sleep(300 * time.Millisecond)
	srv.Resume(t)
	r = log.next(t, "attempt 2, after Redis answers again")
	if r.tick.Attempt != 2 || r.tick.Trigger != cron.TriggerRetry || r.err != nil {
		t.Errorf("second run: attempt %d, trigger %v, %v; want a successful attempt 2 (retry)", r.tick.Attempt, r.tick.Trigger, r.err)
	}
	st := waitStatus(t, lock.NewDB(srv.Client(t)), "report", func(st cron.JobStatus) bool { return st.Running == nil && st.SlotState == "done" })
	if st.Attempts != 2 {
		t.Errorf("status: %d attempts, want 2", st.Attempts)
	}
}

// TestProtocolDuplicateLeaseNames gives two jobs one lease name: Start
// refuses them, naming both. One of them used to never run.
func TestProtocolDuplicateLeaseNames(t *testing.T) {
	_, c := redistest.Mini(t)
	db := lock.NewDB(c)
	jobs := []cron.Job{
		&leasedJob{testJob: testJob{name: "report", every: interval.AtLeast(time.Hour)}, lease: cron.LeaseConfig{DB: db, Name: "nightly"}},
		&leasedJob{testJob: testJob{name: "export", every: interval.AtLeast(time.Hour)}, lease: cron.LeaseConfig{DB: db, Name: "nightly"}},
	}
	rt, err := cron.Start(jobs)
	if err == nil {
		rt.Shutdown(context.Background())
		t.Fatal("Start accepted two jobs with one lease name")
	}
	if !errors.Is(err, cron.ErrInvalidJob) || !strings.Contains(err.Error(), `"report"`) || !strings.Contains(err.Error(), `"export"`) || !strings.Contains(err.Error(), `"nightly"`) {
		t.Errorf("Start = %v, want ErrInvalidJob naming both jobs and the lease", err)
	}
}

// TestProtocolShutdownHonoursContextWhileRedisStalls shuts a runtime down
// while Redis answers nothing: Shutdown returns when its context ends, not
// when the start's announcement times out. It used to wait for it.
func TestProtocolShutdownHonoursContextWhileRedisStalls(t *testing.T) {
	srv := redistest.Start(t)
	opts := srv.Options()
	opts.ReadTimeout, opts.MaxRetries = 10*time.Second, -1
	c := redis.NewClient(opts)
	t.Cleanup(func() { c.Close() })
	job := &leasedJob{
		testJob: testJob{name: "nightly", every: interval.AtLeast(time.Hour).WithoutStartupRun()},
		lease:   cron.LeaseConfig{DB: lock.NewDB(c)},
	}
	if err := c.Ping(t.Context()).Err(); err != nil { // the connection is open
		t.Fatal(err)
	}
	srv.Pause(t)
	t.Cleanup(func() { srv.Resume(t) })
	rt, err := cron.Start([]cron.Job{job})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond) // the announcement is on its way
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	began := time.Now()
	err = rt.Shutdown(ctx)
	took := time.Since(began)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Shutdown = %v, want the context's deadline", err)
	}
	// The stalled calls last 10s; well below is in time.
	if took > 5*time.Second {
		t.Errorf("Shutdown with a 200ms context took %v", took)
	}
	srv.Resume(t)
	if err := rt.Shutdown(context.Background()); err != nil {
		t.Errorf("second Shutdown = %v, want nil once Redis answers", err)
	}
}

// TestProtocolOverrunSlotWarned runs a job every second whose runs take
// 1.5s, on two replicas, with two attempts per slot: every slot is run or,
// if a run of an earlier slot still holds the job through it, skipped with
// a Warn giving ReasonStillRunning, and no slot is run by anything but its
// tick. Such slots used to vanish with a Debug record on every replica.
// (The simulator found the case of a replica killed mid-run, whose run
// lease outlasts the next slot's tick: the live replicas warn too.)
func TestProtocolOverrunSlotWarned(t *testing.T) {
	srv := redistest.Start(t)
	log := newJobLog()
	var logs records
	for i := range 2 {
		name := fmt.Sprintf("r%d", i)
		job := &leasedJob{
			testJob: testJob{name: "slow", every: interval.MustCron("* * * * * *").WithoutStartupRun(), process: log.work(name, func(context.Context, cron.Tick) error {
				time.Sleep(1500 * time.Millisecond)
				return nil
			})},
			lease: cron.LeaseConfig{DB: lock.NewDB(srv.Client(t)), Attempts: 2},
		}
		rt, err := cron.Start([]cron.Job{job}, cron.WithReplica(name), cron.WithLogger(slog.New(&logs)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { rt.Shutdown(context.Background()) })
	}
	time.Sleep(6500 * time.Millisecond)
	runs, most := log.all()
	if most != 1 {
		t.Errorf("%d runs at once, want 1", most)
	}
	handled := make(map[string]string) // slot: how
	for _, r := range runs {
		key, _ := r.tick.Slot.Key()
		if r.tick.Trigger != cron.TriggerSchedule {
			t.Errorf("slot %s ran with trigger %v, want only ticks to run slots", key, r.tick.Trigger)
		}
		handled[key] = "run on " + r.replica
	}
	for _, rec := range logs.all() {
		if rec.Level == slog.LevelWarn && attr(rec, "reason").String() == cron.ReasonStillRunning {
			key := attr(rec, "scheduled").Time().UTC().Format("2006-01-02T15:04:05Z")
			if _, ok := handled[key]; !ok {
				handled[key] = "warned"
			}
		}
	}
	if len(runs) < 2 {
		t.Fatalf("%d runs in 6.5s, want several", len(runs))
	}
	first, last := runs[0].tick.Slot.Start, runs[len(runs)-1].tick.Slot.Start
	for s := first; !s.After(last); s = s.Add(time.Second) {
		key := s.UTC().Format("2006-01-02T15:04:05Z")
		if _, ok := handled[key]; !ok {
			t.Errorf("slot %s was neither run nor skipped with a Warn", key)
		}
	}
}

// TestProtocolNoCatchUpOnFirstDeploy starts a job that catches up, on a
// Redis that has never seen it: nothing ran before it existed, so nothing
// is caught up (the slot before it was deployed used to run). Started
// again later, with a slot missed since the record was made, it catches
// that slot up, once.
func TestProtocolNoCatchUpOnFirstDeploy(t *testing.T) {
	srv := redistest.Start(t)
	log := newJobLog()
	var mu sync.Mutex
	offset := time.Duration(0)
	clock := cron.WithClock(func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		return time.Now().Add(offset)
	})
	start := func(n int) []*cron.Runtime {
		var rts []*cron.Runtime
		for i := range n {
			name := fmt.Sprintf("r%d", i)
			job := &leasedJob{
				testJob: testJob{name: "nightly", every: interval.MustCron("@every 1h").WithoutStartupRun(), process: log.work(name, nil)},
				lease:   cron.LeaseConfig{DB: lock.NewDB(srv.Client(t)), CatchUp: 2 * time.Hour},
			}
			rt, err := cron.Start([]cron.Job{job}, cron.WithReplica(name), clock)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { rt.Shutdown(context.Background()) })
			rts = append(rts, rt)
		}
		return rts
	}
	rts := start(3)
	st := waitStatus(t, lock.NewDB(srv.Client(t)), "nightly", func(st cron.JobStatus) bool { return !st.SeenAt.IsZero() })
	time.Sleep(300 * time.Millisecond)
	if runs, _ := log.all(); len(runs) != 0 || st.Last != nil {
		t.Fatalf("%d runs on the first deploy, want none: no slot was missed since the job exists", len(runs))
	}
	for _, rt := range rts {
		rt.Shutdown(t.Context())
	}
	// Two hours later by the replicas' clocks: the last slot was missed.
	mu.Lock()
	offset = 2 * time.Hour
	mu.Unlock()
	start(3)
	if r := log.next(t, "the catch-up run"); r.tick.Trigger != cron.TriggerCatchUp {
		t.Errorf("trigger = %v, want catch-up", r.tick.Trigger)
	}
	time.Sleep(300 * time.Millisecond)
	if runs, _ := log.all(); len(runs) != 1 {
		t.Errorf("%d catch-up runs across 3 replicas, want 1", len(runs))
	}
	// Started again within the slot: it ran, nothing to catch up.
	start(2)
	time.Sleep(300 * time.Millisecond)
	if runs, _ := log.all(); len(runs) != 1 {
		t.Errorf("%d runs after a restart within the caught-up slot, want still 1", len(runs))
	}
}

// TestProtocolOnRing keeps 20 jobs' records on a go-redis Ring of two
// servers: Admin.Jobs lists every one (it used to scan one random shard),
// and a run-now request reaches every job (it used to be published on the
// record's shard while the replica listened on the channel's).
func TestProtocolOnRing(t *testing.T) {
	a, b := redistest.Start(t), redistest.Start(t)
	ring := func() *redis.Ring {
		r := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": a.Addr(), "b": b.Addr()}})
		t.Cleanup(func() { r.Close() })
		return r
	}
	const n = 20
	ran := make(chan cron.Tick, 2*n)
	var jobs []cron.Job
	db := lock.NewDB(ring())
	for i := range n {
		jobs = append(jobs, &leasedJob{
			testJob: testJob{name: fmt.Sprintf("job-%02d", i), every: interval.AtLeast(time.Hour).WithoutStartupRun(), process: func(_ context.Context, tick cron.Tick) error {
				ran <- tick
				return nil
			}},
			lease: cron.LeaseConfig{DB: db},
		})
	}
	rt, err := cron.Start(jobs)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Shutdown(context.Background()) })
	admin := cron.NewAdmin(lock.NewDB(ring()))
	var listed []cron.JobStatus
	deadline := time.Now().Add(10 * time.Second)
	for len(listed) < n && time.Now().Before(deadline) {
		if listed, err = admin.Jobs(t.Context()); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if len(listed) != n {
		t.Fatalf("Admin.Jobs listed %d jobs on a Ring, want %d", len(listed), n)
	}
	time.Sleep(100 * time.Millisecond) // the subscriptions are made
	for i := range n {
		if err := admin.RunNow(t.Context(), fmt.Sprintf("job-%02d", i)); err != nil {
			t.Fatal(err)
		}
	}
	got := make(map[string]bool)
	timeout := time.After(10 * time.Second)
	for len(got) < n {
		select {
		case tick := <-ran:
			got[tick.Job] = true
		case <-timeout:
			t.Fatalf("%d of %d requested jobs ran within 10s", len(got), n)
		}
	}
}

// deadClient fails every command once dead is set, as the client of a
// replica that died does (its process keeps running here, its Redis is
// gone).
type deadClient struct{ dead *atomic.Bool }

func (h deadClient) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h deadClient) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if h.dead.Load() {
			cmd.SetErr(errors.New("dead"))
			return cmd.Err()
		}
		return next(ctx, cmd)
	}
}
func (h deadClient) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// noRegistry fails the replica registry's beats on a client, so that its replica never knows the live replicas and claims at
// every tick, as one does before its first beat (replicas.go).
type noRegistry struct{}

func (noRegistry) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (noRegistry) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (noRegistry) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			if cmd.Name() == "zadd" { // a beat, not the connection's handshake
				return errors.New("no registry")
			}
		}
		return next(ctx, cmds)
	}
}

// TestProtocolDeadRunLeaseWarned kills replica a's Redis in the middle of
// its run of a per-second job (its run lease, 3s, outlasts the next
// slots' ticks): replica b skips those slots with a Warn giving
// ReasonStillRunning, since no replica will run them. The simulator found
// b skipping them at Debug, so that no replica said a slot was lost.
func TestProtocolDeadRunLeaseWarned(t *testing.T) {
	srv := redistest.Start(t)
	var dead atomic.Bool
	started := make(chan struct{})
	var once sync.Once
	ca := srv.Client(t)
	ca.AddHook(deadClient{&dead})
	a := &leasedJob{
		testJob: testJob{name: "per-second", every: interval.MustCron("* * * * * *").WithoutStartupRun(), process: func(ctx context.Context, _ cron.Tick) error {
			once.Do(func() { close(started) })
			<-ctx.Done()
			return nil
		}},
		lease: cron.LeaseConfig{DB: lock.NewDB(ca), RunTTL: 3 * time.Second},
	}
	rta, err := cron.Start([]cron.Job{a}, cron.WithReplica("a"), cron.WithAdmission("per-second", func(context.Context, cron.Tick) (bool, string, error) {
		return !dead.Load(), "", nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rta.Shutdown(context.Background()) })
	<-started
	dead.Store(true)
	var logs records
	b := &leasedJob{
		testJob: testJob{name: "per-second", every: interval.MustCron("* * * * * *").WithoutStartupRun()},
		lease:   cron.LeaseConfig{DB: lock.NewDB(srv.Client(t)), RunTTL: 3 * time.Second},
	}
	rtb, err := cron.Start([]cron.Job{b}, cron.WithReplica("b"), cron.WithLogger(slog.New(&logs)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rtb.Shutdown(context.Background()) })
	time.Sleep(2 * time.Second)
	warned := 0
	for _, r := range logs.all() {
		if r.Level == slog.LevelWarn && attr(r, "reason").String() == cron.ReasonStillRunning {
			warned++
		}
	}
	if warned == 0 {
		for _, r := range logs.all() {
			t.Logf("%v %s reason=%v", r.Level, r.Message, attr(r, "reason"))
		}
		t.Fatal("b skipped the slots under a's dead run lease without a Warn")
	}
}

// TestProtocolFollowUpOfTheNewerSlot has replica b start during replica
// a's run of slot S0 (b's claim plans a follow-up of S0 for when that run's
// lease would end) and tick S1 while a runs it, before that follow-up is
// due: b's follow-up of S1 must replace the one of S0. Then a's Redis dies
// in the middle of S1's run, so that only b can run S1's second attempt.
// The simulator found b keeping its look at S0, past since S1 opened: its
// claim recorded a's run of S1 lost and, being about S0, ran nothing, and
// S1 never got its retry (seed 1002801).
func TestProtocolFollowUpOfTheNewerSlot(t *testing.T) {
	srv := redistest.Start(t)
	const every, ttl = 10 * time.Second, 3 * time.Second
	spec := interval.MustCron("*/10 * * * * *")
	// a starts 1.5 s before a slot begins, so that S1 comes before the
	// run lease of a's startup run (S0) would end.
	now := time.Now()
	if wait := now.Truncate(every).Add(every - 1500*time.Millisecond).Sub(now); wait > 0 {
		time.Sleep(wait)
	} else {
		time.Sleep(wait + every)
	}
	var dead atomic.Bool
	ca := srv.Client(t)
	ca.AddHook(deadClient{&dead})
	type start struct {
		replica string
		tick    cron.Tick
	}
	starts := make(chan start, 10)
	job := func(replica string, db lock.DB, work time.Duration) *leasedJob {
		return &leasedJob{
			testJob: testJob{name: "ten-seconds", every: spec, process: func(ctx context.Context, tk cron.Tick) error {
				starts <- start{replica, tk}
				select {
				case <-time.After(work):
				case <-ctx.Done():
				}
				return context.Cause(ctx)
			}},
			lease: cron.LeaseConfig{DB: db, RunTTL: ttl, Attempts: 2, Backoff: 100 * time.Millisecond},
		}
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	rta, err := cron.Start([]cron.Job{job("a", lock.NewDB(ca), 1200*time.Millisecond)}, cron.WithReplica("a"), cron.WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		rta.Shutdown(ctx)
	})
	s0 := <-starts
	if s0.replica != "a" {
		t.Fatalf("the startup run was %s's, want a's", s0.replica)
	}
	// b ticks each slot 300 ms after a, so a wins S1, and b's tick finds
	// its run going: b claims at each tick, knowing no registry (a replica
	// that does not own a slot would look at it only 1 s after its tick).
	ticked := make(chan cron.Tick, 10)
	cb := srv.Client(t)
	cb.AddHook(noRegistry{})
	rtb, err := cron.Start([]cron.Job{job("b", lock.NewDB(cb), 0)}, cron.WithReplica("b"), cron.WithLogger(quiet),
		cron.WithClock(func() time.Time { return time.Now().Add(-300 * time.Millisecond) }),
		cron.WithObserver(cron.Observer{RunSkipped: func(tk cron.Tick, reason string, _ error) {
			if reason == cron.ReasonRunning {
				ticked <- tk
			}
		}}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rtb.Shutdown(context.Background()) })
	s1 := <-starts
	if s1.replica != "a" || !s1.tick.Slot.Start.After(s0.tick.Slot.Start) {
		t.Fatalf("first run after the startup run: %s's of slot %v; want a's of the next slot", s1.replica, s1.tick.Slot.Start)
	}
	// b's tick of S1 found a's run going (its claim of S0 did too, at its
	// start): then a's Redis dies, before a's first heartbeat.
	for found := false; !found; {
		select {
		case tk := <-ticked:
			found = tk.Slot.Start.Equal(s1.tick.Slot.Start)
		case <-time.After(every):
			t.Fatal("b did not tick S1 while a ran it")
		}
	}
	dead.Store(true)
	select {
	case s := <-starts:
		if s.replica != "b" || !s.tick.Slot.Start.Equal(s1.tick.Slot.Start) || s.tick.Attempt != 2 {
			t.Errorf("run after a died: %s's of slot %v, attempt %d; want b's attempt 2 of slot %v",
				s.replica, s.tick.Slot.Start, s.tick.Attempt, s1.tick.Slot.Start)
		}
	case <-time.After(ttl + 3*time.Second):
		t.Fatalf("slot %v, whose run was lost with a's Redis, got no second attempt within %v", s1.tick.Slot.Start, ttl+3*time.Second)
	}
}

// TestProtocolRestartDuringBackoff stops the only replica while the slot
// whose first attempt failed waits out its back-off (its retry timer dies
// with it), and starts another in its place, without a startup run: the
// new replica's announcement finds the slot open and runs its second
// attempt. The simulator found such a slot never retried when each
// replica that had a look at it restarted (seed 1008185).
func TestProtocolRestartDuringBackoff(t *testing.T) {
	srv := redistest.Start(t)
	db := lock.NewDB(srv.Client(t))
	const every = 10 * time.Second
	spec := interval.MustCron("*/10 * * * * *")
	// Start early in a slot, so that the next one does not begin (and
	// open a slot of its own) before the retry.
	now := time.Now()
	if into := now.Sub(now.Truncate(every)); into > time.Second {
		time.Sleep(every - into + 200*time.Millisecond)
	}
	lease := cron.LeaseConfig{DB: db, Attempts: 3, Backoff: time.Second}
	failed := make(chan cron.Tick, 1)
	a := &leasedJob{testJob: testJob{name: "report", every: spec, process: func(_ context.Context, tk cron.Tick) error {
		failed <- tk
		return errors.New("planned failure")
	}}, lease: lease}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	rta, err := cron.Start([]cron.Job{a}, cron.WithReplica("a"), cron.WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	first := <-failed
	waitStatus(t, db, "report", func(st cron.JobStatus) bool { return st.SlotState == "open" && st.Running == nil })
	if err := rta.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	ran := make(chan cron.Tick, 1)
	b := &leasedJob{testJob: testJob{name: "report", every: spec.WithoutStartupRun(), process: func(_ context.Context, tk cron.Tick) error {
		ran <- tk
		return nil
	}}, lease: lease}
	rtb, err := cron.Start([]cron.Job{b}, cron.WithReplica("b"), cron.WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rtb.Shutdown(context.Background()) })
	select {
	case tk := <-ran:
		if !tk.Slot.Start.Equal(first.Slot.Start) || tk.Attempt != 2 || tk.Trigger != cron.TriggerRetry {
			t.Errorf("b's first run: slot %v, attempt %d, %v; want attempt 2 of slot %v, a retry", tk.Slot.Start, tk.Attempt, tk.Trigger, first.Slot.Start)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("slot %v, open after a failed attempt, got no second attempt within 5s of its only replica's restart", first.Slot.Start)
	}
}

// TestProtocolRecordKeptAfterFailedClaim replaces a paused job's every-5s
// schedule with a daily one while its replica's Redis does not answer: the
// claim the replacement makes fails, and the record's TTL, set for the old
// schedule, would end long before the next daily tick, taking the pause
// with it. Once Redis answers, the replica announces the job again, and the
// record lives past that tick. The simulator found a paused job's record
// expire after such a deploy, and the job run while paused (seed 3001870).
func TestProtocolRecordKeptAfterFailedClaim(t *testing.T) {
	srv := redistest.Start(t)
	var dead atomic.Bool
	c := srv.Client(t)
	c.AddHook(deadClient{&dead})
	lease := cron.LeaseConfig{DB: lock.NewDB(c)}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	rt, err := cron.Start([]cron.Job{&leasedJob{testJob: testJob{name: "report", every: interval.MustCron("*/5 * * * * *")}, lease: lease}},
		cron.WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Shutdown(context.Background()) })
	admin := cron.NewAdmin(lock.NewDB(srv.Client(t)))
	waitStatus(t, lock.NewDB(srv.Client(t)), "report", func(st cron.JobStatus) bool { return true })
	if err := admin.Pause(t.Context(), "report"); err != nil {
		t.Fatal(err)
	}
	dead.Store(true)
	daily := interval.MustCron("0 0 * * *")
	if err := rt.Replace(&leasedJob{testJob: testJob{name: "report", every: daily}, lease: lease}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // its claim fails meanwhile
	dead.Store(false)
	next, _ := daily.NextSlot(time.Now())
	key := "@@wakuwaku-cron:{@@wakuwaku-entity:Lock:cron:report}"
	deadline := time.Now().Add(10 * time.Second)
	for {
		ttl, err := srv.Client(t).PTTL(t.Context(), key).Result()
		if err != nil {
			t.Fatal(err)
		}
		if ttl > time.Until(next.Start) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the record's TTL is %v 10 s after Redis answered again; the daily job's next tick is in %v", ttl, time.Until(next.Start).Round(time.Second))
		}
		time.Sleep(50 * time.Millisecond)
	}
	if st, err := admin.Status(t.Context(), "report"); err != nil || !st.Paused {
		t.Errorf("status after the replacement: %+v, %v; want the job still paused", st, err)
	}
}

// TestProtocolRecordKeptAfterLateStartupTick pauses a job of a 5-second
// schedule, then starts its replica again with a daily schedule whose
// latest slot began two hours ago and could be claimed for a minute: the
// startup tick is too late for that slot, and the replica answers it
// itself, without a script. The record must still live until the daily
// tick, so that the job is still paused then. It used to keep the TTL that
// the 5-second schedule's claims set, since the start sent no E6 for a
// job whose startup run would claim: the record expired, and the next
// tick ran the job while it was paused (simulator seeds 6003879 and
// 6011226, after a rolling deploy to a two-hourly schedule).
func TestProtocolRecordKeptAfterLateStartupTick(t *testing.T) {
	srv := redistest.Start(t)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	start := func(every interval.Interval, ttl time.Duration) *cron.Runtime {
		lease := cron.LeaseConfig{DB: lock.NewDB(srv.Client(t)), TTL: ttl}
		rt, err := cron.Start([]cron.Job{&leasedJob{testJob: testJob{name: "report", every: every}, lease: lease}},
			cron.WithLogger(quiet), cron.WithReplica("r0"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { rt.Shutdown(context.Background()) })
		return rt
	}
	old := start(interval.MustCron("*/5 * * * * *"), 0)
	db := lock.NewDB(srv.Client(t))
	waitStatus(t, db, "report", func(st cron.JobStatus) bool { return true })
	admin := cron.NewAdmin(db)
	if err := admin.Pause(t.Context(), "report"); err != nil {
		t.Fatal(err)
	}
	if err := old.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	past := time.Now().UTC().Add(-2 * time.Hour)
	daily := interval.MustCron(fmt.Sprintf("CRON_TZ=UTC %d %d * * *", past.Minute(), past.Hour()))
	start(daily, time.Minute)
	next, _ := daily.NextSlot(time.Now())
	key := "@@wakuwaku-cron:{@@wakuwaku-entity:Lock:cron:report}"
	deadline := time.Now().Add(10 * time.Second)
	for {
		ttl, err := srv.Client(t).PTTL(t.Context(), key).Result()
		if err != nil {
			t.Fatal(err)
		}
		if ttl > time.Until(next.Start) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the record's TTL is %v 10 s after the start; the daily job's next tick is in %v", ttl, time.Until(next.Start).Round(time.Second))
		}
		time.Sleep(50 * time.Millisecond)
	}
	if st, err := admin.Status(t.Context(), "report"); err != nil || !st.Paused {
		t.Errorf("status after the start: %+v, %v; want the job still paused", st, err)
	}
}

// halfSlotBefore waits until half a slot of length every before the next
// slot that is at least that far off, and returns that slot's start, S: a
// test starts its replicas there, with time to spare before S's tick.
func halfSlotBefore(every time.Duration) time.Time {
	now := time.Now()
	S := now.Truncate(every).Add(every)
	if S.Sub(now) < every/2 {
		S = S.Add(every)
	}
	time.Sleep(time.Until(S.Add(-every / 2)))
	return S
}

// TestProtocolOutageAtTick holds a slot whose tick fell in a Redis outage:
// replica a's tick of slot S fails, and a's announcement after it finds S
// unclaimed; then replica b, started after, claims S (its catch-up) and
// dies in the run. a must run S's second attempt once b's run lease ends:
// it looks at S again after the outage (E13) and follows b's run. The
// simulator found such a slot lost, with attempts left and no replica
// warning: only the replica that claimed S knew of it (seed 17975).
func TestProtocolOutageAtTick(t *testing.T) {
	srv := redistest.Start(t)
	const every = 10 * time.Second
	spec := interval.MustCron("*/10 * * * * *").WithoutStartupRun()
	S := halfSlotBefore(every)
	lease := cron.LeaseConfig{Attempts: 2, Backoff: 3 * time.Second, RunTTL: time.Second, CatchUp: time.Minute}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))

	var deadA atomic.Bool
	ca := srv.Client(t)
	ca.AddHook(deadClient{&deadA})
	ranA := make(chan cron.Tick, 4)
	la := lease
	la.DB = lock.NewDB(ca)
	rta, err := cron.Start([]cron.Job{&leasedJob{testJob: testJob{name: "report", every: spec, process: func(_ context.Context, tk cron.Tick) error {
		ranA <- tk
		return nil
	}}, lease: la}}, cron.WithReplica("a"), cron.WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rta.Shutdown(context.Background()) })
	waitStatus(t, lock.NewDB(srv.Client(t)), "report", func(st cron.JobStatus) bool { return true })

	// a's Redis is gone from here (before S, however long a's start took)
	// to half a second after S.
	deadA.Store(true)
	if late := time.Since(S); late >= 0 {
		t.Fatalf("a started %v after slot %v began: the test's timing failed", late, S)
	}
	time.Sleep(time.Until(S.Add(every / 20)))
	deadA.Store(false)

	// b starts at S + 1.5s, runs S (its catch-up), and dies in the run:
	// its Redis is gone for good, so its run lease runs out.
	time.Sleep(time.Until(S.Add(1500 * time.Millisecond)))
	var deadB atomic.Bool
	cb := srv.Client(t)
	cb.AddHook(deadClient{&deadB})
	ranB := make(chan cron.Tick, 4)
	lb := lease
	lb.DB = lock.NewDB(cb)
	rtb, err := cron.Start([]cron.Job{&leasedJob{testJob: testJob{name: "report", every: spec, process: func(_ context.Context, tk cron.Tick) error {
		deadB.Store(true)
		ranB <- tk
		return errors.New("died")
	}}, lease: lb}}, cron.WithReplica("b"), cron.WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rtb.Shutdown(context.Background()) })
	select {
	case tk := <-ranB:
		if !tk.Slot.Start.Equal(S) || tk.Trigger != cron.TriggerCatchUp {
			t.Fatalf("b ran slot %v (%v); the test wants b's catch-up of slot %v", tk.Slot.Start, tk.Trigger, S)
		}
	case tk := <-ranA:
		t.Fatalf("a ran slot %v (%v) before b's catch-up: the test's timing failed", tk.Slot.Start, tk.Trigger)
	case <-time.After(3 * time.Second):
		t.Fatalf("b did not run slot %v by catch-up", S)
	}
	select {
	case tk := <-ranA:
		if !tk.Slot.Start.Equal(S) || tk.Attempt != 2 || tk.Trigger != cron.TriggerRetry {
			t.Errorf("a ran slot %v, attempt %d (%v); want slot %v's second attempt, a retry", tk.Slot.Start, tk.Attempt, tk.Trigger, S)
		}
	case <-time.After(time.Until(S.Add(every - time.Second))):
		t.Fatalf("slot %v, whose only run died with an attempt left, got no second attempt before the next slot", S)
	}
}

// TestProtocolLeaseLostToFailover: replica a's claim of slot S is lost
// (a failover to a replica that never had it), b claims S after it and
// dies in the run. a's heartbeat finds its run lease gone, and its
// completion finds the run unrecorded; a, the only replica that knows a
// run of S is going, must follow that run up (E3), so that S, with an
// attempt left, gets it when b's run lease ends. Before, a did nothing,
// and S was never retried (simulator seed 42740).
func TestProtocolLeaseLostToFailover(t *testing.T) {
	srv := redistest.Start(t)
	raw := srv.Client(t)
	const every = 10 * time.Second
	spec := interval.MustCron("*/10 * * * * *").WithoutStartupRun()
	S := halfSlotBefore(every)
	// Neither replica knows the live replicas: each owns every slot and
	// claims it at its tick (E1).
	lease := cron.LeaseConfig{Attempts: 2, Backoff: 200 * time.Millisecond, RunTTL: time.Second}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	var deadB atomic.Bool
	deadB.Store(true) // b's tick of S fails; its looks after it find S once a's claim is gone
	ranA, ranB := make(chan cron.Tick, 4), make(chan cron.Tick, 4)
	ca, cb := srv.Client(t), srv.Client(t)
	ca.AddHook(noRegistry{})
	cb.AddHook(noRegistry{})
	cb.AddHook(deadClient{&deadB})
	la, lb := lease, lease
	la.DB, lb.DB = lock.NewDB(ca), lock.NewDB(cb)
	rta, err := cron.Start([]cron.Job{&leasedJob{testJob: testJob{name: "report", every: spec, process: func(ctx context.Context, tk cron.Tick) error {
		ranA <- tk
		if tk.Attempt > 1 {
			return nil
		}
		// The failover: the record never had a's claim.
		if err := raw.Del(context.Background(), "@@wakuwaku-cron:{@@wakuwaku-entity:Lock:cron:report}").Err(); err != nil {
			t.Error(err)
		}
		deadB.Store(false)
		<-ctx.Done() // until a's heartbeat finds b's run in the record
		return context.Cause(ctx)
	}}, lease: la}}, cron.WithReplica("a"), cron.WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rta.Shutdown(context.Background()) })
	rtb, err := cron.Start([]cron.Job{&leasedJob{testJob: testJob{name: "report", every: spec, process: func(ctx context.Context, tk cron.Tick) error {
		deadB.Store(true) // b dies in the run: its run lease runs out
		ranB <- tk
		<-ctx.Done()
		return context.Cause(ctx)
	}}, lease: lb}}, cron.WithReplica("b"), cron.WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rtb.Shutdown(context.Background()) })
	if late := time.Since(S); late >= 0 {
		t.Fatalf("the replicas started %v after slot %v began: the test's timing failed", late, S)
	}
	for i, ran := range []chan cron.Tick{ranA, ranB} {
		select {
		case tk := <-ran:
			if !tk.Slot.Start.Equal(S) || tk.Attempt != 1 {
				t.Fatalf("replica %d ran slot %v, attempt %d; the test wants slot %v's first attempt", i, tk.Slot.Start, tk.Attempt, S)
			}
		case <-time.After(time.Until(S.Add(every / 2))):
			t.Fatalf("replica %d did not run slot %v: the test's timing failed", i, S)
		}
	}
	select {
	case tk := <-ranA:
		if !tk.Slot.Start.Equal(S) || tk.Attempt != 2 || tk.Trigger != cron.TriggerRetry {
			t.Errorf("a ran slot %v, attempt %d (%v); want slot %v's second attempt, a retry", tk.Slot.Start, tk.Attempt, tk.Trigger, S)
		}
	case <-time.After(time.Until(S.Add(every - 500*time.Millisecond))):
		t.Fatalf("slot %v, whose run died with an attempt left, got no second attempt before the next slot", S)
	}
}

// TestProtocolLookAfterOutage holds a slot whose tick fell in an outage on
// the only replica: the slot runs once Redis answers, late, and the looks
// that Redis did not answer meanwhile are not ticks: the observer hears of
// one skipped tick.
func TestProtocolLookAfterOutage(t *testing.T) {
	srv := redistest.Start(t)
	const every = 10 * time.Second
	spec := interval.MustCron("*/10 * * * * *").WithoutStartupRun()
	// Lose Redis as soon as Start returns: S's tick fails however long
	// Start took.
	S := halfSlotBefore(every)
	var dead atomic.Bool
	c := srv.Client(t)
	c.AddHook(deadClient{&dead})
	ran := make(chan cron.Tick, 4)
	var mu sync.Mutex
	var skipped []string
	obs := cron.Observer{RunSkipped: func(tk cron.Tick, reason string, _ error) {
		mu.Lock()
		defer mu.Unlock()
		skipped = append(skipped, fmt.Sprintf("%s %s", tk.Slot.Start.Format(time.TimeOnly), reason))
	}}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	rt, err := cron.Start([]cron.Job{&leasedJob{testJob: testJob{name: "report", every: spec, process: func(_ context.Context, tk cron.Tick) error {
		ran <- tk
		return nil
	}}, lease: cron.LeaseConfig{DB: lock.NewDB(c), Backoff: 500 * time.Millisecond}}},
		cron.WithLogger(quiet), cron.WithObserver(obs))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Shutdown(context.Background()) })
	dead.Store(true) // the tick fails, and the looks 0.5 s and 1.5 s after it
	if late := time.Since(S); late >= 0 {
		t.Fatalf("Start returned %v after slot %v began: the test's timing failed", late, S)
	}
	time.Sleep(time.Until(S.Add(2200 * time.Millisecond)))
	dead.Store(false)
	select {
	case tk := <-ran:
		if !tk.Slot.Start.Equal(S) || tk.Trigger != cron.TriggerSchedule || tk.Started.Before(S.Add(2200*time.Millisecond)) {
			t.Errorf("ran slot %v (%v) at %v; want slot %v, late, once Redis answered", tk.Slot.Start, tk.Trigger, tk.Started, S)
		}
	case <-time.After(time.Until(S.Add(every - time.Second))):
		t.Fatalf("slot %v did not run after the outage", S)
	}
	mu.Lock()
	defer mu.Unlock()
	if want := S.Format(time.TimeOnly) + " " + cron.ReasonAdmissionFailed; len(skipped) != 1 || skipped[0] != want {
		t.Errorf("skips reported = %q, want one: %q", skipped, want)
	}
}

// TestProtocolSpreadRunEndsBeforeDue runs a leased job every second,
// spread over the second, whose runs end after the next slot starts but
// before that slot's tick is due (its start plus the job's offset): no
// run holds the job when a tick comes, so every slot runs, as it does
// without a lease. R2 used to compare the last run's end with the slot's
// start, and skipped every other slot on every replica.
func TestProtocolSpreadRunEndsBeforeDue(t *testing.T) {
	srv := redistest.Start(t)
	every := interval.MustCron("* * * * * *").WithSpread(time.Second).WithoutStartupRun()
	// A job whose offset is 0.6 s to 0.8 s into its slot, and runs that
	// end halfway between the next slot's start and its tick.
	slot := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var name string
	var offset time.Duration
	for i := 0; offset < 600*time.Millisecond || offset > 800*time.Millisecond; i++ {
		name = fmt.Sprint("spread-", i)
		offset = every.Due(name, slot).Sub(slot)
	}
	took := time.Second - offset/2
	log := newJobLog()
	var logs records
	job := &leasedJob{
		testJob: testJob{name: name, every: every, process: log.work("r0", func(context.Context, cron.Tick) error {
			time.Sleep(took)
			return nil
		})},
		lease: cron.LeaseConfig{DB: lock.NewDB(srv.Client(t))},
	}
	rt, err := cron.Start([]cron.Job{job}, cron.WithReplica("r0"), cron.WithLogger(slog.New(&logs)))
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(5500 * time.Millisecond)
	if err := rt.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	runs, _ := log.all()
	if len(runs) < 3 {
		t.Fatalf("%d runs in 5.5 s, want about 5", len(runs))
	}
	for i := 1; i < len(runs); i++ {
		if prev, cur := runs[i-1].tick.Slot.Start, runs[i].tick.Slot.Start; !cur.Equal(prev.Add(time.Second)) {
			t.Errorf("run %d of slot %v follows slot %v, want each slot run (offset %v, runs of %v)", i, cur.Format("15:04:05"), prev.Format("15:04:05"), offset, took)
		}
	}
	for _, rec := range logs.all() {
		if rec.Level == slog.LevelWarn {
			t.Errorf("Warn %q, reason %q", rec.Message, attr(rec, "reason"))
		}
	}
}

// TestProtocolFollowNotice: replica a runs slot S at its tick; then Redis
// loses the record (E11), and replica b, started after S began, runs S
// again (its startup run's late tick, R14) and dies in the run. a ticked S
// already and has no look planned at it; b's follow notice (E14) makes a
// follow the run and run S's second attempt once b's run lease ends.
// Before, nobody did, and S was not retried (simulator seed 2005375, a
// limit PROTOCOL.md stated).
func TestProtocolFollowNotice(t *testing.T) {
	srv := redistest.Start(t)
	raw := srv.Client(t)
	const every = 10 * time.Second
	spec := interval.MustCron("*/10 * * * * *")
	S := halfSlotBefore(every)
	lease := cron.LeaseConfig{Attempts: 2, Backoff: time.Second, RunTTL: time.Second}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))

	ranA := make(chan cron.Tick, 4)
	la := lease
	la.DB = lock.NewDB(srv.Client(t))
	rta, err := cron.Start([]cron.Job{&leasedJob{testJob: testJob{name: "report", every: spec.WithoutStartupRun(), process: func(_ context.Context, tk cron.Tick) error {
		ranA <- tk
		return nil
	}}, lease: la}}, cron.WithReplica("a"), cron.WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rta.Shutdown(context.Background()) })
	select {
	case tk := <-ranA:
		if !tk.Slot.Start.Equal(S) {
			t.Fatalf("a ran slot %v; the test wants its tick of %v", tk.Slot.Start, S)
		}
	case <-time.After(time.Until(S.Add(time.Second))):
		t.Fatalf("a did not run slot %v at its tick", S)
	}
	waitStatus(t, lock.NewDB(raw), "report", func(st cron.JobStatus) bool { return st.Running == nil && st.SlotState == "done" })
	// E11: Redis loses the record and its history.
	ctx := context.Background()
	keys, err := raw.Keys(ctx, "@@wakuwaku-cron:{*").Result()
	if err != nil || len(keys) == 0 {
		t.Fatalf("the record's keys: %v, %v", keys, err)
	}
	if err := raw.Del(ctx, keys...).Err(); err != nil {
		t.Fatal(err)
	}

	// b starts at S + 1.5s, past the look's grace: its startup run claims
	// S again, and b dies in the run (its Redis is gone for good).
	time.Sleep(time.Until(S.Add(1500 * time.Millisecond)))
	var deadB atomic.Bool
	cb := srv.Client(t)
	cb.AddHook(deadClient{&deadB})
	ranB := make(chan cron.Tick, 4)
	lb := lease
	lb.DB = lock.NewDB(cb)
	rtb, err := cron.Start([]cron.Job{&leasedJob{testJob: testJob{name: "report", every: spec, process: func(_ context.Context, tk cron.Tick) error {
		deadB.Store(true)
		ranB <- tk
		return errors.New("died")
	}}, lease: lb}}, cron.WithReplica("b"), cron.WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rtb.Shutdown(context.Background()) })
	select {
	case tk := <-ranB:
		if !tk.Slot.Start.Equal(S) || tk.Attempt != 1 {
			t.Fatalf("b ran slot %v, attempt %d; the test wants its startup run of slot %v", tk.Slot.Start, tk.Attempt, S)
		}
	case <-time.After(3 * time.Second):
		t.Fatalf("b's startup run did not run slot %v", S)
	}
	select {
	case tk := <-ranA:
		if !tk.Slot.Start.Equal(S) || tk.Attempt != 2 {
			t.Errorf("a ran slot %v, attempt %d (%v); want slot %v's second attempt", tk.Slot.Start, tk.Attempt, tk.Trigger, S)
		}
	case <-time.After(time.Until(S.Add(every - time.Second))):
		t.Fatalf("slot %v, whose run at b's start died with an attempt left, got no second attempt before the next slot", S)
	}
}

// TestProtocolFollowNoticeAfterOutage: replica b's tick of slot S fails
// (its Redis is down), while replica a runs S. Then Redis loses the
// record (E11); once b's Redis answers, b's look after the outage finds S
// unclaimed and claims it late (L2, as E1), and b dies in the run. a ran
// S already and has no look planned at it; b's follow notice (E14) makes
// a follow the run and run S's second attempt once b's run lease ends.
// Before, only b knew of its late run, and S was not retried (simulator
// seed 21393).
func TestProtocolFollowNoticeAfterOutage(t *testing.T) {
	srv := redistest.Start(t)
	raw := srv.Client(t)
	const every = 10 * time.Second
	spec := interval.MustCron("*/10 * * * * *").WithoutStartupRun()
	S := halfSlotBefore(every)
	lease := cron.LeaseConfig{Attempts: 2, Backoff: 500 * time.Millisecond, RunTTL: time.Second}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))

	ranA := make(chan cron.Tick, 4)
	la := lease
	la.DB = lock.NewDB(srv.Client(t))
	rta, err := cron.Start([]cron.Job{&leasedJob{testJob: testJob{name: "report", every: spec, process: func(_ context.Context, tk cron.Tick) error {
		ranA <- tk
		return nil
	}}, lease: la}}, cron.WithReplica("a"), cron.WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rta.Shutdown(context.Background()) })
	var deadB atomic.Bool
	cb := srv.Client(t)
	cb.AddHook(deadClient{&deadB})
	ranB := make(chan cron.Tick, 4)
	lb := lease
	lb.DB = lock.NewDB(cb)
	rtb, err := cron.Start([]cron.Job{&leasedJob{testJob: testJob{name: "report", every: spec, process: func(_ context.Context, tk cron.Tick) error {
		deadB.Store(true)
		ranB <- tk
		return errors.New("died")
	}}, lease: lb}}, cron.WithReplica("b"), cron.WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rtb.Shutdown(context.Background()) })
	deadB.Store(true) // b's tick of S fails, and its looks 0.5 s and 1.5 s after it
	if late := time.Since(S); late >= 0 {
		t.Fatalf("Start returned %v after slot %v began: the test's timing failed", late, S)
	}
	select {
	case tk := <-ranA:
		if !tk.Slot.Start.Equal(S) {
			t.Fatalf("a ran slot %v; the test wants its run of %v", tk.Slot.Start, S)
		}
	case <-time.After(time.Until(S.Add(2 * time.Second))):
		t.Fatalf("a did not run slot %v", S)
	}
	waitStatus(t, lock.NewDB(raw), "report", func(st cron.JobStatus) bool { return st.Running == nil && st.SlotState == "done" })
	// E11: Redis loses the record and its history.
	ctx := context.Background()
	keys, err := raw.Keys(ctx, "@@wakuwaku-cron:{*").Result()
	if err != nil || len(keys) == 0 {
		t.Fatalf("the record's keys: %v, %v", keys, err)
	}
	if err := raw.Del(ctx, keys...).Err(); err != nil {
		t.Fatal(err)
	}
	if late := time.Since(S.Add(2200 * time.Millisecond)); late >= 0 {
		t.Fatalf("the record was lost %v after b's Redis was to come back: the test's timing failed", late)
	}
	time.Sleep(time.Until(S.Add(2200 * time.Millisecond)))
	deadB.Store(false)
	select {
	case tk := <-ranB:
		if !tk.Slot.Start.Equal(S) || tk.Attempt != 1 {
			t.Fatalf("b ran slot %v, attempt %d; the test wants its late claim of slot %v", tk.Slot.Start, tk.Attempt, S)
		}
	case <-time.After(time.Until(S.Add(6 * time.Second))):
		t.Fatalf("b's look after the outage did not run slot %v", S)
	}
	select {
	case tk := <-ranA:
		if !tk.Slot.Start.Equal(S) || tk.Attempt != 2 {
			t.Errorf("a ran slot %v, attempt %d (%v); want slot %v's second attempt", tk.Slot.Start, tk.Attempt, tk.Trigger, S)
		}
	case <-time.After(time.Until(S.Add(every - time.Second))):
		t.Fatalf("slot %v, whose late run on b died with an attempt left, got no second attempt before the next slot", S)
	}
}

// TestProtocolRequestPassedOnAfterRemove: an operator asks for a run while
// replica a runs the job, and a removes the job before that run ends. The
// run's completion finds the request waiting, which a can no longer
// serve: it announces the request again, and replica b runs it at once.
// Before, the request waited for b's next claim, an hour later (simulator
// seeds 3002861, 3006521).
func TestProtocolRequestPassedOnAfterRemove(t *testing.T) {
	srv := redistest.Start(t)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	spec := interval.MustCron("0 * * * *")
	lease := cron.LeaseConfig{Attempts: 2, RunTTL: time.Second}

	release := make(chan struct{})
	started := make(chan struct{}, 1)
	la := lease
	la.DB = lock.NewDB(srv.Client(t))
	rta, err := cron.Start([]cron.Job{&leasedJob{testJob: testJob{name: "report", every: spec, process: func(context.Context, cron.Tick) error {
		started <- struct{}{}
		<-release
		return nil
	}}, lease: la}}, cron.WithReplica("a"), cron.WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rta.Shutdown(context.Background()) })
	select {
	case <-started:
	case <-time.After(3 * time.Second):
		t.Fatal("a's startup run did not start")
	}

	ranB := make(chan cron.Tick, 4)
	lb := lease
	lb.DB = lock.NewDB(srv.Client(t))
	rtb, err := cron.Start([]cron.Job{&leasedJob{testJob: testJob{name: "report", every: spec.WithoutStartupRun(), process: func(_ context.Context, tk cron.Tick) error {
		ranB <- tk
		return nil
	}}, lease: lb}}, cron.WithReplica("b"), cron.WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rtb.Shutdown(context.Background()) })

	db := lock.NewDB(srv.Client(t))
	waitListening(t, srv.Client(t), 2)
	if err := cron.NewAdmin(db).RunNow(t.Context(), "report"); err != nil {
		t.Fatal(err)
	}
	// b hears the request and finds a's run holding the job (R9): the
	// completion of that run is to serve it.
	time.Sleep(300 * time.Millisecond)
	removed := make(chan error, 1)
	go func() { removed <- rta.Remove(context.Background(), "report") }()
	waitStatus(t, db, "report", func(st cron.JobStatus) bool { return st.Running != nil })
	time.Sleep(100 * time.Millisecond) // Remove has marked the job
	close(release)
	if err := <-removed; err != nil {
		t.Fatal(err)
	}
	select {
	case tk := <-ranB:
		if tk.Trigger != cron.TriggerRequest {
			t.Errorf("b ran %v; want the requested run", tk.Trigger)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("the run-now request that a's completion found waiting was not run within 3s by b, which runs the job")
	}
}

// TestProtocolCompletionAfterClaimWindow: a run of slot S goes on past
// S's claim window, and returns while Redis does not answer its replica;
// Redis answers again well before the run lease ends. The completion,
// sent again (R13), must free the job, so that the next slot's tick, due
// before the run lease would have ended, runs it. Before, the completion
// was sent again only while S's claim window lasted, so not at all: the
// run lease held the job to its end, and the next slot was recorded
// skipped as still running, though no run was (simulator seed 6008014).
func TestProtocolCompletionAfterClaimWindow(t *testing.T) {
	srv := redistest.Start(t)
	const every = 10 * time.Second
	spec := interval.MustCron("*/10 * * * * *").WithoutStartupRun()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	var dead atomic.Bool
	c := srv.Client(t)
	c.AddHook(deadClient{&dead})
	// S can be claimed for 2 s; a run lease outlasts the slot.
	lease := cron.LeaseConfig{DB: lock.NewDB(c), TTL: 2 * time.Second, RunTTL: 12 * time.Second, Backoff: 100 * time.Millisecond}
	S := halfSlotBefore(every)
	ran := make(chan cron.Tick, 4)
	returned := make(chan struct{})
	skipped := make(chan string, 4)
	rt, err := cron.Start([]cron.Job{&leasedJob{testJob: testJob{name: "report", every: spec, process: func(_ context.Context, tk cron.Tick) error {
		ran <- tk
		if tk.Slot.Start.Equal(S) {
			<-returned
		}
		return nil
	}}, lease: lease}}, cron.WithReplica("a"), cron.WithLogger(quiet),
		cron.WithObserver(cron.Observer{RunSkipped: func(tk cron.Tick, reason string, _ error) {
			skipped <- tk.Slot.Start.Format(time.TimeOnly) + " " + reason
		}}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Shutdown(context.Background()) })
	select {
	case tk := <-ran:
		if !tk.Slot.Start.Equal(S) {
			t.Fatalf("ran slot %v, want %v", tk.Slot.Start, S)
		}
	case <-time.After(time.Until(S.Add(time.Second))):
		t.Fatalf("slot %v did not run at its tick", S)
	}

	// Past S's claim window, Redis stops answering a; the run returns,
	// and Redis answers again a second later, 8.5 s before the run lease
	// would end.
	time.Sleep(time.Until(S.Add(2500 * time.Millisecond)))
	dead.Store(true)
	close(returned)
	time.Sleep(time.Second)
	dead.Store(false)

	next := S.Add(every)
	select {
	case tk := <-ran:
		if !tk.Slot.Start.Equal(next) {
			t.Errorf("ran slot %v, want %v", tk.Slot.Start, next)
		}
	case s := <-skipped:
		t.Errorf("skipped %s; want slot %v run, the run of %v having returned %v before its tick",
			s, next.Format(time.TimeOnly), S.Format(time.TimeOnly), every-2500*time.Millisecond)
	case <-time.After(time.Until(next.Add(time.Second))):
		t.Errorf("slot %v neither ran nor was skipped", next.Format(time.TimeOnly))
	}
}

// TestProtocolSkipAfterLostRunLooksAgain: a lone replica's run of slot S
// loses its run lease in a Redis outage, and its completion is still being
// sent again (R13) when S+1's tick comes, so the tick goes in mode skip.
// Its claim, the first command Redis answers after the outage, records the
// lapsed run lost and finds no run holding the job. The replica must look
// at S+1 once its own run has ended (E13) and run it: before, it only
// warned, and with no other replica the slot had neither a run nor a
// recorded skip (simulator seeds 38401, 86016, 86995).
func TestProtocolSkipAfterLostRunLooksAgain(t *testing.T) {
	skipAfterLostRun(t, false)
}

// TestProtocolSkipUnansweredLooksAfterRun is the same, but Redis does not
// answer the claim in mode skip either, only what comes after it. No claim
// recorded the lapsed run lost, so its completion finds it held, and S's
// retry runs (E2). S+1 must still end in an outcome: the tick's look again
// after the error is the look once the replica's own run has ended (E13),
// a tick in mode skip having no other, and it records S+1 skipped, S's run
// having held the job when S+1's tick came (R2, R20). The simulator's
// trace digests found that look dropped in a reshaping of the code (seed
// 81); without it, S+1 had no outcome.
func TestProtocolSkipUnansweredLooksAfterRun(t *testing.T) {
	skipAfterLostRun(t, true)
}

// skipAfterLostRun runs the two tests above: failSkip makes the claim in
// mode skip fail, as the last command of the outage.
func skipAfterLostRun(t *testing.T, failSkip bool) {
	srv := redistest.Start(t)
	const every = 10 * time.Second
	spec := interval.MustCron("*/10 * * * * *").WithoutStartupRun()
	c := srv.Client(t)
	out := skipClaimRevives{failSkip: failSkip}
	c.AddHook(&out)
	ran := make(chan cron.Tick, 4)
	var first atomic.Bool
	job := &leasedJob{testJob: testJob{name: "report", every: spec, process: func(ctx context.Context, tk cron.Tick) error {
		if first.CompareAndSwap(false, true) {
			out.dead.Store(true) // Redis goes away in the middle of the run
			<-ctx.Done()         // the run lease is lost
			return context.Cause(ctx)
		}
		ran <- tk
		return nil
	}}, lease: cron.LeaseConfig{DB: lock.NewDB(c), Attempts: 2, Backoff: 500 * time.Millisecond, RunTTL: time.Second}}
	S := halfSlotBefore(every)
	rt, err := cron.Start([]cron.Job{job}, cron.WithReplica("a"), cron.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Shutdown(context.Background()) })
	if late := time.Since(S); late >= 0 {
		t.Fatalf("Start returned %v after slot %v began: the test's timing failed", late, S)
	}
	next := S.Add(every)
	if failSkip {
		slotHasOutcome(t, srv, spec, next, next.Add(every-time.Second))
		return
	}
	select {
	case tk := <-ran:
		if !tk.Slot.Start.Equal(next) || tk.Attempt != 1 {
			t.Fatalf("ran slot %v, attempt %d (%v); want the first attempt at slot %v", tk.Slot.Start, tk.Attempt, tk.Trigger, next)
		}
	case <-time.After(time.Until(next.Add(every - time.Second))):
		t.Fatalf("slot %v, whose tick came while the lost run's completion was being sent again, did not run (the outage ended at the tick: %v)", next, !out.dead.Load())
	}
}

// slotHasOutcome waits until the history of the job "report" holds the
// Cron slot of spec that starts at start, run or recorded skipped, and
// fails the test if it does not by deadline.
func slotHasOutcome(t *testing.T, srv *redistest.Server, spec interval.Interval, start, deadline time.Time) {
	t.Helper()
	key, _ := spec.Plan(start, start).Slot.Key()
	admin := cron.NewAdmin(lock.NewDB(srv.Client(t)))
	var history []cron.RunRecord
	for time.Now().Before(deadline) {
		st, err := admin.Status(t.Context(), "report")
		if err == nil {
			history = st.History
			for _, r := range history {
				if r.Slot == key && r.Outcome != "" {
					return
				}
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("slot %s has no outcome in the job's history by %v: %+v", key, deadline.Format(time.TimeOnly), history)
}

// skipClaimRevives fails every command once dead is set, until a claim in
// mode skip comes: Redis is back for that claim and everything after it,
// or, with failSkip, for everything after it only.
type skipClaimRevives struct {
	dead     atomic.Bool
	failSkip bool
}

// revives reports whether cmd is a claim in mode skip that Redis answers,
// and brings Redis back if cmd is one.
func (h *skipClaimRevives) revives(cmd redis.Cmder) bool {
	if cmd.Name() != "evalsha" {
		return false
	}
	for _, a := range cmd.Args() {
		if a == "skip" {
			h.dead.Store(false)
			return !h.failSkip
		}
	}
	return false
}

func (h *skipClaimRevives) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *skipClaimRevives) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if h.dead.Load() && !h.revives(cmd) {
			cmd.SetErr(errors.New("dead"))
			return cmd.Err()
		}
		return next(ctx, cmd)
	}
}
func (h *skipClaimRevives) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if h.dead.Load() {
			revived := false
			for _, cmd := range cmds {
				revived = h.revives(cmd) || revived
			}
			if !revived {
				for _, cmd := range cmds {
					cmd.SetErr(errors.New("dead"))
				}
				return errors.New("dead")
			}
		}
		return next(ctx, cmds)
	}
}

// TestProtocolRedisRestartMidRunRetried restarts redis-server empty (E11)
// 0.7 s into the run of a */4 Cron slot S on three replicas that know
// each other, with Attempts 3 and a run lease of 1 s: past the grace at
// which the replicas that do not own S looked at it (E13), found it
// running (L4) and planned a follow-up (E3) when its run lease ends. The
// run's next heartbeat finds its lease gone and cancels it (R11, R14);
// after Redis lost the record mid-run with attempts left, the slot runs
// again and succeeds before the next slot opens. Before, nobody ran S
// again: the running replica's follow-up (R12) and the others' (L4) found
// S none, and an E3 never opens a slot (R4).
func TestProtocolRedisRestartMidRunRetried(t *testing.T) {
	srv := redistest.Start(t)
	const every = 4 * time.Second
	spec := interval.MustCron("*/4 * * * * *").WithoutStartupRun()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	type ran struct {
		by   string
		tick cron.Tick
		err  error // set on the run's end
		end  bool
	}
	runs := make(chan ran, 16)
	S := halfSlotBefore(every)
	for _, name := range []string{"a", "b", "c"} {
		rt, err := cron.Start([]cron.Job{&leasedJob{testJob: testJob{name: "report", every: spec, process: func(ctx context.Context, tk cron.Tick) error {
			runs <- ran{by: name, tick: tk}
			var err error
			select {
			case <-time.After(1500 * time.Millisecond):
			case <-ctx.Done():
				err = context.Cause(ctx)
			}
			runs <- ran{by: name, tick: tk, err: err, end: true}
			return err
		}}, lease: cron.LeaseConfig{DB: lock.NewDB(srv.Client(t)), Attempts: 3, RunTTL: time.Second}}},
			cron.WithReplica(name), cron.WithLogger(quiet))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { rt.Shutdown(context.Background()) })
	}
	if late := time.Since(S.Add(-time.Second)); late >= 0 {
		t.Fatalf("the replicas started %v after %v, a second before slot %v: the test's timing failed", late, S.Add(-time.Second), S)
	}
	var seen []string // the runs after the restart, for a failure
	next := func(what string, until time.Time) ran {
		t.Helper()
		select {
		case r := <-runs:
			if r.end {
				seen = append(seen, fmt.Sprintf("%s ended slot %s's attempt %d (%v): %v", r.by, r.tick.Slot.Start.Format(time.TimeOnly), r.tick.Attempt, r.tick.Trigger, r.err))
			} else {
				seen = append(seen, fmt.Sprintf("%s began slot %s's attempt %d (%v)", r.by, r.tick.Slot.Start.Format(time.TimeOnly), r.tick.Attempt, r.tick.Trigger))
			}
			return r
		case <-time.After(time.Until(until)):
			t.Fatalf("no %s by %v; the runs after the restart: %q", what, until.Format(time.TimeOnly), seen)
			return ran{}
		}
	}
	first := next("run of slot S", S.Add(every/2))
	if !first.tick.Slot.Start.Equal(S) || first.end {
		t.Fatalf("%s's run %+v; the test wants the start of slot %v's run", first.by, first.tick, S)
	}
	seen = nil
	time.Sleep(time.Until(first.tick.Started.Add(700 * time.Millisecond)))
	srv.Restart(t) // E11: every key and script gone
	if d := time.Since(first.tick.Started); d > 1400*time.Millisecond {
		t.Fatalf("Redis was back %v into the run of 1.5 s: the test's timing failed", d)
	}
	var lost, ok []ran
	for len(ok) == 0 {
		r := next("successful run of slot S after the restart", S.Add(every))
		switch {
		case !r.end:
			if !r.tick.Slot.Start.Equal(S) {
				t.Fatalf("%s ran slot %v (attempt %d, %v); want slot %v run again first", r.by, r.tick.Slot.Start, r.tick.Attempt, r.tick.Trigger, S)
			}
		case r.err == nil:
			ok = append(ok, r)
		case errors.Is(r.err, lock.ErrLeaseLost):
			lost = append(lost, r)
		default:
			t.Fatalf("%s's run of slot %v ended with %v", r.by, r.tick.Slot.Start, r.err)
		}
	}
	if len(lost) == 0 || lost[0].tick.Run != first.tick.Run || lost[0].by != first.by {
		t.Errorf("runs cancelled with lock.ErrLeaseLost: %+v; want %s's run of slot %v first", lost, first.by, S)
	}
	if r := ok[0]; !r.tick.Slot.Start.Equal(S) {
		t.Errorf("%s's run of slot %v succeeded; want slot %v's", r.by, r.tick.Slot.Start, S)
	}
	key, _ := spec.Plan(S, S).Slot.Key()
	st := waitStatus(t, lock.NewDB(srv.Client(t)), "report", func(st cron.JobStatus) bool { return st.Running == nil && st.Slot == key })
	if st.SlotState != "done" || st.Last == nil || st.Last.Outcome != "ok" || st.Last.Slot != key {
		t.Errorf("Status after the restart: slot %s %s, last %+v; want slot %s done, its last run ok", st.Slot, st.SlotState, st.Last, key)
	}
}
