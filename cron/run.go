package cron

import (
	"context"
	"errors"
	"log/slog"
	"runtime/debug"
	"strconv"
	"time"

	"github.com/wakuwaku-go/wakuwaku/cron/internal/record"
	"github.com/wakuwaku-go/wakuwaku/interval"
	"github.com/wakuwaku-go/wakuwaku/lock"
)

// runArgs is a run: what the scheduler decided at its tick, and what a
// worker needs to run it. They are reused (see getRun), so that a tick
// allocates nothing.
type runArgs struct {
	e *entry
	// What the tick read of e, which Replace may change while the run
	// goes on.
	job         Job
	every       *policy
	admit       *admission
	tick        Tick
	atFinish    bool
	next        time.Time // the next tick, if known as the run starts
	mode        claimMode // the event a leased job's claim is for
	slot        string    // the record's id of its slot, for modeRetry and modeFollow
	offSchedule bool      // not a tick of the schedule: E2 to E5 (see offSchedule)
	alone       bool      // run in a goroutine of its own, not in a worker

	// What the scheduler reports about the tick itself.
	skip   string        // the reason, if the tick is skipped
	late   time.Duration // how late the tick was, if it was late
	noMore bool          // the policy has no further tick: the job is done
}

// errGoexit is how a leased job's record reports a run that called
// runtime.Goexit.
var errGoexit = errors.New("cron: the job called runtime.Goexit")

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
				r.complete(ctx, a, held, err, end)
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

	if a.admit.waits() {
		var ok bool
		if held, ok = r.admitRun(ctx, a); !ok {
			return
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
		r.complete(ctx, a, held, err, end)
	}
}

// admitRun asks a run's admission, and a leased job's claim, whether it
// goes ahead, and reports and logs it if not. It returns the run lease of
// a leased job's run.
func (r *Runtime) admitRun(ctx context.Context, a *runArgs) (*record.RunLease, bool) {
	t, ad := &a.tick, a.admit
	if ad.check != nil && a.mode != modeSkip { // a skip runs nothing to admit
		admitted, reason, err := admit(ctx, ad.check, t)
		if err != nil {
			r.rep.admissionFailed(ctx, ad, t, err)
			return nil, false
		}
		if !admitted {
			if ad.failures.Load() > 0 {
				r.rep.admissionRecovered(ctx, ad, t)
			}
			if reason == "" {
				reason = ReasonNotAdmitted
			}
			r.rep.skipped(ctx, t, reason)
			return nil, false
		}
	}
	s := ad.state
	if s == nil {
		if ad.failures.Load() > 0 {
			r.rep.admissionRecovered(ctx, ad, t)
		}
		return nil, true
	}
	var c claimed
	claim := true
	var err error
	mode := a.mode
	switch {
	case (mode == modeTick || mode == modeSkip) && s.shared && !s.group.Load().owns(r.replica, s.Name, slotKey(t), r.now()):
		// E13: another replica owns the slot; look whether it claimed it.
		var ok bool
		if c, claim, ok, err = r.lookFirst(ctx, a, s); !ok {
			return nil, false
		}
	case mode == modeLook || mode == modeDue || mode == modeAfterRun:
		// E13 again, after Redis did not answer this replica's tick or
		// look, or when the slot is due after an early tick: a slot that
		// no replica claimed meanwhile is claimed as its tick would have
		// (E1).
		c, claim, err = s.look(ctx, t)
		c.quiet, mode = a.mode == modeLook, modeTick
	}
	if claim && err == nil {
		c, err = s.claim(ctx, mode, t, a.next, a.slot)
		switch {
		case a.mode == modeLook:
			c.quiet = true // this replica reported the tick skipped already
		case a.mode == modeSkip && c.reason == "":
			// No run holds the job by the record: this replica's own run
			// lost its lease, and its code has returned or was told to.
			// The others' ticks decide the slot; and this replica looks
			// at it once that run has ended (E13), so that a replica left
			// alone does not lose it (seed 38401).
			if r.lookAfterRun(a.e, s, t.Slot, a.slot) {
				c.quiet = true
				r.rep.log.LogAttrs(ctx, slog.LevelDebug, msgLookAfterRun,
					slog.String("job", t.Job), slog.String("slot", t.Slot.String()))
			}
			c.reason = ReasonStillRunning
		}
	}
	if err != nil {
		if a.mode == modeLook {
			// Not a tick: the tick was reported skipped already.
			r.rep.log.LogAttrs(ctx, slog.LevelDebug, "cron job's look at its slot after an outage failed; looking again",
				slog.String("job", t.Job), slog.Time("scheduled", t.Scheduled), slog.Any("error", err))
		} else {
			r.rep.admissionFailed(ctx, ad, t, err)
		}
		r.lookAgainAfterError(a)
		r.helloAfterError(a.e, s)
		return nil, false
	}
	if ad.failures.Load() > 0 {
		r.rep.admissionRecovered(ctx, ad, t)
	}
	if claim && mode == modeTick && c.reason == ReasonTooLate {
		// The replica answered the tick itself, after its slot's claim
		// window: no script ran, so no C2 kept the record alive until
		// the next tick. A start's tick is one (its start sent no E6,
		// counting on the tick's claim): announce the job instead.
		r.helloNow(a.e, s)
	}
	if c.recorded != "" {
		// R20: this claim recorded the slot skipped; the other
		// replicas see it recorded.
		r.rep.skipRecorded(ctx, t, c.recorded)
	}
	if c.run == nil {
		if c.early {
			// A tick before the slot's ticks are due (a start's, or a
			// replica's clock ahead of Redis's), which R2 or R3 refused
			// without recording a skip: look at the slot again when they
			// are due, by both clocks (E13, then E1).
			d := max(c.due.Sub(r.now()), c.wait, time.Millisecond)
			r.rep.log.LogAttrs(ctx, slog.LevelDebug, "cron job's tick came before its slot is due; looking again then",
				slog.String("job", t.Job), slog.String("slot", t.Slot.String()), slog.String("reason", c.reason),
				slog.Duration("in", d))
			r.lookAgain(a.e, s, modeDue, t.Slot, c.slot, d)
			return nil, false
		}
		if !c.quiet && c.reason != "" && c.recorded == "" {
			r.rep.skipped(ctx, t, c.reason)
		}
		r.followUp(a, c)
		return nil, false
	}
	t.Attempt, t.Trigger = c.attempt, c.trigger
	a.slot = c.slot
	if offTick(a, s) {
		r.announceFollow(ctx, a, s)
	}
	if c.trigger == TriggerRequest && !s.shared {
		// R9: a duration policy's requested run is filed under the
		// record's slot, the last one opened: the tick names it too.
		if ms, err := strconv.ParseInt(c.slot, 10, 64); err == nil {
			start := time.UnixMilli(ms).In(t.Slot.Start.Location())
			t.Slot = interval.Slot{Start: start, End: start.Add(s.Every)}
		}
	}
	return c.run, true
}

