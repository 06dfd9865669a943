package cron

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"time"

	"github.com/wakuwaku-go/wakuwaku/cron/internal/record"
	"github.com/wakuwaku-go/wakuwaku/interval"
	"github.com/wakuwaku-go/wakuwaku/lock"
)

// This file holds one leased run, top to bottom (PROTOCOL.md):
//
//   - tick: the scheduler's tick of the job, or an event that no tick
//     starts (E2 to E5, E13 again, see retry.go), hands the run to
//     Runtime.run (run.go), which calls what follows;
//   - claim: claimRun asks the record whether the run goes ahead (E13's
//     look first, at a Cron slot that another replica owns, then the claim
//     of E1 to E5), and reports a run that does not;
//   - run: Process under the run lease, which lock.WhileHeld extends
//     (run.go);
//   - complete: complete records the run's end (E8), sending it again
//     while Redis does not answer (R13) or its replicas do not acknowledge
//     it (R18);
//   - next event: the claim's and the completion's answers each name what
//     this replica does next, a plan, which then carries out: a look at
//     the slot (E2, E3, E13), an announcement (E6), a follow notice (E14),
//     a requested run (E5).
//
// The run's steps read its runArgs; the next events read only their plan:
// the answer, and the run's job and slot.

// plan is what the answer to a leased run's claim or completion leaves
// this replica to do, which then carries out. The zero plan is nothing.
type plan struct {
	e  *entry
	s  *jobState
	t  *Tick  // the run's tick: its slot, its job's name for the reports
	id string // the slot's id in the record, as the run knew it, if known

	// lookMode is the look at the slot to plan (E2, E3, or E13 once the
	// slot is due), lookIn from now, if looks; lookID is the slot's id
	// in the record as the answer named it.
	looks    bool
	lookMode claimMode
	lookID   string
	lookIn   time.Duration

	// afterRun is E13 once this replica's own run of the job has ended
	// (modeAfterRun); if it can't be planned and skipUnlessLooks, the
	// tick is reported skipped.
	afterRun, skipUnlessLooks bool

	// failed is a claim in mode that Redis did not answer: the slot is
	// looked at again, and the job announced, after a back-off.
	failed bool
	mode   claimMode

	hello   bool // announce the job now (E6): its tick came after its claim window
	follow  bool // publish a follow notice of the slot (E14) before the run
	request bool // a run-now request waits (R12): run it here, or pass it on
}

// look makes n plan a look at its slot, whose record id is id, in d, for
// the event mode.
func (n *plan) look(mode claimMode, id string, d time.Duration) {
	n.looks, n.lookMode, n.lookID, n.lookIn = true, mode, id, d
}

// then carries out n, in the order the protocol asks: the looks first,
// each of which replaces a look at an older slot (see lookAgain), then
// the announcements. A claim that Redis did not answer plans its look
// once the replica's own run ends, if any, before its look again.
func (l *leasedJobs) then(ctx context.Context, n plan) {
	if n.e == nil {
		return
	}
	t := n.t
	if n.afterRun {
		if l.lookAfterRun(n.e, n.s, t.Slot, n.id) {
			msg := msgLookAfterRun
			if n.failed {
				msg = msgLookAfterRunError
			}
			l.rep.log.LogAttrs(ctx, slog.LevelDebug, msg,
				slog.String("job", t.Job), slog.String("slot", t.Slot.String()))
		} else if n.skipUnlessLooks {
			l.rep.skipped(ctx, t, ReasonStillRunning)
		}
	}
	if n.failed {
		l.lookAgainAfterError(&n)
		l.helloAfterError(n.e, n.s)
		return
	}
	if n.hello {
		l.helloNow(n.e, n.s)
	}
	if n.looks {
		l.lookAgain(n.e, n.s, n.lookMode, t.Slot, n.lookID, n.lookIn)
	}
	if n.follow {
		l.announceFollow(ctx, t, n.s)
	}
	if n.request && !l.sched.offSchedule(n.e, modeRequest, interval.Slot{}, "") {
		// R12: this replica no longer runs the job (removed, or shutting
		// down): the request is announced again, for a replica that does.
		l.passRequest(ctx, t, n.s)
	}
}

