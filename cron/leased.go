package cron

import (
	"context"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wakuwaku-go/wakuwaku/cron/internal/record"
	"github.com/wakuwaku-go/wakuwaku/interval"
)

// This file holds the replica side of the record protocol (PROTOCOL.md)
// as one type: leasedJobs, which a runtime with Leased jobs drives. It
// decides what this replica sends to each leased job's record, and when:
// the claim before a run, the completion after it and the events their
// answers plan (leasedrun.go), the looks that no tick starts (retry.go),
// the start's catch-up and announcements (catchup.go), the run-now
// requests and follow notices (requests.go), the replica registry
// (replicas.go), the clock check (skew.go) and the batching clients
// (batch.go). Each job's record keeper is its jobState (record.go), which
// sends what leasedJobs decides. The scheduler starts the runs; leasedJobs
// asks it for one through scheduler, and knows nothing else of it.

// scheduler is what the leased jobs' side asks of the runtime's scheduler.
type scheduler interface {
	// offSchedule starts a run of e that no tick of its schedule started,
	// for the event mode (E2 to E5, E13), and reports whether it did.
	offSchedule(e *entry, mode claimMode, slot interval.Slot, id string) bool
	// nextDue returns when e's next tick is due, if it is queued; the
	// scheduler's lock is held.
	nextDue(e *entry) (time.Time, bool)
}

// leasedJobs is the runtime's Leased jobs and what they do beside their
// runs: their batching clients, run-now listeners, registry beat and clock
// check, announcements and planned looks. It owns every piece of that
// background work (a goroutine it counts in working, a timer it keeps in
// the job's jobState), which Shutdown stops (shutdown) and waits for
// (drained), in the order PROTOCOL.md's "Shutdown" gives.
type leasedJobs struct {
	sched   scheduler
	rep     *reporter
	replica string
	now     func() time.Time

	// mu is the scheduler's lock: Replace changes a job's record keeper
	// (entry.admit) under it, and the timers of the looks and
	// announcements, which a run's end and Replace both plan, are guarded
	// by it too. stopped and stop are the scheduler's: Shutdown was
	// called.
	mu      *sync.Mutex
	stopped *atomic.Bool
	stop    <-chan struct{}

	// rctx is the runtime's context, which ends when Shutdown gave up
	// waiting (or once it is done): no command of the leased jobs starts
	// after it ended, a run's completion included. lctx, its child, is the
	// context of the leased jobs' own calls (run-now listeners,
	// announcements), which end as Shutdown begins: endListens cancels it.
	rctx       context.Context
	lctx       context.Context
	endListens context.CancelFunc

	// The leased jobs by lease name, and the Pub/Sub subscriptions on
	// which their run-now requests come, one per client, whose listeners
	// Shutdown stops and waits for. Guarded by mu.
	byLease      map[string]*entry
	subs         []io.Closer
	listening    map[any]bool // the clients with a listener
	watchingSkew bool
	working      int           // the goroutines of the background work (see spawn)
	workDone     chan struct{} // closed when they ended after Shutdown

	batchMu sync.Mutex
	batches map[any]*record.Batcher // the batching clients, by client (guarded by batchMu: Start holds mu)
}

// newLeasedJobs returns the leased jobs' side of a runtime whose
// scheduler is sched, and whose lock, stop flag and channel are mu,
// stopped and stop. Its commands end when rctx does, the calls of its
// listeners and announcements when lctx does.
func newLeasedJobs(sched scheduler, rep *reporter, replica string, now func() time.Time,
	mu *sync.Mutex, stopped *atomic.Bool, stop <-chan struct{}, rctx, lctx context.Context, endListens context.CancelFunc) *leasedJobs {
	return &leasedJobs{
		sched: sched, rep: rep, replica: replica, now: now,
		mu: mu, stopped: stopped, stop: stop, rctx: rctx, lctx: lctx, endListens: endListens,
		byLease:   make(map[string]*entry),
		listening: make(map[any]bool),
		workDone:  make(chan struct{}),
	}
}

// shutdown is called by Shutdown, under mu, once stopped is set. It
// stops the leased jobs' side in this order:
//
//  1. the calls in flight of the listeners and announcements end, as lctx
//     does;
//  2. no planned look or announcement starts (each job's timers stop);
//  3. the run-now subscriptions close, which ends their listeners;
//  4. the registry beat and the clock check end as the scheduler's stop
//     channel closes, which Shutdown did before: the beat takes this
//     replica out of its registries on its way out.
//
// Shutdown then waits for those goroutines (drained): the last to
// end closes workDone, or shutdown does at once if none runs.
func (l *leasedJobs) shutdown() {
	l.endListens()
	for _, e := range l.byLease {
		e.admit.state.stopRetry()
		e.admit.state.stopHello()
	}
	for _, c := range l.subs {
		_ = c.Close()
	}
	l.subs = nil
	if l.working == 0 {
		close(l.workDone)
	}
}

// spawn runs f in a goroutine of the background work, which Shutdown
// waits for, and reports whether it did: not once Shutdown was called.
// l.mu is held.
func (l *leasedJobs) spawn(f func()) bool {
	if l.stopped.Load() {
		return false
	}
	l.working++
	go func() {
		defer l.workEnded()
		f()
	}()
	return true
}

// workEnded counts the end of one of the goroutines of the background
// work (a listener, a start's catch-up and announcements, an announcement
// again, the registry beat, the clock check), which began under l.mu
// while the runtime was not stopped (spawn, or Start's), and closes
// workDone after the last once Shutdown was called. Deferred by each,
// it lets a panic go on at once: the goroutine may have panicked holding
// l.mu, and waiting for it would hang the runtime instead of crashing.
func (l *leasedJobs) workEnded() {
	if p := recover(); p != nil {
		panic(p)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.working--; l.working == 0 && l.stopped.Load() {
		close(l.workDone)
	}
}

// drained waits for the goroutines of the background work to end after
// Shutdown, until ctx ends, and reports whether they did: those that end
// as ctx does ended in time.
func (l *leasedJobs) drained(ctx context.Context) bool {
	select {
	case <-l.workDone:
		return true
	case <-ctx.Done():
		select {
		case <-l.workDone:
			return true
		default:
			return false
		}
	}
}

// checkLease refuses e's lease if another job than old (nil for none)
// leases it: one record can't keep two jobs' slots, one of them would
// never run, and a run-now would reach one. l.mu is held.
func (l *leasedJobs) checkLease(e, old *entry) error {
	if e.admit == nil || e.admit.state == nil {
		return nil
	}
	if other := l.byLease[e.admit.lease]; other != nil && other != old {
		return fmt.Errorf("%w: jobs %q and %q both lease %q", ErrInvalidJob, other.name, e.name, e.admit.lease)
	}
	return nil
}

// helloTimeout bounds the start's announcement of a job to Redis.
const helloTimeout = 5 * time.Second

// stopHello stops the timer of this replica's next announcement of the
// job, if one waits. Runtime.mu is held.
func (s *jobState) stopHello() {
	if s.helloTimer != nil {
		s.helloTimer.Stop()
		s.helloTimer = nil
	}
	s.helloing.Store(false)
}

// stopRetry stops the timer of this replica's next look at the job's
// slot, if one is planned. Runtime.mu is held.
func (s *jobState) stopRetry() {
	if s.retry != nil {
		s.retry.Stop()
		s.retry = nil
	}
}
