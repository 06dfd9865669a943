package cron

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wakuwaku-go/wakuwaku/cron/internal/record"
	"github.com/wakuwaku-go/wakuwaku/internal/typednil"
	"github.com/wakuwaku-go/wakuwaku/interval"
)

// ErrInvalidJob is the error [Start], [Runtime.Add] and [Runtime.Replace]
// return, wrapped with the job's index or name, for a job they cannot run:
// a nil job, a job whose Interval is the zero interval.Interval, a job with
// an empty name, two jobs with one name, two [Leased] jobs with one lease
// name, a Leased job whose lease has no name or can't work, or a negative
// run deadline.
var ErrInvalidJob = errors.New("cron: invalid job")

// InvalidJobError is the error [Start] returns for a job it refuses: a
// caller that made its jobs from a list (a builder, a configuration file)
// learns which one from Index. Err wraps [ErrInvalidJob] and says what is
// wrong; errors.Is(err, ErrInvalidJob) works through the InvalidJobError.
type InvalidJobError struct {
	Index int // the job's index in Start's jobs; of two jobs with one name, the second's
	Err   error
}

// Error is Err's message.
func (e *InvalidJobError) Error() string { return e.Err.Error() }

// Unwrap returns Err.
func (e *InvalidJobError) Unwrap() error { return e.Err }

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
	// waiting, and lctx the leased jobs' own calls' (run-now listeners,
	// announcements), which end at Shutdown. The runtime keeps them, as
	// no other value does, so that a job added after Start lives as the
	// others do.
	ctx        context.Context
	lctx       context.Context
	cancel     context.CancelCauseFunc // cancels ctx
	endListens context.CancelFunc      // cancels lctx
	wake       chan struct{}           // the queue's head changed; capacity 1
	stop       chan struct{}           // closed by the first Shutdown
	loopDone   chan struct{}           // closed when the scheduler returned

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

	// The leased jobs by lease name, and the Pub/Sub subscriptions on
	// which their run-now requests come, one per client (guarded by mu),
	// whose listeners Shutdown stops and waits for.
	leased           map[string]*entry
	batchMu          sync.Mutex
	batches          map[any]*record.Batcher // the leased jobs' batching clients, by client (guarded by batchMu: Start holds mu)
	subs             []io.Closer
	listening        map[any]bool // the clients with a listener
	watchingSkew     bool
	listenersRunning int           // the goroutines of the leased jobs' own calls
	listenersDone    chan struct{} // closed when they ended after Shutdown
}

// entry is a job and its scheduling state. It is what an idle job costs,
// with its 16-byte item in the queue (and, once jobs were added or
// removed, its place in Runtime.byName), so it is kept small: jobs that share a policy share one copy of it, the
// due time lives in the queue alone, and the count of active runs shares
// 32 bits with the job's flags.
//
// Replace changes job, every and admit in place, under Runtime.mu: a run
// reads them from its runArgs, which the tick copied.
type entry struct {
	job   Job
	name  string
	every *policy    // never nil; shared
	admit *admission // nil for a job whose runs need nothing but Process

	// state holds the runs in progress that a tick of its schedule
	// started (under stateRuns) and the flags stateQuick and
	// stateRemoved. A run's end lowers it without Runtime.mu.
	state atomic.Int32
	pos   int32  // its item's index in the queue, -1 if not queued; guarded by Runtime.mu
	ticks uint64 // ticks so far, skipped ones included; guarded by Runtime.mu
}

// The parts of entry.state.
const (
	stateRuns    = 1<<29 - 1 // the runs in progress
	stateRemoved = 1 << 29   // Remove took the job out: no tick or run starts any more
	stateQuick   = 1 << 30   // its last run took less than stragglerAfter
)

// runs returns how many of e's scheduled runs are in progress.
func (e *entry) runs() int { return int(e.state.Load() & stateRuns) }

// quick reports whether e's runs go to the workers (see workers.go).
func (e *entry) quick() bool { return e.state.Load()&stateQuick != 0 }

// setQuick sets or clears e's stateQuick.
func (e *entry) setQuick(quick bool) {
	if quick {
		e.state.Or(stateQuick)
	} else {
		e.state.And(^int32(stateQuick))
	}
}

