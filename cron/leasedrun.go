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

// claimRun is a leased run's claim (E1 to E5, after E13 for a Cron slot
// this replica does not own): it asks the record whether the run goes
// ahead, reports and logs it if not, and plans the event that comes next
// (a look, a follow-up, an announcement). It returns the run lease of a
// run that goes ahead.
func (l *leasedJobs) claimRun(ctx context.Context, a *runArgs) (*record.RunLease, bool) {
	t, ad, s := &a.tick, a.admit, a.admit.state
	var c claimed
	claim := true
	var err error
	mode := a.mode
	switch {
	case (mode == modeTick || mode == modeSkip) && s.shared && !s.group.Load().owns(l.replica, s.Name, slotKey(t), l.now()):
		// E13: another replica owns the slot; look whether it claimed it.
		var ok bool
		if c, claim, ok, err = l.lookFirst(ctx, a, s); !ok {
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
			if l.lookAfterRun(a.e, s, t.Slot, a.slot) {
				c.quiet = true
				l.rep.log.LogAttrs(ctx, slog.LevelDebug, msgLookAfterRun,
					slog.String("job", t.Job), slog.String("slot", t.Slot.String()))
			}
			c.reason = ReasonStillRunning
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
		l.lookAgainAfterError(a)
		l.helloAfterError(a.e, s)
		return nil, false
	}
	if ad.failures.Load() > 0 {
		l.rep.admissionRecovered(ctx, ad, t)
	}
	if claim && mode == modeTick && c.reason == ReasonTooLate {
		// The replica answered the tick itself, after its slot's claim
		// window: no script ran, so no C2 kept the record alive until
		// the next tick. A start's tick is one (its start sent no E6,
		// counting on the tick's claim): announce the job instead.
		l.helloNow(a.e, s)
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
			l.lookAgain(a.e, s, modeDue, t.Slot, c.slot, d)
			return nil, false
		}
		if !c.quiet && c.reason != "" && c.recorded == "" {
			l.rep.skipped(ctx, t, c.reason)
		}
		l.followUp(a, c)
		return nil, false
	}
	t.Attempt, t.Trigger = c.attempt, c.trigger
	a.slot = c.slot
	if offTick(a, s) {
		l.announceFollow(ctx, a, s)
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

// complete records the end of a leased job's run in its record (E8, or
// R13 if Redis does not answer), and schedules what the record asks for
// next (R12): this replica's retry of the slot after its back-off (E2), or
// a run that an operator requested meanwhile (E5).
func (l *leasedJobs) complete(ctx context.Context, a *runArgs, held *record.RunLease, err error, end time.Time) {
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
		l.rep.log.LogAttrs(ctx, slog.LevelWarn, "cron job's run was recorded, but not acknowledged by enough replicas; recording it again",
			slog.String("job", t.Job), slog.Uint64("tick", t.Run), slog.Any("error", cerr))
		if c, cerr = l.completeAgain(ctx, a, held, err, next, cerr); cerr != nil {
			l.rep.log.LogAttrs(ctx, slog.LevelWarn, "cron job's run was not acknowledged by enough replicas; a failover may run its slot again",
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
		l.rep.log.LogAttrs(ctx, level, "cron job's run could not be recorded; trying again while its slot lasts",
			slog.String("job", t.Job), slog.Uint64("tick", t.Run), slog.Any("error", cerr))
		if c, cerr = l.completeAgain(ctx, a, held, err, next, cerr); cerr != nil {
			l.rep.log.LogAttrs(ctx, slog.LevelDebug, "cron job's run was not recorded; its run lease runs out by itself",
				slog.String("job", t.Job), slog.Uint64("tick", t.Run), slog.Any("error", cerr))
			return
		}
	}
	if !c.held {
		l.rep.log.LogAttrs(ctx, slog.LevelWarn, "cron job's run ended after its run lease was lost",
			slog.String("job", t.Job), slog.Uint64("tick", t.Run))
		// R12: a claim recorded the run lost (C1), or a failover or the
		// record's loss undid the claim, and another replica may have
		// claimed the slot since: a run of it that nobody else knows of.
		// With attempts to spare, follow the slot up (E3), as a claim
		// that finds it running does (R1).
		if s.Attempts > 1 && t.Trigger != TriggerRequest {
			l.lookAgain(a.e, s, modeFollow, t.Slot, a.slot, time.Millisecond)
		}
		return
	}
	if c.closed {
		l.rep.log.LogAttrs(ctx, slog.LevelWarn, "cron job's slot failed: its claim window ends before its retry would be due",
			slog.String("job", t.Job), slog.String("slot", t.Slot.String()), slog.Int("attempt", t.Attempt))
	}
	if c.open {
		l.lookAgain(a.e, s, modeRetry, t.Slot, a.slot, c.backoff)
	}
	if c.wanted && !l.sched.offSchedule(a.e, modeRequest, interval.Slot{}, "") {
		// R12: this replica no longer runs the job (removed, or shutting
		// down): the request is announced again, for a replica that does.
		l.passRequest(ctx, a, s)
	}
}
