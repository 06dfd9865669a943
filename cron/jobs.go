package cron

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/wakuwaku-go/wakuwaku/interval"
)

// This file holds the jobs that change while the runtime runs: Add,
// Remove, Replace, and Jobs, which lists them.

// ErrNoJob is [ErrUnknownJob], the one error of a job that doesn't exist.
//
// Deprecated: use ErrUnknownJob; this name goes in the next release.
var ErrNoJob = ErrUnknownJob

// ErrRemoved is the cause of a run's context when [Runtime.Remove] gave
// up waiting for it: context.Cause(ctx) returns it inside the job.
var ErrRemoved = errors.New("cron: job removed")

// Add checks job and starts it in the running runtime, as [Start] starts
// its jobs: its startup run begins at once (unless its interval is
// interval.Interval.WithoutStartupRun), then its schedule. It costs the
// runtime O(log n) for n jobs; an [Admission] that [WithAdmission] gave
// for its name applies to it.
//
// A [Leased] job added on one replica and not yet on the others runs every
// slot there alone, as during a rolling deploy; the replicas that add it
// later share its record, and its slots, from their next tick on. With
// [LeaseConfig.CatchUp] it catches up as at a start.
//
// Add returns an error wrapping [ErrInvalidJob] for a job that Start would
// refuse, and one whose name or lease name another job of the runtime has;
// an error wrapping [ErrShutdown] once Shutdown was called.
func (r *Runtime) Add(job Job) error {
	e := new(entry)
	every, err := r.newEntry(e, func() string { return "the job" }, job)
	if err != nil {
		return err
	}
	r.mu.Lock()
	if r.stopped.Load() {
		r.mu.Unlock()
		return fmt.Errorf("%w: Add(%q) after Shutdown", ErrShutdown, e.name)
	}
	if err := r.register(e, every, true); err != nil {
		r.mu.Unlock()
		return err
	}
	now := r.now()
	first := false
	if at, ok := every.First(now); ok {
		due := now.UnixNano() // the startup run, which is not spread
		if !at.Equal(now) {
			due = e.due(at)
		}
		first = r.requeue(e, due)
	}
	r.mu.Unlock()
	if first {
		r.wakeUp()
	}
	if r.rep.log.Enabled(r.ctx, slog.LevelInfo) {
		r.rep.log.LogAttrs(r.ctx, slog.LevelInfo, "cron job added",
			slog.String("job", e.name), slog.String("interval", every.String()))
	}
	if e.admit != nil && e.admit.state != nil {
		r.leased.startRecords(r.ctx, now, []*entry{e}, true)
	}
	return nil
}

// Remove stops the job named name: no tick of it starts a run any more,
// at once, and it leaves the runtime's list. It costs the runtime
// O(log n) for n jobs.
//
// Its runs in progress go on: Remove waits for them to return, and
// returns nil once they have. If ctx ends first, Remove cancels their
// contexts, with cause [ErrRemoved], and returns ctx.Err() without waiting
// further; a job that honours its context returns soon after. A Remove
// with a context that is done already cancels them at once. The job's
// name is free again as soon as Remove was called: an Add of a job of that
// name starts it while the removed one's runs end.
//
// A [Leased] job's run records its end as any run does. Its record stays
// in Redis for the replicas that still run the job, and expires a few
// intervals after the last of them removed it.
//
// Remove returns an error wrapping [ErrUnknownJob] if the runtime has no job of
// that name, and one wrapping [ErrShutdown] once Shutdown was called.
func (r *Runtime) Remove(ctx context.Context, name string) error {
	r.mu.Lock()
	if r.stopped.Load() {
		r.mu.Unlock()
		return fmt.Errorf("%w: Remove(%q) after Shutdown", ErrShutdown, name)
	}
	e := r.names()[name]
	if e == nil {
		r.mu.Unlock()
		return fmt.Errorf("%w %q: Remove: the runtime has no job of that name", ErrUnknownJob, name)
	}
	delete(r.byName, name)
	if e.pos >= 0 {
		r.queue.remove(int(e.pos))
	}
	r.release(e.every)
	if e.admit != nil && e.admit.state != nil {
		delete(r.leased.byLease, e.admit.lease)
		e.admit.state.stopRetry()
	}
	e.state.Or(stateRemoved)
	var done chan struct{}
	if e.runs() > 0 || r.offRuns[e] > 0 {
		done = make(chan struct{})
		r.removing[e] = done
	}
	r.mu.Unlock()
	r.rep.log.LogAttrs(ctx, slog.LevelInfo, "cron job removed", slog.String("job", name), slog.Bool("running", done != nil))
	if done == nil {
		return nil
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
	}
	select {
	case <-done: // its runs ended as ctx did: in time
		return nil
	default:
	}
	r.pool.cancel(e, ErrRemoved)
	r.rep.log.LogAttrs(ctx, slog.LevelWarn, "cron job removed; gave up waiting for its runs, whose contexts are cancelled",
		slog.String("job", name))
	return ctx.Err()
}