// claimRun is a leased run's claim (E1 to E5, after E13 for a Cron slot
// this replica does not own): it asks the record whether the run goes
// ahead, and reports and logs it if not. It returns the run lease of a
// run that goes ahead (nil if none), and what the answer leaves this
// replica to do next, for then.
func (l *leasedJobs) claimRun(ctx context.Context, a *runArgs) (*record.RunLease, plan) {
	t, ad, s := &a.tick, a.admit, a.admit.state
	n := plan{e: a.e, s: s, t: t, id: a.slot}
	var c claimed
	claim := true
	var err error
	mode := a.mode
	switch {
	case (mode == modeTick || mode == modeSkip) && s.shared && !s.group.Load().owns(l.replica, s.Name, slotKey(t), l.now()):
		// E13: another replica owns the slot; look whether it claimed it.
		var ok bool
		if c, claim, ok, err = l.lookFirst(ctx, a, s); !ok {
			return nil, plan{}
		}
	case mode == modeLook || mode == modeDue || mode == modeAfterRun:
		// E13 again, after Redis did not answer this replica's tick or
		// look, or its run of the slot lost its lease (R12), or when the
		// slot is due after an early tick: a slot that no replica claimed
		// meanwhile is claimed as its tick would have (E1).
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
			// alone does not lose it (seed 38401). If it can't, the tick
			// is reported skipped, as any other of mode skip. The same
			// look is the tick's look again when Redis did not answer
			// (err, and no answer): lookAgainAfterError plans none for a
			// tick in mode skip.
			n.afterRun = true
			n.skipUnlessLooks = err == nil && !c.quiet && c.recorded == "" && c.run == nil
			c.quiet, c.reason = true, ReasonStillRunning
		}
	}
	if err != nil {
		if a.mode == modeLook {
			// Not a tick: the tick was reported skipped already.
			l.rep.log.LogAttrs(ctx, slog.LevelDebug, "cron job's look at its slot after an outage failed; looking again",
				slog.String("job", t.Job), slog.Time("scheduled", t.Scheduled), slog.Any("error", err))
		} else {
			l.rep.admissionFailed(ctx, ad, t, err)
		}
		n.failed, n.mode = true, a.mode
		return nil, n
	}
	if ad.failures.Load() > 0 {
		l.rep.admissionRecovered(ctx, ad, t)
	}
	if claim && mode == modeTick && c.reason == ReasonTooLate {
		// The replica answered the tick itself, after its slot's claim
		// window: no script ran, so no C2 kept the record alive until
		// the next tick. A start's tick is one (its start sent no E6,
		// counting on the tick's claim): announce the job instead.
		n.hello = true
	}
	if c.recorded != "" {
		// R20: this claim recorded the slot skipped; the other
		// replicas see it recorded.
		l.rep.skipRecorded(ctx, t, c.recorded)
	}
	if c.run == nil {
		if c.early {
			// A tick before the slot's ticks are due (a start's, or a
			// replica's clock ahead of Redis's), which R2 or R3 refused
			// without recording a skip: look at the slot again when they
			// are due, by both clocks (E13, then E1).
			d := max(c.due.Sub(l.now()), c.wait, time.Millisecond)
			l.rep.log.LogAttrs(ctx, slog.LevelDebug, "cron job's tick came before its slot is due; looking again then",
				slog.String("job", t.Job), slog.String("slot", t.Slot.String()), slog.String("reason", c.reason),
				slog.Duration("in", d))
			n.look(modeDue, c.slot, d)
			return nil, n
		}
		switch {
		case c.quiet || c.reason == "" || c.recorded != "":
		case mode == modeRetry || mode == modeFollow:
			// Not a tick: the slot's outcome is its last attempt's, which
			// the history shows; no observer counts a refused look.
			l.rep.lookRefused(ctx, t, mode == modeRetry, c.reason)
		default:
			l.rep.skipped(ctx, t, c.reason)
		}
		if c.follow && c.wait > 0 {
			// R1, R2 for E2 and E3, R6: another look may find the slot's
			// run failed or its back-off passed (E3).
			n.look(modeFollow, c.slot, c.wait+time.Millisecond)
		}
		return nil, n
	}
	if l.rctx.Err() != nil {
		// The claim was on its way when Shutdown gave up waiting and
		// returned: nothing of the runtime runs or is sent after that.
		// Its run lease runs out, and the next claim of the job records
		// the run lost (C1), retried if its attempts allow.
		l.rep.log.LogAttrs(ctx, slog.LevelWarn, msgClaimAfterShutdown,
			slog.String("job", t.Job), slog.String("slot", t.Slot.String()), slog.Uint64("tick", t.Run))
		return nil, plan{}
	}
	t.Attempt, t.Trigger, t.Fence = c.attempt, c.trigger, c.fence
	a.slot = c.slot
	n.follow = offTick(a, s)
	if c.trigger == TriggerRequest && !s.shared {
		// R9: a duration policy's requested run is filed under the
		// record's slot, the last one opened: the tick names it too.
		if ms, err := strconv.ParseInt(c.slot, 10, 64); err == nil {
			start := time.UnixMilli(ms).In(t.Slot.Start.Location())
			t.Slot = interval.Slot{Start: start, End: start.Add(s.Every)}
		}
	}
	return c.run, n
}

