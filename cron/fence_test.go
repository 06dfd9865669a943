package cron_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wakuwaku-go/wakuwaku/cron"
	"github.com/wakuwaku-go/wakuwaku/cron/internal/record"
	"github.com/wakuwaku-go/wakuwaku/internal/redistest"
	"github.com/wakuwaku-go/wakuwaku/interval"
	"github.com/wakuwaku-go/wakuwaku/lock"
)

// fencedStore is the resource a fenced job writes: it accepts a write only
// with a fence above the highest it accepted, as a SQL UPDATE … WHERE
// fence < $1 does.
type fencedStore struct {
	mu       sync.Mutex
	high     uint64
	accepted []uint64
	refused  []uint64
}

func (s *fencedStore) write(fence uint64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if fence <= s.high {
		s.refused = append(s.refused, fence)
		return false
	}
	s.high = fence
	s.accepted = append(s.accepted, fence)
	return true
}

// freezer holds every command of a client while frozen, as a replica
// stalled by a long GC pause or a frozen VM sends nothing.
type freezer struct {
	mu   sync.Mutex
	thaw chan struct{} // nil when not frozen
}

func (f *freezer) freeze() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.thaw = make(chan struct{})
}

func (f *freezer) unfreeze() {
	f.mu.Lock()
	defer f.mu.Unlock()
	close(f.thaw)
	f.thaw = nil
}

func (f *freezer) wait(ctx context.Context) {
	f.mu.Lock()
	thaw := f.thaw
	f.mu.Unlock()
	if thaw != nil {
		select {
		case <-thaw:
		case <-ctx.Done():
		}
	}
}

func (f *freezer) DialHook(next redis.DialHook) redis.DialHook { return next }
func (f *freezer) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		f.wait(ctx)
		return next(ctx, cmd)
	}
}
func (f *freezer) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		f.wait(ctx)
		return next(ctx, cmds)
	}
}

// fencedRun is one run as the job saw it.
type fencedRun struct {
	replica     string
	fence       uint64
	start, end  time.Time
	stalled, ok bool // ok: its write was accepted
	attempt     int
	trigger     cron.Trigger
}

// fencedRuns is what the fenced jobs of a test share: the store they
// write, the runs as they saw them, and the one run that stalls.
type fencedRuns struct {
	store fencedStore
	mu    sync.Mutex
	runs  []fencedRun
	stall chan struct{}
}

func newFencedRuns() *fencedRuns {
	f := &fencedRuns{stall: make(chan struct{}, 1)}
	f.stall <- struct{}{} // one run stalls
	return f
}

// job is the code of replica's job: a run writes the store with its fence
// as it ends; the run that stalls freezes the replica's client (its
// heartbeats with it) for stallFor and goes on after it lost its lease, its
// code ignoring its context, as code blocked in a call does.
func (f *fencedRuns) job(replica string, frozen *freezer, stallFor time.Duration) func(context.Context, cron.Tick) error {
	return func(ctx context.Context, tk cron.Tick) error {
		r := fencedRun{replica: replica, fence: tk.Fence, start: time.Now(), attempt: tk.Attempt, trigger: tk.Trigger}
		select {
		case <-f.stall:
			r.stalled = true
			frozen.freeze()
			time.Sleep(stallFor)
			frozen.unfreeze()
		default:
			time.Sleep(2 * time.Millisecond)
		}
		r.ok = f.store.write(tk.Fence)
		r.end = time.Now()
		f.mu.Lock()
		f.runs = append(f.runs, r)
		f.mu.Unlock()
		return nil
	}
}

