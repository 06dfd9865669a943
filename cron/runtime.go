package cron

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wakuwaku-go/wakuwaku/interval"
)

// ErrInvalidJob is the error [Start] returns, wrapped with the job's index
// or name, for a job it cannot run: a nil job, a job whose Interval is the
// zero interval.Interval, a job with an empty name, two jobs with one
// name, two [Leased] jobs with one lease name, or a Leased job whose lease
// has no name or can't work.
var ErrInvalidJob = errors.New("cron: invalid job")

// Runtime runs jobs on their schedules. [Start] makes one; its jobs run
// until [Runtime.Shutdown], which every Runtime needs to stop its
// goroutines. Its methods are safe for concurrent use.
type Runtime struct {
	log        *slog.Logger
	observer   Observer
	maxOverlap int
	now        func() time.Time

	cancel   context.CancelCauseFunc // cancels the runs' context
	wake     chan struct{}           // the queue's head changed; capacity 1
	stop     chan struct{}           // closed by the first Shutdown
	loopDone chan struct{}           // closed when the scheduler returned

	// batch is where dispatch collects the ticks it starts or skips, at
	// most dispatchChunk at a time. Only the scheduler (and Start, before
	// the scheduler exists) touches it.
	batch []*runArgs

	// work is the FIFO of runs waiting for a worker (see workers.go), and
	// workers counts the goroutines that take them.
	work    chan *chunk
	workers sync.WaitGroup

	mu    sync.Mutex
	queue queue // jobs waiting for their next tick, by due time

	// A run that finished needs no lock unless its job is queued again
	// from its end (AtLeast, AfterFinish): with thousands of runs at once,
	// the lock was where they queued up. stopped only changes and inflight
	// only grows under mu; both are read without it.
	stopped  atomic.Bool   // Shutdown was called
	inflight atomic.Int64  // runs started and not yet finished
	idle     chan struct{} // closed (once) when stopped and inflight is 0
	idleOnce sync.Once
	stopLog  sync.Once // the record that the runtime stopped

	// The leased jobs, and the Pub/Sub subscriptions on which their
	// run-now requests come (guarded by mu), whose listeners Shutdown
	// stops and waits for.
	leased        []*entry
	subs          []io.Closer
	listeners     sync.WaitGroup
	listenersDone chan struct{}      // closed when the listeners ended after Shutdown
	endListens    context.CancelFunc // ends the listeners' dials and calls
}

// entry is a job and its scheduling state. It is what an idle job costs,
// with its 16-byte item in the queue, so it is kept small: jobs that share
// a policy share one copy of it, the due time lives in the queue alone, and
// the count of active runs is 32 bits.
type entry struct {
	job   Job
	name  string
	every *policy    // never nil; shared
	admit *admission // nil for a job that every tick runs

	// Guarded by Runtime.mu, but for active, which a run's end lowers
	// without it.
	active atomic.Int32 // runs in progress
	quick  atomic.Bool  // its last run took less than stragglerAfter
	ticks  uint64       // ticks so far, skipped ones included
}

// policy is the interval.Interval that jobs share, and the last plan it
// made: thousands of jobs of one policy due at one instant are planned
// once, not once each.
type policy struct {
	interval.Interval

	// The plan for a tick due at due and handled at now (Unix
	// nanoseconds), if planned. Guarded by Runtime.mu.
	due, now int64
	plan     interval.Plan
	planned  bool
}

// planAt returns the plan of a tick due at due and handled at now, from
// the last one made if it was for the same two instants. r.mu is held.
func (p *policy) planAt(due int64, now time.Time, nowNs int64) interval.Plan {
	if !p.planned || p.due != due || p.now != nowNs {
		p.plan = p.Plan(time.Unix(0, due), now)
		p.due, p.now, p.planned = due, nowNs, true
	}
	return p.plan
}

