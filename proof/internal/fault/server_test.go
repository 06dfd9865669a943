package fault_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"runtime/pprof"
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
	"github.com/wakuwaku-go/wakuwaku/proof/internal/fault"
)

// reportJob is a cron job that runs once per interval across replicas the
// way the lock package's documentation shows: it takes a lock whose lease
// covers most of the interval and never releases it.
type reportJob struct {
	db    lock.DB
	l     lock.Lock[string]
	every time.Duration

	ran, busy, failed atomic.Int64
	lastRan           atomic.Int64 // on the suite's clock
}

func (j *reportJob) Name() string                { return "report" }
func (j *reportJob) Interval() interval.Interval { return interval.AtLeast(j.every) }

func (j *reportJob) Process(ctx context.Context, tick cron.Tick) error {
	tok, err := j.l.TryLock(ctx, j.db, "hourly")
	switch {
	case err != nil:
		j.failed.Add(1)
		return err
	case tok == nil:
		j.busy.Add(1)
		return nil
	}
	j.ran.Add(1)
	j.lastRan.Store(fault.Now())
	return nil
}

// holderLoop takes a lock and runs fenced work under WhileHeld for five TTLs,
// again and again until ctx ends, and counts how each attempt ended.
type holderLoop struct {
	completed, lost, failed atomic.Int64
	lastCompleted           atomic.Int64
}

func (h *holderLoop) run(ctx context.Context, db lock.DB, l lock.Lock[string], name string, res *fault.Resource, rec *fault.Recorder) {
	bg := context.WithoutCancel(ctx)
	for ctx.Err() == nil {
		sent := fault.Now()
		tok, err := l.TryLock(bg, db, name)
		if err != nil || tok == nil {
			if err != nil {
				h.failed.Add(1)
			}
			time.Sleep(10 * time.Millisecond)
			continue
		}
		w := &fencedWork{res: res, lease: tok, key: l.Key(name), hold: rec.NewHold()}
		w.enter(sent, l.TTL())
		_, err = lock.WhileHeld(bg, tok, func(ctx context.Context) (int, error) { return w.run(ctx, 5*l.TTL()) })
		switch {
		case errors.Is(err, lock.ErrLeaseLost):
			h.lost.Add(1)
		case err != nil:
			h.failed.Add(1)
		default:
			h.completed.Add(1)
			h.lastCompleted.Store(fault.Now())
		}
		_, _ = tok.Release(bg)
	}
}

