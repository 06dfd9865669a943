package cron

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"time"

	"github.com/wakuwaku-go/wakuwaku/cron/internal/record"
	"github.com/wakuwaku-go/wakuwaku/interval"
	"github.com/wakuwaku-go/wakuwaku/lock"
)

// run does one run of a.e in a worker: the admission check (and a leased
// job's claim), then Process, then the report (and the claim's
// completion). Whatever happens, even a runtime.Goexit in the job, finished
// is called, so the job keeps its schedule and Shutdown its count. A panic
// in Process is recovered here and reported as a *PanicError.
//
// The Tick, 136 bytes, stays in a and goes by pointer to the functions run
// calls, copied only where the job or the observer gets it; Process is
// called from run itself, whose deferred function calls recover only if
// Process did not return. A goroutine that a straggler's worker hands its
// chunk to starts with a small stack, which that keeps it within.
func (r *Runtime) run(ctx context.Context, a *runArgs) {
	e, t := a.e, &a.tick
	var begin, end time.Time
	var held *record.RunLease
	inProcess := false
	defer func() {
		switch {
		case inProcess:
			// Process panicked, or called runtime.Goexit.
			end = r.now()
			err := errGoexit
			if v := recover(); v != nil {
				err = &PanicError{Value: v, Stack: debug.Stack()}
				r.rep.report(ctx, a, err, end.Sub(begin))
			}
			if held != nil {
				n := r.leased.complete(ctx, a, held, err, end)
				r.leased.then(ctx, n)
			}
		case end.IsZero():
			// A skipped run took no time; and a run whose end nobody
			// needs (see timed) is not timed.
			end = t.Started
		}
		if a.offSchedule {
			r.finishedOffSchedule(e)
		} else {
			r.finished(e, t.Started, end, a.atFinish)
		}
	}()

	if ad := a.admit; ad.waits() {
		if !ad.allows(ctx, &r.rep, a) {
			return
		}
		if ad.state != nil {
			var n plan
			held, n = r.leased.claimRun(ctx, a)
			r.leased.then(ctx, n)
			if held == nil {
				return
			}
		} else if ad.failures.Load() > 0 {
			r.rep.admissionRecovered(ctx, ad, t)
		}
	}

	if r.rep.log.Enabled(ctx, slog.LevelInfo) {
		r.rep.logRunStart(ctx, a)
	}
	if r.rep.observer.RunStarted != nil {
		r.rep.runStarted(t)
	}
	// The clock is read only for whoever needs the run's times: the
	// observer, the logger, a policy that counts from a run's end, a
	// leased job's record, or the choice between a goroutine of its own
	// and the workers (which a run in a worker leaves to its straggler
	// timer).
	timed := a.alone || r.rep.observer.RunFinished != nil || r.rep.log.Enabled(ctx, slog.LevelError)
	if timed {
		begin = r.now()
	}
	inProcess = true
	var err error
	if held != nil || a.admit != nil || r.rep.observer.RunContext != nil {
		err = r.process(ctx, a, held)
	} else {
		err = a.job.Process(ctx, *t)
	}
	inProcess = false
	var took time.Duration
	if timed || a.atFinish || held != nil {
		end = r.now()
	}
	if timed {
		took = end.Sub(begin)
	}
	if a.alone {
		// Only a job without an admission, whose run has nothing but
		// Process to wait for, goes to the workers; and only while it is
		// quick.
		e.setQuick(!a.admit.waits() && took < stragglerAfter)
	}
	r.rep.report(ctx, a, err, took)
	if held != nil {
		n := r.leased.complete(ctx, a, held, err, end)
		r.leased.then(ctx, n)
	}
}

// admit calls an admission, turning a panic into a *PanicError: a broken
// admission fails closed, like one that returns an error. Like run's
// deferred function, it calls recover only when the admission did not
// return.
func admit(ctx context.Context, a Admission, t *Tick) (admitted bool, reason string, err error) {
	returned := false
	defer func() {
		if returned {
			return
		}
		if v := recover(); v != nil {
			admitted, reason, err = false, "", &PanicError{Value: v, Stack: debug.Stack()}
		}
	}()
	admitted, reason, err = a(ctx, *t)
	returned = true
	return admitted, reason, err
}

// allows asks ad's own check (WithAdmission) whether the run a goes
// ahead, and reports and logs it if not. A tick in mode skip runs nothing
// to admit.
func (ad *admission) allows(ctx context.Context, rep *reporter, a *runArgs) bool {
	if ad.check == nil || a.mode == modeSkip {
		return true
	}
	t := &a.tick
	admitted, reason, err := admit(ctx, ad.check, t)
	if err != nil {
		rep.admissionFailed(ctx, ad, t, err)
		return false
	}
	if !admitted {
		if ad.failures.Load() > 0 {
			rep.admissionRecovered(ctx, ad, t)
		}
		if reason == "" {
			reason = ReasonNotAdmitted
		}
		rep.skipped(ctx, t, reason)
		return false
	}
	return true
}