// admission is a job's admission check and what the runtime keeps about
// it. Only jobs with one have it, so that an idle job without one costs
// no more than its entry.
type admission struct {
	check Admission // the caller's own, if any
	state *jobState // a Leased job's record
	lease string    // the name of a Leased job's lease, for its log records

	// When the job's next tick is due (Unix nanoseconds), as it was last
	// queued, and whether it is queued now: a leased job's extra runs
	// and its announcement need it. Guarded by Runtime.mu.
	due    int64
	queued bool

	// The admission failures in a row, and when the first of them began
	// (Unix nanoseconds), so that an outage is logged once when it begins
	// and once when it ends. Only runs touch them, without Runtime.mu.
	failures    atomic.Uint32
	failedSince atomic.Int64
}

// dispatchChunk is how many due ticks dispatch takes from the queue at a
// time, under one reading of the clock, before it hands their runs to the
// workers as one chunk. Thousands of jobs due at once are handed out a
// chunk at a time, and the scheduler yields between chunks so that the
// workers get to run them before it takes more.
const dispatchChunk = 16

// Start checks the jobs and the options, queues every job's startup run
// and returns the running runtime. The startup runs have been handed to
// the runtime's workers, which start them at once, by the time Start
// returns.
//
// Start returns an error wrapping [ErrInvalidJob] or [ErrInvalidOption],
// before any job runs, if a job is nil, has the zero interval or an empty
// name, panics in its Name, Interval or Lease method, if two jobs have one
// name or two [Leased] jobs one lease name, if a Leased job has neither a
// Name method nor a [LeaseConfig.Name], if a lease can't work, or if an
// option is invalid.
// The caller must call [Runtime.Shutdown] on the runtime it returns.
func Start(jobs []Job, opts ...Option) (*Runtime, error) {
	o := defaultOptions()
	for i, opt := range opts {
		if opt == nil {
			return nil, fmt.Errorf("%w: option %d is nil", ErrInvalidOption, i)
		}
		if err := opt(&o); err != nil {
			return nil, err
		}
	}

	// One allocation holds every job's entry: an idle job costs its entry
	// and its place in the queue, nothing more. The queue's order of ties
	// relies on it (see queue).
	entries := make([]entry, len(jobs))
	byName := make(map[string]int, len(jobs))
	policies := make(map[interval.Interval]*policy)
	for i, j := range jobs {
		name, every, err := describe(i, j)
		if err != nil {
			return nil, err
		}
		if prev, dup := byName[name]; dup {
			return nil, fmt.Errorf("%w: jobs[%d] and jobs[%d] are both named %q", ErrInvalidJob, prev, i, name)
		}
		byName[name] = i
		shared := policies[every]
		if shared == nil {
			shared = &policy{Interval: every}
			policies[every] = shared
		}
		e := &entries[i]
		e.job, e.name, e.every = j, name, shared
	}
	for name, admit := range o.admissions {
		i, ok := byName[name]
		if !ok {
			return nil, fmt.Errorf("%w: WithAdmission(%q, ...) names no job", ErrInvalidOption, name)
		}
		entries[i].admit = &admission{check: admit}
	}
	if o.replica == "" {
		o.replica = defaultReplica()
	}
	var leased []*entry
	leaseOwner := make(map[string]string) // lease name: job name
	for i := range entries {
		e := &entries[i]
		if l, ok := e.job.(Leased); ok {
			// The claim comes after a caller's own admission, so that a
			// run the caller refuses doesn't take the slot.
			lease, err := leaseOf(e.name, l)
			if err != nil {
				return nil, err
			}
			if lease.Name, err = leaseName(e.name, l, lease); err != nil {
				return nil, err
			}
			if other, dup := leaseOwner[lease.Name]; dup {
				// One record can't keep two jobs' slots: one of them
				// would never run, and a run-now would reach one.
				return nil, fmt.Errorf("%w: jobs %q and %q both lease %q", ErrInvalidJob, other, e.name, lease.Name)
			}
			leaseOwner[lease.Name] = e.name
			if err := e.every.CheckLease(lease.TTL); err != nil {
				return nil, fmt.Errorf("%w: job %q: %w", ErrInvalidJob, e.name, err)
			}
			state, err := newJobState(e.every.Interval, lease, o.replica, o.now)
			if err != nil {
				return nil, err
			}
			if e.admit == nil {
				e.admit = new(admission)
			}
			e.admit.state = state
			e.admit.lease = lease.Name
			leased = append(leased, e)
		}
	}

	ctx, cancel := context.WithCancelCause(context.Background())
	r := &Runtime{
		log:           o.log.With(slog.String("replica", o.replica)),
		observer:      o.observer,
		maxOverlap:    o.maxOverlap,
		now:           o.now,
		cancel:        cancel,
		wake:          make(chan struct{}, 1),
		stop:          make(chan struct{}),
		loopDone:      make(chan struct{}),
		idle:          make(chan struct{}),
		listenersDone: make(chan struct{}),
		queue:         make(queue, 0, len(entries)),
		batch:         make([]*runArgs, 0, dispatchChunk),
		work:          make(chan *chunk, workQueue),
		leased:        leased,
	}
	now := r.now()
	// Each policy says once when its jobs' first tick is due.
	type first struct {
		due int64
		ok  bool
	}
	firsts := make(map[*policy]first, len(policies))
	for _, p := range policies {
		at, ok := p.First(now)
		firsts[p] = first{at.UnixNano(), ok}
	}
	for i := range entries {
		e := &entries[i]
		if f := firsts[e.every]; f.ok {
			r.requeue(e, f.due)
		}
	}
	if r.log.Enabled(ctx, slog.LevelInfo) {
		r.logStart(ctx, entries)
	}
	r.startWorkers(ctx)
	next, ok := r.dispatch(ctx) // the startup runs
	go r.loop(ctx, next, ok)
	if len(leased) > 0 {
		r.startRecords(ctx, now)
	}
	return r, nil
}