// Replace puts job in the place of the runtime's job of the same name: a
// new interval, lease config, run deadline or Process from its next tick
// on, without a stop. It costs the runtime O(log n) for n jobs.
//
// The job's next tick is the first its new interval has after now; there
// is no startup run. With a spread ([interval.Interval.WithSpread]), a
// slot that began before now whose due time (its start plus the job's
// offset) is still to come is that first tick: a Replace inside the
// window does not skip the slot. A job whose interval does not change keeps its next
// tick; one whose duration policy ([interval.AtLeast],
// [interval.AfterFinish], [interval.AfterStart]) becomes another keeps
// the part of the old interval that passed: its next tick moves by the
// difference of the two durations, and comes at once if that is past. A
// run in progress goes on, the old job's; like any run, it keeps the
// job's next ticks from overlapping it. A [Leased] job
// whose lease name changes keeps a new record from its next tick on; one
// that keeps it keeps the record, and a slot whose attempt failed, before
// Replace or in the old job's run that goes on, still gets its next
// attempt after the back-off, within the new [LeaseConfig.Attempts].
//
// Replace returns an error wrapping [ErrInvalidJob] for a job that
// [Runtime.Add] would refuse (but for its name, which must be taken),
// one wrapping [ErrUnknownJob] if the runtime has no job of that name, and one
// wrapping [ErrShutdown] once Shutdown was called.
func (r *Runtime) Replace(job Job) error {
	n := new(entry)
	every, err := r.newEntry(n, func() string { return "the job" }, job)
	if err != nil {
		return err
	}
	r.mu.Lock()
	if r.stopped.Load() {
		r.mu.Unlock()
		return fmt.Errorf("%w: Replace(%q) after Shutdown", ErrShutdown, n.name)
	}
	e := r.names()[n.name]
	if e == nil {
		r.mu.Unlock()
		return fmt.Errorf("%w %q: Replace: the runtime has no job of that name", ErrUnknownJob, n.name)
	}
	if err := r.leased.checkLease(n, e); err != nil {
		r.mu.Unlock()
		return err
	}
	var oldState *jobState
	if old := e.admit; old != nil && old.state != nil {
		delete(r.leased.byLease, old.lease)
		oldState = old.state
	}
	// A job that keeps its interval keeps its queued tick: a duration
	// policy's counts from this replica's last run, and counting it from
	// now would let Replaces that come more often than the interval keep
	// the job from running at all.
	keep := e.pos >= 0 && e.every.Interval == every
	now := r.now()
	// A duration policy replaced by another keeps the part of its
	// interval that has passed since its last tick: counted from the
	// Replace, a deploy and its rollback within an interval would put the
	// run off by the time between the last tick and the rollback (seed
	// 40511).
	var moved time.Time
	if d0, ok := durationOf(e.every.Interval, now); ok && !keep {
		if d1, ok := durationOf(every, now); ok {
			if due, ok := r.nextDue(e); ok {
				moved = due.Add(d1 - d0)
				if moved.Before(now) {
					moved = now
				}
			}
		}
	}
	r.release(e.every)
	e.job, e.admit, e.every = n.job, n.admit, r.policyOf(every)
	leased := e.admit != nil && e.admit.state != nil
	if leased {
		r.leased.byLease[e.admit.lease] = e
	}
	if oldState != nil {
		if leased {
			r.leased.keepLook(e, oldState)
		}
		oldState.stopRetry()
	}
	if !e.admit.waits() {
		e.setQuick(false) // its next run tells
	}
	first := false
	switch at, ok := every.WithoutStartupRun().First(now); {
	case keep: // its tick stays where it is
	case !moved.IsZero():
		first = r.requeue(e, moved.UnixNano())
	case ok:
		first = r.requeue(e, dueAfterReplace(e, every, now, at))
	case e.pos >= 0:
		r.queue.remove(int(e.pos))
	}
	r.mu.Unlock()
	if first {
		r.wakeUp()
	}
	if r.rep.log.Enabled(r.ctx, slog.LevelInfo) {
		r.rep.log.LogAttrs(r.ctx, slog.LevelInfo, "cron job replaced",
			slog.String("job", e.name), slog.String("interval", every.String()))
	}
	if leased {
		r.leased.startRecords(r.ctx, now, []*entry{e}, false)
	}
	return nil
}