// slotKey returns the key of t's Cron slot.
func slotKey(t *Tick) string {
	k, _ := t.Slot.Key()
	return k
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

// complete records the end of a leased job's run in its record (E8, or
// R13 if Redis does not answer), and schedules what the record asks for
// next (R12): this replica's retry of the slot after its back-off (E2), or
// a run that an operator requested meanwhile (E5).
func (r *Runtime) complete(ctx context.Context, a *runArgs, held *record.RunLease, err error, end time.Time) {
	t, s := &a.tick, a.admit.state
	next := a.next
	if a.atFinish {
		next, _ = a.every.Next(t.Started, end)
	}
	// Shutdown may have cancelled the run's context: the record is still
	// written, within the run lease.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.RunTTL)
	c, cerr := s.complete(cctx, held, t.Attempt, t.Scheduled, err, next)
	cancel()
	if errors.Is(cerr, lock.ErrNotReplicated) {
		// R18: the master has the completion, its replicas may not.
		r.rep.log.LogAttrs(ctx, slog.LevelWarn, "cron job's run was recorded, but not acknowledged by enough replicas; recording it again",
			slog.String("job", t.Job), slog.Uint64("tick", t.Run), slog.Any("error", cerr))
		if c, cerr = r.completeAgain(ctx, a, held, err, next, cerr); cerr != nil {
			r.rep.log.LogAttrs(ctx, slog.LevelWarn, "cron job's run was not acknowledged by enough replicas; a failover may run its slot again",
				slog.String("job", t.Job), slog.Uint64("tick", t.Run), slog.Any("error", cerr))
			return
		}
	} else if cerr != nil {
		// Part of an outage, which is logged once as it begins (see
		// admissionFailed).
		a.admit.failedSince.CompareAndSwap(0, t.Started.UnixNano())
		level := slog.LevelDebug
		if a.admit.failures.Add(1) == 1 {
			level = slog.LevelError
		}
		r.rep.log.LogAttrs(ctx, level, "cron job's run could not be recorded; trying again while its slot lasts",
			slog.String("job", t.Job), slog.Uint64("tick", t.Run), slog.Any("error", cerr))
		if c, cerr = r.completeAgain(ctx, a, held, err, next, cerr); cerr != nil {
			r.rep.log.LogAttrs(ctx, slog.LevelDebug, "cron job's run was not recorded; its run lease runs out by itself",
				slog.String("job", t.Job), slog.Uint64("tick", t.Run), slog.Any("error", cerr))
			return
		}
	}
	if !c.held {
		r.rep.log.LogAttrs(ctx, slog.LevelWarn, "cron job's run ended after its run lease was lost",
			slog.String("job", t.Job), slog.Uint64("tick", t.Run))
		// R12: a claim recorded the run lost (C1), or a failover or the
		// record's loss undid the claim, and another replica may have
		// claimed the slot since: a run of it that nobody else knows of.
		// With attempts to spare, follow the slot up (E3), as a claim
		// that finds it running does (R1).
		if s.Attempts > 1 && t.Trigger != TriggerRequest {
			r.lookAgain(a.e, s, modeFollow, t.Slot, a.slot, time.Millisecond)
		}
		return
	}
	if c.closed {
		r.rep.log.LogAttrs(ctx, slog.LevelWarn, "cron job's slot failed: its claim window ends before its retry would be due",
			slog.String("job", t.Job), slog.String("slot", t.Slot.String()), slog.Int("attempt", t.Attempt))
	}
	if c.open {
		r.lookAgain(a.e, s, modeRetry, t.Slot, a.slot, c.backoff)
	}
	if c.wanted && !r.offSchedule(a.e, modeRequest, interval.Slot{}, "") {
		// R12: this replica no longer runs the job (removed, or shutting
		// down): the request is announced again, for a replica that does.
		r.passRequest(ctx, a, s)
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