// policy is the interval.Interval that jobs share, and the last plan it
// made: thousands of jobs of one policy due at one instant are planned
// once, not once each.
type policy struct {
	interval.Interval

	// The plan for a tick due at due and handled at now (Unix
	// nanoseconds), if planned, and how many jobs have the policy.
	// Guarded by Runtime.mu.
	due, now int64
	plan     interval.Plan
	planned  bool
	jobs     int
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

// admission is what the runtime keeps about a job whose runs need more
// than Process: an admission check, a lease, a run deadline. Only jobs
// with one of them have it, so that an idle job without costs no more
// than its entry.
type admission struct {
	check    Admission     // the caller's own, if any
	state    *jobState     // a Leased job's record
	lease    string        // the name of a Leased job's lease, for its log records
	deadline time.Duration // how long a run may take; 0 for no limit

	// The admission failures in a row, and when the first of them began
	// (Unix nanoseconds), so that an outage is logged once when it begins
	// and once when it ends. Only runs touch them, without Runtime.mu.
	failures    atomic.Uint32
	failedSince atomic.Int64
}

// leased returns a Leased job's record keeper, nil for another job.
func (ad *admission) leased() *jobState {
	if ad == nil {
		return nil
	}
	return ad.state
}

// waits reports whether a run of the job waits for more than its Process:
// an admission check, a lease's claim. A nil admission has neither.
func (ad *admission) waits() bool {
	return ad != nil && (ad.check != nil || ad.state != nil)
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
// Start returns an error, before any job runs: an [*InvalidJobError]
// (wrapping [ErrInvalidJob]) naming the job's index if a job is nil, has the zero interval or an empty
// name, panics in its Name, Interval, Lease or RunDeadline method, if two
// jobs have one name or two [Leased] jobs one lease name, if a Leased job
// has neither a Name method nor a [LeaseConfig.Name], if a lease can't
// work; one wrapping [ErrInvalidOption] if an option is invalid.
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
	if o.replica == "" {
		o.replica = defaultReplica()
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	lctx, endListens := context.WithCancel(ctx)
	r := &Runtime{
		rep:           reporter{log: o.log.With(slog.String("replica", o.replica)), observer: o.observer},
		maxOverlap:    o.maxOverlap,
		replica:       o.replica,
		now:           o.now,
		ctx:           ctx,
		lctx:          lctx,
		cancel:        cancel,
		endListens:    endListens,
		wake:          make(chan struct{}, 1),
		stop:          make(chan struct{}),
		loopDone:      make(chan struct{}),
		idle:          make(chan struct{}),
		listenersDone: make(chan struct{}),
		queue:         make(queue, 0, len(jobs)),
		policies:      make(map[interval.Interval]*policy),
		admissions:    o.admissions,
		removing:      make(map[*entry]chan struct{}),
		offRuns:       make(map[*entry]int),
		leased:        make(map[string]*entry),
		listening:     make(map[any]bool),
		batch:         make([]*runArgs, 0, dispatchChunk),
	}
	r.pool = newPool(r.run, r.idle)
	fail := func(err error) (*Runtime, error) {
		cancel(err)
		return nil, err
	}
	for name := range o.admissions {
		if !slices.ContainsFunc(jobs, func(j Job) bool { return !typednil.Is(j) && safeName(j) == name }) {
			return fail(fmt.Errorf("%w: WithAdmission(%q, ...) names no job", ErrInvalidOption, name))
		}
	}

	// One allocation holds every job's entry: an idle job costs its entry
	// and its place in the queue, nothing more. The queue's order of ties
	// relies on it (see queue).
	entries := make([]entry, len(jobs))
	index := make(map[string]int, len(jobs)) // for the error naming two jobs of one name
	var leased []*entry
	r.mu.Lock()
	for i, j := range jobs {
		e := &entries[i]
		every, err := r.newEntry(e, func() string { return fmt.Sprintf("jobs[%d]", i) }, j)
		if err == nil {
			if prev, dup := index[e.name]; dup {
				err = fmt.Errorf("%w: jobs[%d] and jobs[%d] are both named %q", ErrInvalidJob, prev, i, e.name)
			}
		}
		if err == nil {
			index[e.name] = i
			err = r.register(e, every, false)
		}
		if err != nil {
			r.mu.Unlock()
			return fail(&InvalidJobError{Index: i, Err: err})
		}
		if e.admit != nil && e.admit.state != nil {
			leased = append(leased, e)
		}
	}
	now := r.now()
	// Each policy says once when its jobs' first tick is due.
	type first struct {
		due time.Time
		ok  bool
	}
	firsts := make(map[*policy]first, len(r.policies))
	for _, p := range r.policies {
		at, ok := p.First(now)
		firsts[p] = first{at, ok}
	}
	for i := range entries {
		e := &entries[i]
		switch f := firsts[e.every]; {
		case !f.ok:
		case f.due.Equal(now):
			r.requeue(e, now.UnixNano()) // the startup run, which is not spread
		default:
			r.requeue(e, e.due(f.due))
		}
	}
	r.mu.Unlock()
	if r.rep.log.Enabled(ctx, slog.LevelInfo) {
		r.rep.logStart(ctx, entries)
	}
	r.pool.start(ctx)
	next, ok := r.dispatch(ctx) // the startup runs
	go r.loop(ctx, next, ok)
	r.initial = entries
	if len(leased) > 0 {
		r.startRecords(ctx, now, leased, true)
	}
	return r, nil
}

// safeName is JobName, or "" if the job's Name method panics: Start
// reports that when it checks the job.
func safeName(j Job) (name string) {
	defer func() { _ = recover() }()
	return JobName(j)
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
		state.Batched, state.Completing = r.batchFor(state)
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
	if err := r.checkLease(e, nil); err != nil {
		return err
	}
	e.every = r.policyOf(every)
	if added {
		r.byName[e.name] = e
	}
	if e.admit != nil && e.admit.state != nil {
		r.leased[e.admit.lease] = e
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

// checkLease refuses e's lease if another job than old (nil for none)
// leases it: one record can't keep two jobs' slots, one of them would
// never run, and a run-now would reach one. r.mu is held.
func (r *Runtime) checkLease(e, old *entry) error {
	if e.admit == nil || e.admit.state == nil {
		return nil
	}
	if other := r.leased[e.admit.lease]; other != nil && other != old {
		return fmt.Errorf("%w: jobs %q and %q both lease %q", ErrInvalidJob, other.name, e.name, e.admit.lease)
	}
	return nil
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

// due returns when e's tick for the slot of its schedule that starts at
// start is due: start, or later for a job whose interval spreads its
// runs (interval.Interval.WithSpread).
func (e *entry) due(start time.Time) int64 {
	return e.every.Due(e.name, start).UnixNano()
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
			r.rep.logLate(ctx, a)
		}
		if a.noMore {
			r.rep.log.LogAttrs(ctx, slog.LevelWarn, "cron job has no further slots and stops",
				slog.String("job", a.tick.Job), slog.String("interval", a.every.String()))
		}
		if a.skip != "" {
			if s := a.admit.leased(); a.skip == ReasonStillRunning && s != nil && s.shared {
				// A leased Cron job's own run goes on: the record says
				// whether a run holds the job, and records the slot
				// skipped (PROTOCOL.md, R20), so that it shows in the
				// history even when no other replica ticks it. A replica
				// that does not own the slot looks first (E13), as for
				// any tick.
				e, slot := a.e, a.tick.Slot
				putRun(a)
				r.offSchedule(e, modeSkip, slot, "")
				continue
			}
			r.rep.skipped(ctx, &a.tick, a.skip)
			putRun(a)
			continue
		}
		if !a.e.quick() {
			r.pool.alone(ctx, a)
			continue
		}
		if c == nil {
			c = newChunk()
		}
		c.add(a)
		if !full {
			r.pool.hand(ctx, c)
			c = nil
		}
	}
	if c != nil {
		r.pool.hand(ctx, c)
	}
	r.batch = r.batch[:0]
}

// tick decides what to do with the tick of it, which is due at or before
// now, and queues the job's next tick if it is known already. r.mu is held.
func (r *Runtime) tick(it item, now time.Time, nowNs int64) *runArgs {
	e := it.e
	e.ticks++
	p := e.every.planAt(it.due, now, nowNs)
	a := getRun()
	a.e, a.job, a.every, a.admit, a.atFinish = e, e.job, e.every, e.admit, p.AtFinish
	a.tick = Tick{Scheduled: p.Scheduled, Slot: p.Slot, Started: now, Job: e.name, Run: e.ticks, Attempt: 1}
	if p.Late {
		a.late = time.Duration(nowNs - it.due)
	}
	switch {
	case p.HasNext:
		due := e.due(p.Next)
		a.next = time.Unix(0, due)
		r.requeue(e, due)
	case !p.AtFinish:
		a.noMore = true
	}

	limit, reason := 1, ReasonStillRunning
	if p.Overlap {
		limit, reason = r.maxOverlap, ReasonTooManyRuns
	}
	if e.runs() >= limit {
		// A job queued only at a run's finish gets here only after
		// Replace queued it while its run went on.
		a.skip = reason
		return a
	}
	e.state.Add(1)
	r.inflight.Add(1)
	return a
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

// listenerEnded counts the end of one of the goroutines of the leased
// jobs' own calls (a listener, a start's announcements, the clock check),
// which began under r.mu while the runtime was not stopped, and closes
// listenersDone after the last once Shutdown was called. Deferred by each,
// it lets a panic go on at once: the goroutine may have panicked holding
// r.mu, and waiting for it would hang the runtime instead of crashing.
func (r *Runtime) listenerEnded() {
	if p := recover(); p != nil {
		panic(p)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.listenersRunning--; r.listenersRunning == 0 && r.stopped.Load() {
		close(r.listenersDone)
	}
}