// offSchedule starts a run of e that no tick of its schedule started, for
// the event mode: E2 to E5. slot is the slot it is for, as this replica
// named it (the zero Slot: the one that starts now, as the replica's clock
// says), and id its record id, if known.
//
// The run gets the runtime's context (not that of the run that asked for
// it, which ends with it). It reports whether the run started: not once
// the runtime shuts down or e was removed.
func (r *Runtime) offSchedule(e *entry, mode claimMode, slot interval.Slot, id string) bool {
	r.mu.Lock()
	if r.stopped.Load() || e.state.Load()&stateRemoved != 0 || e.admit == nil || e.admit.state == nil {
		r.mu.Unlock()
		return false
	}
	if mode == modeAfterRun && e.runs() > 0 {
		// The run this look waits for goes on (its completion may be
		// sent again, R13): look later, while the slot's window lasts.
		s := e.admit.state
		if !r.leased.planLook(e, s, mode, slot, id, afterRunPoll(s)) {
			r.mu.Unlock()
			r.rep.skipped(r.ctx, &Tick{Scheduled: slot.Start, Slot: slot, Started: r.now(), Job: e.name, Attempt: 1}, ReasonStillRunning)
			return true
		}
		r.mu.Unlock()
		return true
	}
	now := r.now()
	if slot.IsZero() {
		slot = e.every.Plan(now, now).Slot
	}
	scheduled := now
	if _, shared := slot.Key(); shared {
		scheduled = slot.Start
	}
	e.ticks++
	a := getRun()
	a.e, a.job, a.every, a.admit = e, e.job, e.every, e.admit
	a.offSchedule, a.mode, a.slot = true, mode, id
	a.tick = Tick{Scheduled: scheduled, Slot: slot, Started: now, Job: e.name, Run: e.ticks, Attempt: 1}
	a.next, _ = r.nextDue(e)
	r.offRuns[e]++
	r.inflight.Add(1)
	r.mu.Unlock()
	r.pool.alone(r.ctx, a)
	return true
}

// finishedOffSchedule records the end of a run of e that offSchedule
// started.
func (r *Runtime) finishedOffSchedule(e *entry) {
	r.mu.Lock()
	if r.offRuns[e]--; r.offRuns[e] == 0 {
		delete(r.offRuns, e)
	}
	if e.state.Load()&stateRemoved != 0 {
		r.runEnded(e)
	}
	r.mu.Unlock()
	if r.inflight.Add(-1) == 0 && r.stopped.Load() {
		r.idleOnce.Do(func() { close(r.idle) })
	}
}

// process calls a's Process, for a run that needs more than the call: a
// context from the observer (a trace's span), a deadline, a lease to keep.
// Like run, it calls recover nowhere: a panic goes through it to run's.
func (r *Runtime) process(ctx context.Context, a *runArgs, held *record.RunLease) error {
	if r.rep.observer.RunContext != nil {
		ctx = r.rep.observer.RunContext(ctx, a.tick)
	}
	if a.admit == nil || a.admit.deadline <= 0 {
		return call(ctx, a, held)
	}
	d := a.admit.deadline
	dctx, cancel := context.WithTimeoutCause(ctx, d, ErrRunDeadline)
	defer cancel()
	err := call(dctx, a, held)
	if context.Cause(dctx) != ErrRunDeadline || errors.Is(err, ErrRunDeadline) {
		return err
	}
	if err == nil {
		return fmt.Errorf("%w (%v)", ErrRunDeadline, d)
	}
	return fmt.Errorf("%w (%v): %w", ErrRunDeadline, d, err)
}

// call calls a's Process, under its run lease if held is not nil.
func call(ctx context.Context, a *runArgs, held *record.RunLease) error {
	if held != nil {
		return processHeld(ctx, a.job, &a.tick, held)
	}
	return a.job.Process(ctx, a.tick)
}

// processHeld runs a leased job's Process under its run lease, which
// lock.WhileHeld extends while it runs.
func processHeld(ctx context.Context, j Job, t *Tick, held *record.RunLease) error {
	tick := *t
	_, err := lock.WhileHeld(ctx, held, func(ctx context.Context) (struct{}, error) {
		return struct{}{}, j.Process(ctx, tick)
	})
	return err
}
