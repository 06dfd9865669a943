package cron

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wakuwaku-go/wakuwaku/interval"
)

// Runtime runs jobs on their schedules. [Start] makes one; its jobs run
// until [Runtime.Shutdown], which every Runtime needs to stop its
// goroutines. Jobs can be added, removed and replaced while it runs
// ([Runtime.Add], [Runtime.Remove], [Runtime.Replace]). Its methods are
// safe for concurrent use.
type Runtime struct {
	rep        reporter
	maxOverlap int
	replica    string
	now        func() time.Time

	// ctx is the runs' context, which Shutdown cancels when it gives up
	// waiting. The runtime keeps it, as no other value does, so that a
	// job added after Start lives as the others do.
	ctx      context.Context
	cancel   context.CancelCauseFunc // cancels ctx
	wake     chan struct{}           // the queue's head changed; capacity 1
	stop     chan struct{}           // closed by the first Shutdown
	loopDone chan struct{}           // closed when the scheduler returned

	// batch is where dispatch collects the ticks it starts or skips, at
	// most dispatchChunk at a time. Only the scheduler (and Start, before
	// the scheduler exists) touches it.
	batch []*runArgs

	// pool runs what the scheduler hands out (see workers.go).
	pool *pool

	mu         sync.Mutex
	queue      queue                         // jobs waiting for their next tick, by due time
	initial    []entry                       // Start's jobs, until byName is made
	byName     map[string]*entry             // every job, by name, once a change needs it (see names)
	policies   map[interval.Interval]*policy // the policies of the jobs, each shared by its jobs
	admissions map[string]Admission          // WithAdmission's, by job name, for jobs added later too
	removing   map[*entry]chan struct{}      // closed when a removed job's last run ended
	offRuns    map[*entry]int                // runs of E2 to E5 in progress, by job

	// A run that finished needs no lock unless its job is queued again
	// from its end (AtLeast, AfterFinish) or was removed: with thousands
	// of runs at once, the lock was where they queued up. stopped only
	// changes and inflight only grows under mu; both are read without it.
	stopped  atomic.Bool   // Shutdown was called
	inflight atomic.Int64  // runs started and not yet finished
	idle     chan struct{} // closed (once) when stopped and inflight is 0
	idleOnce sync.Once
	stopLog  sync.Once // the record that the runtime stopped

	// leased is the replica side of the leased jobs' records (see
	// leased.go).
	leased *leasedJobs
}

// newEntry checks the job j, which errors name by who (called only then),
// and fills e with it: its job, name and admission, with its lease's
// record if it is [Leased]. It returns the job's interval, which register
// gives e a shared policy of. It sends nothing to Redis.
func (r *Runtime) newEntry(e *entry, who func() string, j Job) (interval.Interval, error) {
	name, every, err := describe(who, j)
	if err != nil {
		return every, err
	}
	e.job, e.name, e.pos = j, name, -1
	if admit := r.admissions[name]; admit != nil {
		e.admit = &admission{check: admit}
	}
	if d, ok := j.(Deadlined); ok {
		var deadline time.Duration
		if err := guard(jobCalled(name), "RunDeadline", func() { deadline = d.RunDeadline() }); err != nil {
			return every, err
		}
		if deadline < 0 {
			return every, fmt.Errorf("%w: job %q: its run deadline %v is negative", ErrInvalidJob, name, deadline)
		}
		if deadline > 0 {
			if e.admit == nil {
				e.admit = new(admission)
			}
			e.admit.deadline = deadline
		}
	}
	if l, ok := j.(Leased); ok {
		// The claim comes after a caller's own admission, so that a run
		// the caller refuses doesn't take the slot.
		lease, err := leaseOf(name, l)
		if err != nil {
			return every, err
		}
		if lease.Name, err = leaseName(name, l, lease); err != nil {
			return every, err
		}
		if err := every.CheckLease(lease.TTL); err != nil {
			return every, fmt.Errorf("%w: job %q: %w", ErrInvalidJob, name, err)
		}
		state, err := newJobState(every, lease, r.replica, r.now)
		if err != nil {
			return every, err
		}
		state.due = func(start time.Time) time.Time { return every.Due(name, start) }
		state.Batched, state.Completing = r.leased.batchFor(state)
		if e.admit == nil {
			e.admit = new(admission)
		}
		e.admit.state = state
		e.admit.lease = lease.Name
	}
	return every, nil
}