// settleGoroutines waits until no more goroutines run than before, and fails
// the test with their stacks if that takes over 10 seconds.
func settleGoroutines(t *testing.T, before int) int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		n := runtime.NumGoroutine()
		if n <= before {
			return n
		}
		if time.Now().After(deadline) {
			var b strings.Builder
			_ = pprof.Lookup("goroutine").WriteTo(&b, 1)
			t.Errorf("%d goroutines run after the scenario, %d before: a leak\n%s", n, before, b.String())
			return n
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestServerFaults pauses the redis-server (SIGSTOP) for twice the TTL while
// contenders in this process and in a child, holders under WhileHeld and two
// cron runtimes use it; later it kills the server and restarts it empty.
// Pass: errors reach the callers during both faults, nothing panics, every
// contender, holder and cron job works again once the server is back, no
// goroutine is left behind, and no two holders overlap (the server stays
// down for longer than a TTL, so no lease taken before the kill is live when
// it comes back empty). The history up to the kill is also checked by
// porcupine, with the operations that timed out as unknown outcomes.
func TestServerFaults(t *testing.T) {
	srv := redistest.Start(t)
	coord := fault.NewCoordinator(t)
	before := runtime.NumGoroutine()

	const ttl = 300 * time.Millisecond
	cn := conn{Addr: srv.Addr(), Timeout: 150 * time.Millisecond, MaxRetries: 1}
	ld := load{
		Namespace: "server",
		TTL:       ttl,
		Names:     []string{"a", "b", "c"},
		Backoff:   10 * time.Millisecond,
		MaxSteps:  3,
		DropShare: 0.1,
	}
	child := startChildren(t, coord, func(int) contendArgs { return contendArgs{Conn: cn, Load: ld, Goroutines: 8} }, 1)[0]

	var clients []*redis.Client
	newDB := func() lock.DB {
		c := cn.client()
		clients = append(clients, c)
		return lock.NewDB(c)
	}
	ctx, stop := context.WithCancel(t.Context())
	rec := fault.NewRecorder(0)
	contenders := runLocal(ctx, newDB(), rec, coord.Resource, ld, 1, 8)
	holders := make([]*holderLoop, 2)
	var hw sync.WaitGroup
	hl := lock.New[string]("server-holder", ttl)
	for i := range holders {
		holders[i] = &holderLoop{}
		db := newDB()
		hw.Go(func() { holders[i].run(ctx, db, hl, fmt.Sprint("h", i), coord.Resource, rec) })
	}
	jobs := make([]*reportJob, 2)
	runtimes := make([]*cron.Runtime, 2)
	var panics atomic.Int64
	for i := range jobs {
		jobs[i] = &reportJob{db: newDB(), l: lock.New[string]("server-cron", 90*time.Millisecond), every: 100 * time.Millisecond}
		rt, err := cron.Start([]cron.Job{jobs[i]}, cron.WithObserver(cron.Observer{
			RunFinished: func(_ cron.Tick, err error, _ time.Duration) {
				if _, ok := errors.AsType[*cron.PanicError](err); ok {
					panics.Add(1)
				}
			},
		}))
		if err != nil {
			t.Fatalf("cron.Start: %v", err)
		}
		runtimes[i] = rt
	}

	cycles := fault.Pick(1, 5)
	// The server stays down longer than a TTL, so that every lease taken
	// before the kill has ended when it comes back empty, and longer than
	// a caller's dial and its retry take to fail (0.4 to 0.65 s with these
	// options), so that errors reach the callers: a shorter outage is
	// hidden by the retry whenever the server is back in time.
	down := 2*ttl + time.Second
	type window struct{ from, to int64 }
	var pauses, downs []window
	var killAt, restartAt int64
	time.Sleep(time.Second)
	for range cycles {
		from := fault.Now()
		srv.Pause(t)
		time.Sleep(2 * ttl)
		srv.Resume(t)
		pauses = append(pauses, window{from, fault.Now() + int64(cn.Timeout)})
		time.Sleep(time.Second)
		if killAt == 0 {
			killAt = fault.Now()
		}
		from = fault.Now()
		srv.Kill(t)
		time.Sleep(down)
		srv.Restart(t)
		restartAt = fault.Now()
		downs = append(downs, window{from, restartAt})
		time.Sleep(2 * time.Second)
	}
	// Every holder and the cron job work again once the server is back:
	// wait until they have, a minute at most, for the checks below to
	// judge. A holder's work lasts 5 TTLs under WhileHeld, and on a busy
	// machine, whose heartbeats come late, more than the 2 s above went
	// by before one kept its lease that long (seen: the last work a
	// holder completed was before the restart).
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		back := max(jobs[0].lastRan.Load(), jobs[1].lastRan.Load()) >= restartAt
		for _, h := range holders {
			back = back && h.lastCompleted.Load() >= restartAt
		}
		if back {
			break
		}
	}
	stop()
	contenders.Wait()
	hw.Wait()
	for _, rt := range runtimes {
		if err := rt.Shutdown(t.Context()); err != nil {
			t.Errorf("cron Shutdown: %v", err)
		}
	}
	child.Stop(t)
	for _, c := range clients {
		c.Close()
	}
	coord.History.Add(rec.Take()...)
	after := settleGoroutines(t, before)

	// Errors reached the callers during each fault, and none once the
	// server had been back for a second.
	ops := coord.History.Ops()
	in := func(w window, o fault.Op) bool { return o.Call >= w.from && o.Call <= w.to }
	var pauseErrs, downErrs, lateErrs int
	recovered := map[int32]bool{}
	quiet := restartAt + int64(time.Second)
	for _, o := range ops {
		switch {
		case o.Err != "" && o.Call >= quiet:
			lateErrs++
			if lateErrs <= 5 {
				t.Errorf("error after the server had been back for a second: %v", o)
			}
		case o.Err == "" && o.Call >= restartAt:
			recovered[o.Client] = true
		}
		for _, w := range pauses {
			if o.Err != "" && in(w, o) {
				pauseErrs++
			}
		}
		for _, w := range downs {
			if o.Err != "" && in(w, o) {
				downErrs++
			}
		}
	}
	if pauseErrs == 0 || downErrs == 0 {
		t.Errorf("errors reaching callers: %d while the server was paused, %d while it was down; want some in both", pauseErrs, downErrs)
	}
	if len(recovered) < 8+8 {
		t.Errorf("%d of 16 contenders had a successful operation after the restart", len(recovered))
	}
	var lostLeases int64
	for i, h := range holders {
		lostLeases += h.lost.Load()
		if h.lost.Load()+h.failed.Load() == 0 || h.lastCompleted.Load() < restartAt {
			t.Errorf("holder %d: %d leases lost, %d acquires failed, last completed work at %d (restart at %d): want failures during the faults and completed work after",
				i, h.lost.Load(), h.failed.Load(), h.lastCompleted.Load(), restartAt)
		}
	}
	if lostLeases == 0 {
		t.Error("no holder's work was cancelled by a lost lease during the faults")
	}
	for i, j := range jobs {
		if j.failed.Load() == 0 {
			t.Errorf("cron runtime %d: no run failed during the faults", i)
		}
	}
	if last := max(jobs[0].lastRan.Load(), jobs[1].lastRan.Load()); last < restartAt {
		t.Errorf("the cron job never took its lease after the restart")
	}
	if n := panics.Load(); n != 0 {
		t.Errorf("%d cron runs panicked", n)
	}
	n := overlaps(t, coord.History, ttl)

	// Porcupine on the history up to the kill: an operation that had not
	// returned by then is an unknown outcome.
	pre := &fault.History{}
	for _, o := range ops {
		if o.Call >= killAt {
			continue
		}
		if o.Return >= killAt && o.Err == "" {
			o.Err = "returned after the kill"
		}
		pre.Add(o)
	}
	ta := coord.History.Tally()
	res := coord.Resource.Figures()
	var ran, busy, failed int64
	for _, j := range jobs {
		ran, busy, failed = ran+j.ran.Load(), busy+j.busy.Load(), failed+j.failed.Load()
	}
	var lost, completed int64
	for _, h := range holders {
		lost, completed = lost+h.lost.Load(), completed+h.completed.Load()
	}
	fault.Publish(t, fault.Figures{
		Scenario:       "redis-server paused, killed, restarted",
		Seconds:        float64(fault.Now()-ops[0].Call) / 1e9,
		Ops:            ta.Ops,
		Acquired:       ta.Acquired,
		Errors:         ta.Errors,
		Faults:         fmt.Sprintf("%d SIGSTOP of redis-server for 2x TTL (%v), %d SIGKILL + restart empty after %v down", cycles, ttl, cycles, down),
		Overlaps:       n,
		WritesAccepted: res.Accepted,
		StaleAccepted:  res.StaleAccepted,
		StaleRefused:   res.StaleRefused,
		EntersLate:     res.EntersLate,
		Linearizable:   verdict(t, pre, ttl, ld.Kind) + " (up to the first kill)",
		Notes: []string{
			fmt.Sprintf("errors: %d while paused, %d while down, %d once back for 1 s", pauseErrs, downErrs, lateErrs),
			fmt.Sprintf("WhileHeld: %d completed, %d leases lost; cron: %d runs took the lease, %d found it taken, %d failed, %d panicked", completed, lost, ran, busy, failed, panics.Load()),
			fmt.Sprintf("goroutines: %d before, %d after", before, after),
			stale(t, res),
		},
	})
}