// logStart logs the runtime's start, with its jobs' names.
func (r *Runtime) logStart(ctx context.Context, entries []entry) {
	names := make([]string, len(entries))
	for i := range entries {
		names[i] = entries[i].name
	}
	r.log.LogAttrs(ctx, slog.LevelInfo, "cron runtime started",
		slog.Int("jobs", len(entries)), slog.Any("names", names))
}

// loop is the scheduler: it sleeps until the earliest due tick, or until a
// finished run or Shutdown wakes it, and dispatches what is due. next and
// ok are what the first dispatch, in Start, returned.
func (r *Runtime) loop(ctx context.Context, next int64, ok bool) {
	defer close(r.loopDone)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		// The wait is measured after dispatch has handed out its runs,
		// which takes a while for thousands of jobs due at once.
		if ok {
			timer.Reset(time.Duration(next - r.now().UnixNano()))
		} else {
			timer.Stop()
		}
		select {
		case <-timer.C:
		case <-r.wake:
		case <-r.stop:
			return
		}
		next, ok = r.dispatch(ctx)
	}
}

// dispatch starts or skips every tick that is due, and returns when the
// next one is due (Unix nanoseconds), or false if no job waits for a tick.
// Job code and the observer run after the lock is released.
func (r *Runtime) dispatch(ctx context.Context) (int64, bool) {
	r.mu.Lock()
	for {
		now := r.now()
		nowNs := now.UnixNano()
		for len(r.batch) < dispatchChunk && !r.stopped.Load() && len(r.queue) > 0 && r.queue[0].due <= nowNs {
			r.batch = append(r.batch, r.tick(r.queue.pop(), now, nowNs))
		}
		var next int64
		waiting := !r.stopped.Load() && len(r.queue) > 0
		if waiting {
			next = r.queue[0].due
		}
		more := waiting && next <= nowNs
		r.mu.Unlock()

		r.startBatch(ctx, more)
		if !more {
			return next, waiting
		}
		// Let the workers run what was just handed out before taking more
		// (see dispatchChunk).
		runtime.Gosched()
		r.mu.Lock()
	}
}

