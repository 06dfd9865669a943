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
// name, or a [Leased] job whose lease has no name or can't work.
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
	batch []decision

	mu    sync.Mutex
	queue queue // entries waiting for their next tick, by due time

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
	leased     []*entry
	subs       []io.Closer
	listeners  sync.WaitGroup
	endListens context.CancelFunc // ends the listeners' dials and calls
}

// entry is a job and its scheduling state. It is what an idle job costs, so
// it is kept small: jobs that share a policy share one copy of it, and the
// counters are 32 bits.
type entry struct {
	job   Job
	name  string
	every *interval.Interval // never nil; shared, never modified
	admit *admission         // nil for a job that every tick runs

	// Guarded by Runtime.mu, but for active, which a run's end lowers
	// without it.
	index  int32        // position in the queue, -1 when not in it
	active atomic.Int32 // runs in progress
	due    time.Time    // when the next tick is due, while queued
	ticks  uint64       // ticks so far, skipped ones included
}

// admission is a job's admission check and what the runtime keeps about
// it. Only jobs with one have it, so that an idle job without one costs
// no more than its entry.
type admission struct {
	check Admission // the caller's own, if any
	state *jobState // a Leased job's record
	lease string    // the name of a Leased job's lease, for its log records

	// The admission failures in a row, and when the first of them began
	// (Unix nanoseconds), so that an outage is logged once when it begins
	// and once when it ends. Only runs touch them, without Runtime.mu.
	failures    atomic.Uint32
	failedSince atomic.Int64
}

// dispatchChunk is how many due ticks dispatch takes from the queue at a
// time before it starts their runs. Thousands of jobs due at once are
// started a chunk at a time, and the scheduler yields between chunks so that
// the runs it started get to run (and finish) before it starts more: the
// batch never grows, and the goroutines that exist at once stay near a
// chunk's worth, rather than thousands whose descriptors the Go runtime
// would keep for good.
const dispatchChunk = 64

// decision is what dispatch does with one tick: start a run, or skip the
// tick and say why.
type decision struct {
	e        *entry
	tick     Tick
	skip     string        // the reason, if the tick is skipped
	late     time.Duration // how late the tick was, if it was late
	atFinish bool          // the next tick is queued when the run finishes
	noMore   bool          // the policy has no further tick: the job is done
	next     time.Time     // the next tick, if known now
}