// TestFencesIncrease runs a leased job on three replicas of a real
// redis-server, a few hundred short runs that the replicas take in turn,
// one of which stalls past its run lease and writes after its slot was run
// again; then shuts every replica down, deletes the record (as its expiry
// would) and starts them again. Every run's Tick.Fence is above the fence
// of every run that started before it, the stalled run's late write is
// refused by the fenced store, and the runs after the record's loss keep
// the order.
func TestFencesIncrease(t *testing.T) {
	srv := redistest.Start(t)
	f := newFencedRuns()
	store := &f.store
	mu := &f.mu
	const runTTL = 300 * time.Millisecond
	start := func(phase string) []*cron.Runtime {
		var rts []*cron.Runtime
		for _, name := range []string{"r1", "r2", "r3"} {
			c := srv.Client(t)
			frozen := &freezer{}
			c.AddHook(frozen)
			job := cron.Func("fenced", interval.AtLeast(20*time.Millisecond), f.job(name, frozen, 3*runTTL),
				cron.WithLease(cron.LeaseConfig{DB: lock.NewDB(c), RunTTL: runTTL}))
			rt, err := cron.Start([]cron.Job{job}, cron.WithReplica(name+"-"+phase))
			if err != nil {
				t.Fatal(err)
			}
			rts = append(rts, rt)
		}
		return rts
	}
	wait := func(n int) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for {
			mu.Lock()
			got := len(f.runs)
			mu.Unlock()
			if got >= n {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d runs within 60s, want %d", got, n)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	stop := func(rts []*cron.Runtime) {
		for _, rt := range rts {
			if err := rt.Shutdown(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
	}
	rts := start("a")
	wait(250)
	stop(rts)
	mu.Lock()
	before := len(f.runs)
	mu.Unlock()
	if err := srv.Client(t).Del(t.Context(), record.Key("fenced")).Err(); err != nil {
		t.Fatal(err)
	}
	rts = start("b")
	wait(before + 50)
	stop(rts)

	mu.Lock()
	defer mu.Unlock()
	runs := f.runs
	slices.SortFunc(runs, func(a, b fencedRun) int { return a.start.Compare(b.start) })
	replicas := map[string]bool{}
	var stalled *fencedRun
	for i, r := range runs {
		replicas[r.replica] = true
		if r.fence == 0 {
			t.Fatalf("run %d of %s has fence 0", i, r.replica)
		}
		if i > 0 && r.fence <= runs[i-1].fence {
			t.Errorf("run %d (%s, started %s) has fence %d, not above the run before it (%s, started %s): %d",
				i, r.replica, r.start.Format(time.StampMicro), r.fence, runs[i-1].replica, runs[i-1].start.Format(time.StampMicro), runs[i-1].fence)
		}
		if r.stalled {
			stalled = &runs[i]
		}
	}
	if len(replicas) < 2 {
		t.Errorf("runs on %v, want the replicas to take turns", replicas)
	}
	if stalled == nil {
		t.Fatal("no run stalled: the test tested nothing")
	}
	overtaken := 0
	for _, r := range runs {
		if r.start.After(stalled.start) && r.start.Before(stalled.end) {
			overtaken++
		}
	}
	if overtaken == 0 {
		t.Fatalf("no run started while the stalled one went on (%s to %s): the test tested nothing",
			stalled.start.Format(time.StampMicro), stalled.end.Format(time.StampMicro))
	}
	if stalled.ok {
		t.Errorf("the stalled run's write (fence %d) was accepted after %d later runs wrote", stalled.fence, overtaken)
	}
	t.Logf("%d runs on %d replicas, %d after the record was deleted; the stalled run was overtaken by %d runs and its write refused; %d writes refused in all",
		len(runs), len(replicas), len(runs)-before, overtaken, len(store.refused))
	if len(store.refused) != 1 {
		t.Errorf("%d writes refused (%v), want 1: the stalled run's", len(store.refused), store.refused)
	}
}

// TestFenceOfRetry freezes the replica whose run of a Cron slot is going
// on, past its run lease, on a real redis-server: another replica runs the
// slot again (Attempts 3), with a higher fence, and the frozen run's write,
// which comes after the retry's, is refused.
func TestFenceOfRetry(t *testing.T) {
	srv := redistest.Start(t)
	f := newFencedRuns()
	const runTTL = 300 * time.Millisecond
	var rts []*cron.Runtime
	for _, name := range []string{"r1", "r2", "r3"} {
		c := srv.Client(t)
		frozen := &freezer{}
		c.AddHook(frozen)
		job := cron.Func("fenced-retry", interval.MustCron("*/5 * * * * *"), f.job(name, frozen, 5*runTTL),
			cron.WithLease(cron.LeaseConfig{DB: lock.NewDB(c), RunTTL: runTTL, Attempts: 3, Backoff: 50 * time.Millisecond}))
		rt, err := cron.Start([]cron.Job{job}, cron.WithReplica(name))
		if err != nil {
			t.Fatal(err)
		}
		rts = append(rts, rt)
	}
	retried := func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		for _, r := range f.runs {
			if r.attempt > 1 {
				return true
			}
		}
		return false
	}
	for deadline := time.Now().Add(20 * time.Second); !retried(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no retry within 20s")
		}
	}
	time.Sleep(5 * runTTL) // the frozen run writes after the retry
	for _, rt := range rts {
		if err := rt.Shutdown(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	runs := f.runs
	var stalled, retry *fencedRun
	for i := range runs {
		switch r := &runs[i]; {
		case r.stalled:
			stalled = r
		case r.attempt > 1 && retry == nil:
			retry = r
		}
	}
	if stalled == nil || retry == nil {
		t.Fatalf("runs %+v: want a stalled run and a retry", runs)
	}
	if retry.replica == stalled.replica || retry.fence <= stalled.fence || !retry.ok {
		t.Errorf("retry %+v of the stalled run %+v: want it on another replica, with a higher fence, its write taken", *retry, *stalled)
	}
	if !stalled.end.After(retry.end) || stalled.ok {
		t.Errorf("the stalled run %+v, its retry %+v: want the stalled run to write after the retry, refused", *stalled, *retry)
	}
}
