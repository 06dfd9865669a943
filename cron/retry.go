package cron

import (
	"log/slog"
	"time"

	"github.com/wakuwaku-go/wakuwaku/interval"
)

// This file holds the further looks at a leased job's slot that no tick of
// its schedule starts (PROTOCOL.md): E2, the retry of the replica whose
// attempt failed, and E3, the follow-up of a replica whose claim a run in
// progress or a back-off held up; and R13, a completion that Redis did not
// answer. Each looks at one slot, named by its record id, and can never
// open another.

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
// modeAfterRun, and msgLookAfterRunError that of one that Redis did not
// answer.
const (
	msgLookAfterRun      = "cron job's tick found its own run's lease lost; looking at its slot once that run ends"
	msgLookAfterRunError = "cron job's tick got no answer while its own run goes on; looking at its slot once that run ends"
)

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