// Start checks the jobs and the options, starts every job's startup run and
// returns the running runtime. The startup runs have begun, each in its own
// goroutine, by the time Start returns.
//
// Start returns an error wrapping [ErrInvalidJob] or [ErrInvalidOption],
// before any job runs, if a job is nil, has the zero interval or an empty
// name, panics in its Name, Interval or Lease method, if two jobs have one
// name, if a [Leased] job has neither a Name method nor a
// [LeaseConfig.Name], if a lease can't work, or if an option is invalid.
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
	// and its place in the queue, nothing more.
	entries := make([]entry, len(jobs))
	byName := make(map[string]int, len(jobs))
	policies := make(map[interval.Interval]*interval.Interval)
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
			shared = new(every)
			policies[every] = shared
		}
		e := &entries[i]
		e.job, e.name, e.every, e.index = j, name, shared, -1
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
			if err := e.every.CheckLease(lease.TTL); err != nil {
				return nil, fmt.Errorf("%w: job %q: %w", ErrInvalidJob, e.name, err)
			}
			state, err := newJobState(*e.every, lease, o.replica, o.now)
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
		log:        o.log.With(slog.String("replica", o.replica)),
		observer:   o.observer,
		maxOverlap: o.maxOverlap,
		now:        o.now,
		cancel:     cancel,
		wake:       make(chan struct{}, 1),
		stop:       make(chan struct{}),
		loopDone:   make(chan struct{}),
		idle:       make(chan struct{}),
		queue:      make(queue, 0, len(entries)),
		batch:      make([]decision, 0, dispatchChunk),
		leased:     leased,
	}
	now := r.now()
	for i := range entries {
		e := &entries[i]
		if first, ok := e.every.First(now); ok {
			e.due = first
			r.queue.push(e)
		}
	}
	if r.log.Enabled(ctx, slog.LevelInfo) {
		r.logStart(ctx, entries)
	}
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
func (r *Runtime) loop(ctx context.Context, next time.Time, ok bool) {
	defer close(r.loopDone)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		// The wait is measured after dispatch has started its runs, which
		// takes a while for thousands of jobs due at once.
		if ok {
			timer.Reset(next.Sub(r.now()))
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
// next one is due, or false if no job waits for a tick. Job code and the
// observer run after the lock is released.
func (r *Runtime) dispatch(ctx context.Context) (time.Time, bool) {
	r.mu.Lock()
	now := r.now()
	for {
		for len(r.batch) < dispatchChunk && !r.stopped.Load() && len(r.queue) > 0 && !r.queue[0].due.After(now) {
			e := r.queue.pop()
			r.batch = append(r.batch, r.tick(e, now))
		}
		var next time.Time
		waiting := !r.stopped.Load() && len(r.queue) > 0
		if waiting {
			next = r.queue[0].due
		}
		more := waiting && !next.After(now)
		r.mu.Unlock()

		r.startBatch(ctx)
		if !more {
			return next, waiting
		}
		// Let the runs just started run before starting more (see
		// dispatchChunk).
		runtime.Gosched()
		r.mu.Lock()
	}
}

// startBatch starts or skips the runs that dispatch decided on, and empties
// the batch.
func (r *Runtime) startBatch(ctx context.Context) {
	for i, d := range r.batch {
		if d.late > 0 {
			r.logLate(ctx, d)
		}
		if d.skip != "" {
			r.skipped(ctx, &d.tick, d.skip)
		} else {
			go r.run(ctx, &runArgs{e: d.e, tick: d.tick, atFinish: d.atFinish, next: d.next})
		}
		if d.noMore {
			r.log.LogAttrs(ctx, slog.LevelWarn, "cron job has no further slots and stops",
				slog.String("job", d.tick.Job), slog.String("interval", d.e.every.String()))
		}
		r.batch[i] = decision{}
	}
	r.batch = r.batch[:0]
}

// tick decides what to do with e's tick, which is due at or before now, and
// queues e's next tick if it is known already. r.mu is held.
func (r *Runtime) tick(e *entry, now time.Time) decision {
	e.ticks++
	p := e.every.Plan(e.due, now)
	d := decision{e: e, atFinish: p.AtFinish, tick: Tick{
		Scheduled: p.Scheduled, Slot: p.Slot, Started: now, Job: e.name, Run: e.ticks, Attempt: 1,
	}}
	if p.HasNext {
		d.next = p.Next
	}
	if p.Late {
		d.late = now.Sub(e.due)
	}
	switch {
	case p.HasNext:
		r.requeue(e, p.Next)
	case !p.AtFinish:
		d.noMore = true
	}

	limit, reason := 1, ReasonStillRunning
	if p.Overlap {
		limit, reason = r.maxOverlap, ReasonTooManyRuns
	}
	if int(e.active.Load()) >= limit {
		// A job queued only at a run's finish never gets here.
		d.skip = reason
		return d
	}
	e.active.Add(1)
	r.inflight.Add(1)
	return d
}

// requeue queues e for a tick at due. r.mu is held.
func (r *Runtime) requeue(e *entry, due time.Time) {
	e.due = due
	r.queue.push(e)
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
	r.requeue(e, next)
	if e.index == 0 {
		// The scheduler sleeps until a later tick: wake it for this one.
		select {
		case r.wake <- struct{}{}:
		default:
		}
	}
}

// queue is a min-heap of entries by due time. It is written out rather than
// run through container/heap, whose calls through an interface were a fifth
// of the scheduler's time with thousands of jobs due at once.
type queue []*entry

func (q queue) less(i, j int) bool { return q[i].due.Before(q[j].due) }

func (q queue) swap(i, j int) {
	q[i], q[j] = q[j], q[i]
	q[i].index = int32(i)
	q[j].index = int32(j)
}

// push adds e to the queue.
func (q *queue) push(e *entry) {
	e.index = int32(len(*q))
	*q = append(*q, e)
	q.up(len(*q) - 1)
}

// pop removes the entry due first from the queue, which must not be empty,
// and returns it.
func (q *queue) pop() *entry {
	old := *q
	n := len(old) - 1
	old.swap(0, n)
	old[:n].down(0)
	e := old[n]
	old[n] = nil
	e.index = -1
	*q = old[:n]
	return e
}

func (q queue) up(j int) {
	for j > 0 {
		i := (j - 1) / 2 // parent
		if !q.less(j, i) {
			return
		}
		q.swap(i, j)
		j = i
	}
}

func (q queue) down(i int) {
	n := len(q)
	for {
		j := 2*i + 1 // left child
		if j >= n {
			return
		}
		if r := j + 1; r < n && q.less(r, j) {
			j = r
		}
		if !q.less(j, i) {
			return
		}
		q.swap(i, j)
		i = j
	}
}