// register makes e, which newEntry filled, one of the runtime's jobs, with
// a policy of every shared with the jobs that have it; it refuses a lease
// name that another job has, and, if added (by Add, not Start, which
// checks its jobs' names itself), a name. It does not queue e. r.mu is
// held.
func (r *Runtime) register(e *entry, every interval.Interval, added bool) error {
	if added {
		if _, dup := r.names()[e.name]; dup {
			return fmt.Errorf("%w: two jobs are named %q", ErrInvalidJob, e.name)
		}
	}
	if err := r.leased.checkLease(e, nil); err != nil {
		return err
	}
	e.every = r.policyOf(every)
	if added {
		r.byName[e.name] = e
	}
	if e.admit != nil && e.admit.state != nil {
		r.leased.byLease[e.admit.lease] = e
	}
	return nil
}

// names returns the runtime's jobs by name, making the map at its first
// use: a runtime whose jobs never change doesn't pay for it. r.mu is held.
func (r *Runtime) names() map[string]*entry {
	if r.byName == nil {
		r.byName = make(map[string]*entry, len(r.initial))
		for i := range r.initial {
			r.byName[r.initial[i].name] = &r.initial[i]
		}
		r.initial = nil
	}
	return r.byName
}

// policyOf returns the shared policy of every, counting one job more on
// it. r.mu is held.
func (r *Runtime) policyOf(every interval.Interval) *policy {
	p := r.policies[every]
	if p == nil {
		p = &policy{Interval: every}
		r.policies[every] = p
	}
	p.jobs++
	return p
}

// release counts one job less on p, and forgets p when no job has it.
// r.mu is held.
func (r *Runtime) release(p *policy) {
	if p.jobs--; p.jobs == 0 {
		delete(r.policies, p.Interval)
	}
}

// requeue queues e for a tick at due (Unix nanoseconds), or moves its tick
// there if it is queued, and reports whether it is due first. r.mu is
// held.
func (r *Runtime) requeue(e *entry, due int64) bool {
	if e.pos >= 0 {
		return r.queue.fix(int(e.pos), item{due, e}) == 0
	}
	return r.queue.push(due, e) == 0
}

// nextDue returns when e's next tick is due, if it is queued. r.mu is
// held.
func (r *Runtime) nextDue(e *entry) (time.Time, bool) {
	if e.pos < 0 {
		return time.Time{}, false
	}
	return time.Unix(0, r.queue[e.pos].due), true
}

// wakeUp wakes the scheduler, which sleeps until a later tick, for one
// queued first.
func (r *Runtime) wakeUp() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// finished records the end of a run of e that started at start and ended at
// end (at start, for a run its admission skipped), and queues e's next tick
// if its plan said that it depends on the run's end.
func (r *Runtime) finished(e *entry, start, end time.Time, atFinish bool) {
	if atFinish {
		r.requeueAfter(e, start, end)
	} else if e.state.Add(-1)&stateRemoved != 0 {
		r.mu.Lock()
		r.runEnded(e)
		r.mu.Unlock()
	}
	// Shutdown sets stopped before it reads inflight, and this lowers
	// inflight before it reads stopped, so one of the two sees the last
	// run end; the Once keeps both from closing idle.
	if r.inflight.Add(-1) == 0 && r.stopped.Load() {
		r.idleOnce.Do(func() { close(r.idle) })
	}
}

// requeueAfter queues e's next tick after a run that started at start and
// ended at end, unless the runtime is stopping, the job was removed, or
// Replace queued it meanwhile.
func (r *Runtime) requeueAfter(e *entry, start, end time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e.state.Add(-1)&stateRemoved != 0 {
		r.runEnded(e)
		return
	}
	if r.stopped.Load() || e.pos >= 0 {
		return
	}
	next, ok := e.every.Next(start, end)
	if !ok {
		return
	}
	if r.requeue(e, next.UnixNano()) {
		r.wakeUp()
	}
}

// runEnded closes the channel Remove waits on once the last run of e,
// which Remove took out, ended. r.mu is held.
func (r *Runtime) runEnded(e *entry) {
	if e.runs() > 0 || r.offRuns[e] > 0 {
		return
	}
	if done := r.removing[e]; done != nil {
		close(done)
		delete(r.removing, e)
	}
}