// Entry is one job of a running [Runtime], as [Runtime.Jobs] lists it.
type Entry struct {
	// Name is the job's name (see [JobName]).
	Name string
	// Job is the job, as given to Start, Add or Replace.
	Job Job
	// Interval is the job's interval.
	Interval interval.Interval
	// Next is when the job's next tick is due, if HasNext. A job has no
	// next tick while a run of an AtLeast or AfterFinish policy goes on
	// (its end says when), and once its schedule has none left.
	Next    time.Time
	HasNext bool
	// Running is how many runs of the job that its schedule started are in
	// progress on this replica.
	Running int
	// Lease is the name of a [Leased] job's lease, which names its record
	// (see [Admin]); "" for another job.
	Lease string
}

// Jobs returns the runtime's jobs, by name, with when each one's next
// tick is due. It holds the scheduler's lock while it copies them: about
// a millisecond per 10,000 jobs. After Shutdown it returns nil.
func (r *Runtime) Jobs() []Entry {
	r.mu.Lock()
	if r.stopped.Load() {
		r.mu.Unlock()
		return nil
	}
	out := make([]Entry, 0, len(r.byName)+len(r.initial))
	all := maps.Values(r.byName)
	if r.byName == nil { // no job was added or removed: Start's
		all = func(yield func(*entry) bool) {
			for i := range r.initial {
				if !yield(&r.initial[i]) {
					return
				}
			}
		}
	}
	for e := range all {
		j := Entry{Name: e.name, Job: e.job, Interval: e.every.Interval, Running: e.runs()}
		j.Next, j.HasNext = r.nextDue(e)
		if e.admit != nil && e.admit.state != nil {
			j.Lease = e.admit.lease
		}
		out = append(out, j)
	}
	r.mu.Unlock()
	slices.SortFunc(out, func(a, b Entry) int { return cmp.Compare(a.Name, b.Name) })
	return out
}

// durationOf returns the duration of a duration policy (whose plan
// counts the next tick from a run, or overlaps runs), and false for a Cron
// spec or the zero Interval.
func durationOf(every interval.Interval, now time.Time) (time.Duration, bool) {
	if p := every.Plan(now, now); !p.AtFinish && !p.Overlap {
		return 0, false
	}
	at, ok := every.WithoutStartupRun().First(now)
	return at.Sub(now), ok
}

// dueAfterReplace returns when the next tick of e, which Replace just gave
// the Cron spec every at now, is due (Unix nanoseconds): that of the slot
// in progress, if a spread puts its due time after now, else that of the
// next slot, which starts at next. A slot whose start has passed but whose
// ticks have not come is still to run: queued at the next slot's start,
// it would get no claim on a replica replaced inside its window, and a
// rollout that replaces every replica would lose it.
func dueAfterReplace(e *entry, every interval.Interval, now, next time.Time) int64 {
	due := e.due(next)
	// The slot in progress began less than a slot's length ago; look
	// back further, a few times, for a spec whose slots are uneven.
	for back := max(next.Sub(now), time.Second); back <= 48*time.Hour; back *= 4 {
		if cur, ok := every.LatestSlot(now.Add(-back), now); ok {
			if d := e.due(cur.Start); d > now.UnixNano() && d < due {
				due = d
			}
			break
		}
	}
	return due
}
