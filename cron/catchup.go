package cron

import (
	"context"
	"log/slog"
	"reflect"
	"time"

	"github.com/wakuwaku-go/wakuwaku/interval"
)

// This file holds what a runtime with leased jobs does at its start and
// stop beside the schedules: E4 of PROTOCOL.md, the catch-up of a slot
// every replica missed, E6, the announcement of a job whose first tick is
// to come, and the run-now listeners and retry timers it starts and stops.

// startRecords begins the work beside their schedules of the leased jobs
// entries, which started at now (at the runtime's start, or an Add): the
// catch-up runs, an announcement of each job whose first tick is still to
// come (so that operators see it), and, for a client that has none yet, a
// listener for run-now requests, and the clock check if it is not on yet.
// Replace calls it with catchUp false: a replaced job does not catch up.
func (l *leasedJobs) startRecords(ctx context.Context, now time.Time, entries []*entry, catchUp bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stopped.Load() {
		return
	}
	// Counted under l.mu while not stopped: Shutdown waits for them
	// (see workEnded).
	l.working++
	go func() {
		defer l.workEnded()
		for _, e := range entries {
			if l.stopped.Load() {
				return
			}
			l.mu.Lock()
			every, leased := e.every.Interval, e.admit != nil && e.admit.state != nil
			var s *jobState
			if leased {
				s = e.admit.state
			}
			l.mu.Unlock()
			if !leased {
				continue // replaced by a job without a lease since
			}
			first, _ := every.First(now)
			if catchUp && first.Equal(now) {
				continue // its startup run claims it (a replaced job has none)
			}
			if slot, ok := catchUpSlot(every, s, now); ok && catchUp {
				l.sched.offSchedule(e, modeCatchUp, slot, "")
				continue
			}
			l.hello(ctx, l.lctx, e)
		}
	}()

	// One listener per client, for every leased job whose record it
	// keeps.
	for _, e := range entries {
		s := e.admit.state
		sub, ok := s.C.(subscriber)
		if !ok {
			continue // requests wait for the job's next tick
		}
		var key any = s // a client that can't be a map key gets a listener per job
		if reflect.ValueOf(s.C).Comparable() {
			key = s.C
		}
		if l.listening[key] {
			continue
		}
		l.listening[key] = true
		l.working++
		go l.listen(ctx, l.lctx, sub)
	}
	if !l.watchingSkew {
		l.watchingSkew = true
		l.working += 2
		go l.watchSkew(l.lctx)
		go l.beat(l.lctx)
	}
}

// catchUpSlot returns the slot that the catch-up of a job of interval
// every and record s at a start at now is for, if it catches up: for a
// Cron spec the latest slot that began within its window, for a duration
// policy the zero Slot (the one that starts now; the record says whether
// the last interval ran).
func catchUpSlot(every interval.Interval, s *jobState, now time.Time) (interval.Slot, bool) {
	switch {
	case s.CatchUp <= 0:
		return interval.Slot{}, false
	case !s.shared:
		return interval.Slot{}, true
	}
	return every.LatestSlot(now.Add(-s.CatchUp), now)
}

// helloAgain is how long a replica waits to announce a job again after
// Redis did not answer, doubling up to helloAgainMax.
const helloAgain, helloAgainMax = time.Second, time.Minute

// hello announces e to its record: the replica and its next tick. If
// Redis does not answer, it tries again with back-off while the runtime
// runs e: the announcement keeps the record alive until the job's next
// tick (C2), which after a deploy that lengthened the schedule may come
// after the record's TTL (a paused job whose pause then expired ran:
// simulator seed 3001870).
func (l *leasedJobs) hello(ctx, lctx context.Context, e *entry) {
	l.helloTry(ctx, lctx, e, helloAgain)
}

// helloAfterError announces e again, a back-off later, after Redis did not
// answer one of its claims: whatever the claim was, its C2 did not keep the
// record alive until the job's next tick. A job has one such chain of
// announcements at a time.
func (l *leasedJobs) helloAfterError(e *entry, s *jobState) {
	if s.helloing.CompareAndSwap(false, true) {
		l.helloLater(l.lctx, l.lctx, e, s, helloAgain)
	}
}

// helloNow announces e at once, in a goroutine of the background work,
// unless an announcement is on its way already, and again with back-off
// while Redis does not answer.
func (l *leasedJobs) helloNow(e *entry, s *jobState) {
	if !s.helloing.CompareAndSwap(false, true) {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.spawn(func() { l.helloTry(l.lctx, l.lctx, e, helloAgain) }) {
		s.helloing.Store(false)
	}
}

// helloLater calls helloTry in wait, in a goroutine of the background
// work, if the runtime still runs e with the record s then. Its timer is
// s's, which Shutdown stops.
func (l *leasedJobs) helloLater(ctx, lctx context.Context, e *entry, s *jobState, wait time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stopped.Load() {
		s.helloing.Store(false)
		return
	}
	var timer *time.Timer
	timer = time.AfterFunc(wait, func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		if s.helloTimer != timer {
			return // stopped, or replaced by a newer one
		}
		s.helloTimer = nil
		current := e.state.Load()&stateRemoved == 0 && e.admit != nil && e.admit.state == s && lctx.Err() == nil
		if !current || !l.spawn(func() { l.helloTry(ctx, lctx, e, min(2*wait, helloAgainMax)) }) {
			s.helloing.Store(false)
		}
	})
	if s.helloTimer != nil {
		s.helloTimer.Stop()
	}
	s.helloTimer = timer
}

// helloTry announces e (E6), and plans the announcement again, wait later,
// if Redis does not answer. It runs in a goroutine of the background work.
func (l *leasedJobs) helloTry(ctx, lctx context.Context, e *entry, wait time.Duration) {
	l.mu.Lock()
	next, _ := l.sched.nextDue(e) // none, for a job with no tick to come
	t := Tick{Job: e.name, Scheduled: next, Slot: e.every.Plan(next, next).Slot}
	var s *jobState
	if e.admit != nil {
		s = e.admit.state
	}
	l.mu.Unlock()
	if s == nil {
		return // replaced by a job without a lease since
	}
	hctx, cancel := context.WithTimeout(lctx, helloTimeout)
	defer cancel()
	c, err := s.claim(hctx, modeHello, &t, next, "")
	if err != nil {
		if lctx.Err() == nil {
			l.rep.log.LogAttrs(ctx, slog.LevelDebug, "cron job's record could not be announced; trying again",
				slog.String("job", e.name), slog.Any("error", err), slog.Duration("in", wait))
			s.helloing.Store(true)
			l.helloLater(ctx, lctx, e, s, wait)
			return
		}
		s.helloing.Store(false)
		return
	}
	s.helloing.Store(false)
	// R10: the record's slot, which a run of may yet fail or which waits
	// for another attempt, is this replica's to follow up too (E3).
	if c.follow {
		if slot, ok := slotNamed(e.every.Interval, c.slot, l.now()); ok {
			l.lookAgain(e, s, modeFollow, slot, c.slot, c.wait+time.Millisecond)
		}
	}
}
