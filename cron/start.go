package cron

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"time"

	"github.com/wakuwaku-go/wakuwaku/internal/typednil"
	"github.com/wakuwaku-go/wakuwaku/interval"
)

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
		rep:        reporter{log: o.log.With(slog.String("replica", o.replica)), observer: o.observer},
		maxOverlap: o.maxOverlap,
		replica:    o.replica,
		now:        o.now,
		ctx:        ctx,
		cancel:     cancel,
		wake:       make(chan struct{}, 1),
		stop:       make(chan struct{}),
		loopDone:   make(chan struct{}),
		idle:       make(chan struct{}),
		queue:      make(queue, 0, len(jobs)),
		policies:   make(map[interval.Interval]*policy),
		admissions: o.admissions,
		removing:   make(map[*entry]chan struct{}),
		offRuns:    make(map[*entry]int),
		batch:      make([]*runArgs, 0, dispatchChunk),
	}
	r.pool = newPool(r.run, r.idle)
	r.leased = newLeasedJobs(r, &r.rep, r.replica, r.now, &r.mu, &r.stopped, r.stop, ctx, lctx, endListens)
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
		r.leased.startRecords(ctx, now, leased, true)
	}
	return r, nil
}

// safeName is JobName, or "" if the job's Name method panics: Start
// reports that when it checks the job.
func safeName(j Job) (name string) {
	defer func() { _ = recover() }()
	return JobName(j)
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

// ErrShutdown is the cause of a run's context when [Runtime.Shutdown] gave
// up waiting for it: context.Cause(ctx) returns it inside the job.
var ErrShutdown = errors.New("cron: shut down")

// Shutdown stops the runtime: no tick starts a run any more, and Shutdown
// waits for the runs in progress to return. It returns nil once they have,
// their outcomes are recorded (a leased run's completion is sent again
// while Redis does not answer and its run lease lasts, PROTOCOL.md's R13),
// and the runtime has no goroutine or timer left: nothing of it sends a
// Redis command after Shutdown returned nil. PROTOCOL.md's "Shutdown"
// gives the order.
//
// If ctx ends first, Shutdown cancels the runs' contexts with cause
// [ErrShutdown] and returns ctx.Err() without waiting further; a job that
// honours its context returns soon after. The same holds for a leased
// job's calls to Redis that Shutdown waits for (a completion, an
// announcement, a clock check, leaving the replica registry), which a
// Redis that stopped answering can hold up. From then on the runtime
// starts no Redis command (a command already on its way may still reach
// Redis): a leased run that returns later is not recorded, its run lease
// runs out, and the next claim records it lost. To wait for those runs
// and calls, call Shutdown again with a new context.
//
// Shutdown is safe to call more than once and from several goroutines; each
// call waits as described. Shutdown on a nil *Runtime returns nil.
func (r *Runtime) Shutdown(ctx context.Context) error {
	if r == nil {
		return nil
	}
	// In this order: no tick starts any more (stopped, the queue
	// emptied); the workers may end once the runs are done (idle); the
	// scheduler's loop and the leased jobs' loops see stop closed; the
	// leased jobs' side stops its calls, timers and subscriptions
	// (leasedJobs.shutdown). Then Shutdown waits for the loop, the leased
	// side's goroutines, the runs and the workers, in that order.
	r.mu.Lock()
	first := !r.stopped.Load()
	if first {
		r.stopped.Store(true)
		for _, it := range r.queue {
			it.e.pos = -1
		}
		clear(r.queue)
		r.queue = nil
		if r.inflight.Load() == 0 {
			r.idleOnce.Do(func() { close(r.idle) })
		}
		close(r.stop)
		r.leased.shutdown()
	}
	r.mu.Unlock()
	if first {
		r.rep.log.LogAttrs(ctx, slog.LevelInfo, "cron runtime shutting down", slog.Int64("runs", r.inflight.Load()))
	}

	// The scheduler only hands runs to the workers and reports skipped
	// ticks, so it returns at once: wait for it whatever ctx says. The
	// leased jobs' background work may be stuck in a call to a Redis that
	// stopped answering, which a go-redis client without
	// ContextTimeoutEnabled does not end when its context does: ctx
	// bounds the wait for them too.
	<-r.loopDone
	if !r.leased.drained(ctx) {
		r.cancel(ErrShutdown)
		r.rep.log.LogAttrs(ctx, slog.LevelWarn, "cron runtime gave up waiting for its calls to Redis",
			slog.Int64("runs", r.inflight.Load()))
		return ctx.Err()
	}
	select {
	case <-r.idle:
	case <-ctx.Done():
		// Runs that finished as ctx ended finished in time.
		select {
		case <-r.idle:
		default:
			r.cancel(ErrShutdown)
			r.rep.log.LogAttrs(ctx, slog.LevelWarn, "cron runtime gave up waiting for its runs; their contexts are cancelled",
				slog.Int64("runs", r.inflight.Load()))
			return ctx.Err()
		}
	}
	// The workers end as soon as they see the runtime idle.
	r.pool.wait()
	// Nothing uses the context any more; cancelling it releases it.
	r.cancel(ErrShutdown)
	r.stopLog.Do(func() { r.rep.log.LogAttrs(ctx, slog.LevelInfo, "cron runtime stopped") })
	return nil
}