// msgClaimAfterShutdown is the Warn line of a claim that won after
// Shutdown gave up waiting for it.
const msgClaimAfterShutdown = "cron job's claim was answered after Shutdown gave up waiting; not run, its run lease runs out by itself"

// msgNotRecorded is the Warn line of a run that returned after Shutdown
// gave up waiting for it.
const msgNotRecorded = "cron job's run returned after Shutdown gave up waiting; not recorded, its run lease runs out by itself"

// complete records the end of a leased job's run in its record (E8, or
// R13 if Redis does not answer), and returns what the record asks for
// next (R12), for then: this replica's retry of the slot after its
// back-off (E2), a follow-up of a slot whose run lease was lost (E3, or
// E13 for a Cron slot's failed run), or a run that an operator requested
// meanwhile (E5).
func (l *leasedJobs) complete(ctx context.Context, a *runArgs, held *record.RunLease, err error, end time.Time) plan {
	t, s := &a.tick, a.admit.state
	n := plan{e: a.e, s: s, t: t, id: a.slot}
	next := a.next
	if a.atFinish {
		next, _ = a.every.Next(t.Started, end)
	}
	if l.rctx.Err() != nil {
		// Shutdown gave up waiting for this run and returned: nothing of
		// the runtime is sent after that. Its run lease runs out, and the
		// next claim of the job records the run lost (C1).
		l.rep.log.LogAttrs(ctx, slog.LevelWarn, msgNotRecorded,
			slog.String("job", t.Job), slog.String("slot", t.Slot.String()), slog.Uint64("tick", t.Run))
		return plan{}
	}
	// The runtime's context ends only when Shutdown gives up: until then
	// the completion goes, whatever became of the run's own context (a
	// Remove may have cancelled it).
	cctx, cancel := context.WithTimeout(l.rctx, s.RunTTL)
	c, cerr := s.complete(cctx, held, t.Attempt, t.Scheduled, err, next)
	cancel()
	if errors.Is(cerr, lock.ErrNotReplicated) {
		// R18: the master has the completion, its replicas may not.
		l.rep.log.LogAttrs(ctx, slog.LevelWarn, "cron job's run was recorded, but not acknowledged by enough replicas; recording it again",
			slog.String("job", t.Job), slog.Uint64("tick", t.Run), slog.Any("error", cerr))
		if c, cerr = l.completeAgain(ctx, a, held, err, next, cerr); cerr != nil {
			l.rep.log.LogAttrs(ctx, slog.LevelWarn, "cron job's run was not acknowledged by enough replicas; a failover may run its slot again",
				slog.String("job", t.Job), slog.Uint64("tick", t.Run), slog.Any("error", cerr))
			return plan{}
		}
	} else if cerr != nil {
		// Part of an outage, which is logged once as it begins (see
		// admissionFailed).
		a.admit.failedSince.CompareAndSwap(0, t.Started.UnixNano())
		level := slog.LevelDebug
		if a.admit.failures.Add(1) == 1 {
			level = slog.LevelError
		}
		l.rep.log.LogAttrs(ctx, level, "cron job's run could not be recorded; trying again while its slot lasts",
			slog.String("job", t.Job), slog.Uint64("tick", t.Run), slog.Any("error", cerr))
		if c, cerr = l.completeAgain(ctx, a, held, err, next, cerr); cerr != nil {
			l.rep.log.LogAttrs(ctx, slog.LevelDebug, "cron job's run was not recorded; its run lease runs out by itself",
				slog.String("job", t.Job), slog.Uint64("tick", t.Run), slog.Any("error", cerr))
			return plan{}
		}
	}
	if !c.held {
		l.rep.log.LogAttrs(ctx, slog.LevelWarn, "cron job's run ended after its run lease was lost",
			slog.String("job", t.Job), slog.Uint64("tick", t.Run))
		// R12: a claim recorded the run lost (C1), or a failover or the
		// record's loss undid the claim, and another replica may have
		// claimed the slot since: a run of it that nobody else knows of.
		// With attempts to spare, look at the slot at once: E3 follows a
		// run or a back-off of it (R1, R5, R6). For a Cron slot whose run
		// did not succeed, E13 first: if the record's loss undid the
		// claim and no replica claimed the slot since (the others' looks
		// came before the loss), L2 claims it as its tick would (E1,
		// R14), which an E3 never does (R4).
		if s.Attempts > 1 && t.Trigger != TriggerRequest {
			mode := modeFollow
			if s.shared && err != nil {
				mode = modeLook
			}
			n.look(mode, a.slot, time.Millisecond)
		}
		return n
	}
	if c.closed {
		l.rep.log.LogAttrs(ctx, slog.LevelWarn, "cron job's slot failed: its claim window ends before its retry would be due",
			slog.String("job", t.Job), slog.String("slot", t.Slot.String()), slog.Int("attempt", t.Attempt))
	}
	if c.open {
		n.look(modeRetry, a.slot, c.backoff)
	}
	n.request = c.wanted
	return n
}