// startBatch hands the runs that dispatch decided on to the workers, and
// reports the ticks it skipped, and empties the batch. The runs of quick
// jobs in a full batch go to one worker as a chunk; those of a smaller
// one, the last of a dispatch, go one by one, so that the idle workers
// share them. The other jobs' runs get a goroutine each (see workers.go).
func (r *Runtime) startBatch(ctx context.Context, full bool) {
	var c *chunk
	for i, a := range r.batch {
		r.batch[i] = nil
		if a.late > 0 {
			r.logLate(ctx, a)
		}
		if a.noMore {
			r.log.LogAttrs(ctx, slog.LevelWarn, "cron job has no further slots and stops",
				slog.String("job", a.tick.Job), slog.String("interval", a.e.every.String()))
		}
		if a.skip != "" {
			r.skipped(ctx, &a.tick, a.skip)
			putRun(a)
			continue
		}
		if !a.e.quick.Load() {
			r.alone(ctx, a)
			continue
		}
		if c == nil {
			c = newChunk()
		}
		c.add(a)
		if !full {
			r.hand(ctx, c)
			c = nil
		}
	}
	if c != nil {
		r.hand(ctx, c)
	}
	r.batch = r.batch[:0]
}

// tick decides what to do with the tick of it, which is due at or before
// now, and queues the job's next tick if it is known already. r.mu is held.
func (r *Runtime) tick(it item, now time.Time, nowNs int64) *runArgs {
	e := it.e
	if e.admit != nil {
		e.admit.queued = false
	}
	e.ticks++
	p := e.every.planAt(it.due, now, nowNs)
	a := getRun()
	a.e, a.atFinish = e, p.AtFinish
	a.tick = Tick{Scheduled: p.Scheduled, Slot: p.Slot, Started: now, Job: e.name, Run: e.ticks, Attempt: 1}
	if p.HasNext {
		a.next = p.Next
	}
	if p.Late {
		a.late = time.Duration(nowNs - it.due)
	}
	switch {
	case p.HasNext:
		r.requeue(e, p.Next.UnixNano())
	case !p.AtFinish:
		a.noMore = true
	}

	limit, reason := 1, ReasonStillRunning
	if p.Overlap {
		limit, reason = r.maxOverlap, ReasonTooManyRuns
	}
	if int(e.active.Load()) >= limit {
		// A job queued only at a run's finish never gets here.
		a.skip = reason
		return a
	}
	e.active.Add(1)
	r.inflight.Add(1)
	return a
}

// requeue queues e for a tick at due (Unix nanoseconds), and reports
// whether it is due first. r.mu is held.
func (r *Runtime) requeue(e *entry, due int64) bool {
	if e.admit != nil {
		e.admit.due, e.admit.queued = due, true
	}
	return r.queue.push(due, e) == 0
}

// finished records the end of a run of e that started at start and ended at
// end (at start, for a run its admission skipped), and queues e's next tick
// if its plan said that it depends on the run's end.
func (r *Runtime) finished(e *entry, start, end time.Time, atFinish bool) {
	if atFinish {
		r.requeueAfter(e, start, end)
	} else {
		e.active.Add(-1)
	}
	// Shutdown sets stopped before it reads inflight, and this lowers
	// inflight before it reads stopped, so one of the two sees the last
	// run end; the Once keeps both from closing idle.
	if r.inflight.Add(-1) == 0 && r.stopped.Load() {
		r.idleOnce.Do(func() { close(r.idle) })
	}
}

// requeueAfter queues e's next tick after a run that started at start and
// ended at end, unless the runtime is stopping.
func (r *Runtime) requeueAfter(e *entry, start, end time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e.active.Add(-1)
	if r.stopped.Load() {
		return
	}
	next, ok := e.every.Next(start, end)
	if !ok {
		return
	}
	if r.requeue(e, next.UnixNano()) {
		// The scheduler sleeps until a later tick: wake it for this one.
		select {
		case r.wake <- struct{}{}:
		default:
		}
	}
}
