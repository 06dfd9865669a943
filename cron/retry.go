package cron

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/wakuwaku-go/wakuwaku/cron/internal/record"
	"github.com/wakuwaku-go/wakuwaku/interval"
	"github.com/wakuwaku-go/wakuwaku/lock"
)

// This file holds the further looks at a leased job's slot that no tick of
// its schedule starts (PROTOCOL.md): E2, the retry of the replica whose
// attempt failed, and E3, the follow-up of a replica whose claim a run in
// progress or a back-off held up; and R13, a completion that Redis did not
// answer. Each looks at one slot, named by its record id, and can never
// open another.

// followUp schedules E3 after a claim that refused a's slot with c, when
// the claim says another look may find the slot's run failed or its
// back-off passed (R1, R2 for E2 and E3, R6).
func (l *leasedJobs) followUp(a *runArgs, c claimed) {
	if !c.follow || c.wait <= 0 {
		return
	}
	l.lookAgain(a.e, a.admit.state, modeFollow, a.tick.Slot, c.slot, c.wait+time.Millisecond)
}

// lookAgain makes this replica claim e's slot, whose record id is id, in
// d for the event mode (E2 or E3), unless it has an earlier look at that
// slot planned already, or a look at a newer slot, or d is past the slot's
// claim window. A replica plans one look per job: a look at a newer slot
// replaces one at an older slot, however much later it comes, since only a
// tick opens a slot and the older one is past once the newer one is named
// (PROTOCOL.md, E2 and E3). s is the record that named the slot: none if e
// was removed since, or replaced by a job that keeps another record.
func (l *leasedJobs) lookAgain(e *entry, s *jobState, mode claimMode, slot interval.Slot, id string, d time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.planLook(e, s, mode, slot, id, d)
}

// msgLookAfterRun is the Debug line of a tick in mode skip that plans
// modeAfterRun.
const msgLookAfterRun = "cron job's tick found its own run's lease lost; looking at its slot once that run ends"

// lookAfterRun plans E13 at e's Cron slot, whose tick came in mode skip
// and found no run holding the job, for when this replica's own run of e
// has ended (modeAfterRun), and reports whether a look at the slot, or at
// a newer one, is planned. It is not if the slot's claim window ends first.
func (l *leasedJobs) lookAfterRun(e *entry, s *jobState, slot interval.Slot, id string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.planLook(e, s, modeAfterRun, slot, id, afterRunPoll(s))
}

// afterRunPoll is how often a look that waits for this replica's own run
// of a job (modeAfterRun) asks whether it ended: the job's back-off, at
// most a second.
func afterRunPoll(s *jobState) time.Duration { return min(s.backoff, time.Second) }

// planLook is lookAgain with l.mu held. It reports whether a look at slot,
// or at a newer one, is planned.
func (l *leasedJobs) planLook(e *entry, s *jobState, mode claimMode, slot interval.Slot, id string, d time.Duration) bool {
	if l.stopped.Load() || e.state.Load()&stateRemoved != 0 || e.admit == nil || e.admit.state == nil {
		return false
	}
	if cur := e.admit.state; cur != s {
		// Replace put a new config in e's place since. Its record is
		// still the slot's if it has the lease name and the kind of
		// slots: its attempts are the slot's to retry (the claim script
		// refuses one beyond the new Attempts), as the replaced job's
		// were.
		if cur.Keys[0] != s.Keys[0] || cur.shared != s.shared {
			return false
		}
		s = cur
	}
	if end := slot.LeaseEnd(s.ttl); !l.now().Add(d).Before(end) {
		// Past its claim window: no claim of the slot can run it. A retry
		// of this replica's failed attempt is the slot's last hope, so
		// its loss is said; a follow-up is another replica's business.
		if mode == modeRetry {
			l.rep.log.Warn("cron job's slot ends before its retry is due; the slot is not retried",
				slog.String("job", e.name), slog.String("slot", slot.String()),
				slog.Time("retry_due", l.now().Add(d)), slog.Time("slot_end", end))
		}
		return false
	}
	at := time.Now().Add(d)
	if s.retry != nil {
		switch {
		case slot.Start.Before(s.retrySlot.Start):
			return true // a look at a newer slot is planned
		case slot.Start.Equal(s.retrySlot.Start) && !s.retryAt.After(at):
			return true // an earlier look at this slot is planned
		}
	}
	if s.retry != nil {
		s.retry.Stop()
	}
	var timer *time.Timer
	timer = time.AfterFunc(d, func() {
		l.mu.Lock()
		current := s.retry == timer
		if current {
			s.retry = nil
		}
		l.mu.Unlock()
		if current {
			l.sched.offSchedule(e, mode, slot, id)
		}
	})
	s.retry, s.retryAt, s.retrySlot, s.retryMode, s.retryID = timer, at, slot, mode, id
	return true
}

// keepLook plans on e, which Replace just gave a new config, the look that
// old, its previous record keeper, had planned, if the new config keeps
// the same record (see planLook): a slot whose attempt failed is retried
// after its back-off whether or not the job was replaced meanwhile. l.mu
// is held.
func (l *leasedJobs) keepLook(e *entry, old *jobState) {
	if old.retry == nil {
		return
	}
	l.planLook(e, old, old.retryMode, old.retrySlot, old.retryID, max(time.Until(old.retryAt), 0))
}

// lookAgainAfterError schedules E2 or E3 again, a back-off later, after
// Redis did not answer it, so that an outage does not lose a slot that
// still has attempts; and after a tick or look at a Cron slot that Redis
// did not answer, a look at the slot, a back-off later that doubles with
// each failure in a row, before the slot ends: once Redis answers, the
// slot runs late if no replica ran it, and this replica follows the run
// that another replica's late look started (PROTOCOL.md, after the
// transitions; seed 17975).
func (l *leasedJobs) lookAgainAfterError(a *runArgs) {
	s := a.admit.state
	switch {
	case a.mode == modeRetry || a.mode == modeFollow:
		l.lookAgain(a.e, s, a.mode, a.tick.Slot, a.slot, s.backoff)
	case (a.mode == modeTick || a.mode == modeLook || a.mode == modeDue || a.mode == modeAfterRun) && s.shared:
		n := uint32(0)
		if a.mode == modeLook {
			n = s.looks.Add(1)
		} else {
			s.looks.Store(0)
		}
		d := min(s.backoff<<min(n, 6), maxBackoff*s.backoff)
		if l.now().Add(d).Before(a.tick.Slot.End) {
			l.lookAgain(a.e, s, modeLook, a.tick.Slot, a.slot, d)
		}
	}
}

// completeAgain is R13: it sends the completion of a's run again, after a
// back-off that doubles up to a third of the run lease, until Redis
// answers, the slot's claim window and the run lease have both ended
// (a run that outlasted its slot's window holds the job until its lease
// does: recording its end frees the job sooner, seed 6008014),
// or the runtime shuts down, and returns the last answer. The first error
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
		if !l.now().Add(wait).Before(end) && !time.Now().Add(wait).Before(held.Deadline()) {
			return completed{}, err
		}
		timer := time.NewTimer(wait)
		select {
		case <-timer.C:
		case <-l.stop:
			timer.Stop()
			return completed{}, err
		}
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.RunTTL)
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