// completeAgain is R13: it sends the completion of a's run again, after a
// back-off that doubles up to a third of the run lease, until Redis
// answers, the slot's claim window and the run lease have both ended
// (a run that outlasted its slot's window holds the job until its lease
// does: recording its end frees the job sooner, seed 6008014), the run
// lease has ended once Shutdown began, or Shutdown gives up waiting (the
// runtime's context ends), and returns the
// last answer: a Shutdown that waits for the run waits for its completion
// too. The first error
// was err. It is R18 too, when err wraps lock.ErrNotReplicated: then the
// first back-off is at most a quarter of the run lease, so that the
// completion reaches a replica promoted meanwhile before the run lease
// that the replica has ends. Until the completion gets through, the record shows the run in
// progress; once its run lease has ended, any claim records it lost (C1)
// and the completion that comes later finds nothing to record.
func (l *leasedJobs) completeAgain(ctx context.Context, a *runArgs, held *record.RunLease, runErr error, next time.Time, err error) (completed, error) {
	s := a.admit.state
	end := a.tick.Slot.LeaseEnd(s.ttl)
	if a.tick.Trigger == TriggerRequest && !s.shared {
		// A duration policy's requested run names the slot last opened,
		// which may have ended (R9): its completion is sent again for as
		// long as a slot's lease from the run's start would last.
		end = interval.Slot{Start: a.tick.Started, End: a.tick.Started.Add(s.Every)}.LeaseEnd(s.ttl)
	}
	// At most a third of the run lease apart (Backoff, if longer), so
	// that the run is recorded soon after Redis is back.
	wait, most := s.backoff, max(s.backoff, s.RunTTL/3)
	if errors.Is(err, lock.ErrNotReplicated) {
		wait, most = min(wait, max(s.RunTTL/4, time.Millisecond)), max(s.RunTTL/3, time.Millisecond)
	}
	for {
		// Once Shutdown began, only the run lease keeps the resends going:
		// a Shutdown that waits does not wait for a slot's window too (an
		// hour's, for an hourly job) while Redis stays away.
		late := !time.Now().Add(wait).Before(held.Deadline())
		if late && (l.stopped.Load() || !l.now().Add(wait).Before(end)) {
			return completed{}, err
		}
		timer := time.NewTimer(wait)
		select {
		case <-timer.C:
		case <-l.rctx.Done():
			timer.Stop()
			return completed{}, err
		}
		cctx, cancel := context.WithTimeout(l.rctx, s.RunTTL)
		var c completed
		c, err = s.complete(cctx, held, a.tick.Attempt, a.tick.Scheduled, runErr, next)
		cancel()
		if err == nil {
			l.rep.log.LogAttrs(ctx, slog.LevelInfo, "cron job's run was recorded after Redis answered again",
				slog.String("job", a.tick.Job), slog.Uint64("tick", a.tick.Run), slog.Bool("held", c.held))
			return c, nil
		}
		wait = min(2*wait, most)
	}
}

// lookAgainAfterError plans E2 or E3 again, a back-off later, after
// Redis did not answer it, so that an outage does not lose a slot that
// still has attempts; and after a tick or look at a Cron slot that Redis
// did not answer, a look at the slot, a back-off later that doubles with
// each failure in a row, before the slot ends: once Redis answers, the
// slot runs late if no replica ran it, and this replica follows the run
// that another replica's late look started (PROTOCOL.md, after the
// transitions; seed 17975).
func (l *leasedJobs) lookAgainAfterError(n *plan) {
	s, slot := n.s, n.t.Slot
	switch {
	case n.mode == modeRetry || n.mode == modeFollow:
		l.lookAgain(n.e, s, n.mode, slot, n.id, s.backoff)
	case (n.mode == modeTick || n.mode == modeLook || n.mode == modeDue || n.mode == modeAfterRun) && s.shared:
		k := uint32(0)
		if n.mode == modeLook {
			k = s.looks.Add(1)
		} else {
			s.looks.Store(0)
		}
		d := min(s.backoff<<min(k, 6), maxBackoff*s.backoff)
		if l.now().Add(d).Before(slot.End) {
			l.lookAgain(n.e, s, modeLook, slot, n.id, d)
		}
	}
}
