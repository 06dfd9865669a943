package cronsim

import (
	"errors"
	"slices"
	"strconv"
	"time"

	"github.com/wakuwaku-go/wakuwaku/cron"
	"github.com/wakuwaku-go/wakuwaku/crontest"
	"github.com/wakuwaku-go/wakuwaku/lock"
)

// The invariants of the everyday operations (PROTOCOL.md, "Shutdown" and
// "How a slot ends"): I12 to I15.

// quiet checks I12: no command from a replica's client after its
// Shutdown returned.
func (c *checker) quiet() {
	for _, s := range c.h.AfterShutdown {
		c.add("I12", "command after shutdown", "", s.At, "replica %d sent %s after its Shutdown returned", s.Replica, s.Command)
	}
}

// byName is the replica name the runtime gives replica i, as the history
// names it.
func byName(i int) string { return "replica-" + strconv.Itoa(i) }

// entryOf returns the history's entry of run r of job j, if a read found
// one: a Cron run's by its slot, attempt and replica; a duration policy's
// by its attempt, replica and start (the claim's, by Redis's clock, which
// is the bubble's, a round trip before r began).
func (c *checker) entryOf(j *Job, r *Run) (Entry, bool) {
	key, cronSlot := r.Tick.Slot.Key()
	for _, e := range c.h.Entries[j.Name] {
		if e.By != byName(r.Replica) || e.Try != strconv.Itoa(r.Tick.Attempt) || e.Outcome == "skipped" {
			continue
		}
		if cronSlot && r.Tick.Trigger != cron.TriggerRequest {
			if e.Slot == key {
				return e, true
			}
			continue
		}
		if ms, err := strconv.ParseInt(e.Start, 10, 64); err == nil {
			if d := r.Start.Sub(time.UnixMilli(ms)); d >= -time.Millisecond && d < time.Second {
				return e, true
			}
		}
	}
	return Entry{}, false
}

// ownOutcomes checks I13: a run that returned while its replica ran (or
// its Shutdown waited), with Redis well enough to take its completion
// before the Shutdown's context ended and its run lease ran out, has its
// own outcome in the history, never lost. Its completion goes while
// Shutdown waits, sent again through a blip (R13). Excused: a run whose
// lease may have lapsed before it returned (Redis in trouble, or the
// replica frozen, during it), a Redis that lost the record before a read
// found the entry, and a history short enough to drop it first.
func (c *checker) ownOutcomes(j *Job) {
	if j.Crowd {
		return
	}
	for _, v := range j.Versions {
		if v.History != 0 {
			return // a short history may drop the entry before a read finds it
		}
	}
	ttl := runTTL(j)
	for _, r := range c.runsOf(j.Name) {
		if r.Number < 0 || r.End.IsZero() || errors.Is(r.Err, crontest.ErrKilled) || !r.Cancelled.IsZero() && !r.Cancelled.After(r.End) {
			continue // not seen, going on, killed, or told to stop
		}
		if errors.Is(r.Cause, lock.ErrLeaseLost) || errors.Is(r.Cause, cron.ErrRunDeadline) {
			continue
		}
		// The completion's last chance: the run lease, extended at most a
		// third of it before the run returned or Redis failed, and the
		// Shutdown's context.
		failed := r.End
		for _, b := range c.bad {
			if b.meets(r.End.Add(-ttl/3), r.End) && b.from.Before(failed) {
				failed = b.from
			}
		}
		lim := failed.Add(ttl * 2 / 3)
		for _, op := range c.h.Shutdowns {
			if op.Replica == r.Replica && !op.Deadline.IsZero() && op.At.Before(lim) && op.Deadline.Before(lim) && c.liveThrough(r.Replica, r.Start, op.At) {
				lim = op.Deadline
			}
		}
		// A Shutdown that returned nil after the run had recorded its
		// outcome first, whatever came after.
		upTo := lim
		for _, op := range c.h.Shutdowns {
			if op.Replica == r.Replica && op.Err == nil && !op.Done.IsZero() && !op.Done.Before(r.End) && op.Done.Before(upTo) &&
				c.liveThrough(r.Replica, r.Start, op.Done) {
				upTo = op.Done
			}
		}
		from := r.Start.Add(-ttl)
		if !c.healthy(from, r.End.Add(-ttl/3)) || c.frozenDuring(r.Replica, from, lim) || !c.liveThrough(r.Replica, r.Start, upTo) ||
			c.repliesLost(r.Start, lim) || c.flushed(r.Start, lim) {
			continue
		}
		// A resend comes at most a gap after the last (R13): Redis well
		// that long, with a second to spare, before the last chance.
		gap := resendGap(j) + time.Second
		ok := c.healthyFrom(r.End, gap)
		if ok.Add(gap).After(lim) {
			continue
		}
		e, found := c.entryOf(j, r)
		switch {
		case found && e.Outcome == "lost":
			c.add("I13", "own outcome lost", j.Name, r.End, "%s returned with Redis well from %s, and the history records it lost", describe(r), stamp(ok))
		case !found && c.readAfter(j.Name, lim.Add(time.Second)):
			c.add("I13", "no outcome", j.Name, r.End, "%s returned with Redis well from %s, and no read of the history found its entry", describe(r), stamp(ok))
		}
	}
}

// readAfter reports whether a read of job's history came after t with
// Redis keeping every key from t until it.
func (c *checker) readAfter(job string, t time.Time) bool {
	for _, at := range c.h.HistoryReads[job] {
		if at.After(t) {
			return !c.flushed(t.Add(-time.Hour), at)
		}
	}
	return false
}

// recordedSkip reports whether reason is that of a skip a claim records
// (R20), which the one replica whose claim recorded it reports.
func recordedSkip(reason string) bool {
	return reason == cron.ReasonStillRunning || reason == cron.ReasonPaused
}

// saidOnce checks I14, one outcome per slot, said once: each skip in the
// history is reported (Observer.RunSkipped with its reason) by the replica
// that recorded it, once; no replica reports a skip with a recorded
// skip's reason that the history lacks, but a duration policy's tick that
// came while the replica's own run went on (PROTOCOL.md, "How a slot
// ends": a Warn-only ending); and Admin.Status lists each run once.
// Excused: a replica killed or frozen as its claim's reply came back, and
// a Redis that lost the record before a read found the entry. A claim
// whose reply was lost is sent again, and answers that it recorded the
// skip (C3).
func (c *checker) saidOnce(j *Job) {
	if j.Crowd {
		return
	}
	for _, v := range j.Versions {
		if v.History != 0 {
			return
		}
	}
	shared := j.Versions[0].Policy.Shared()
	entryAt := func(e Entry) time.Time {
		ms, _ := strconv.ParseInt(e.Start, 10, 64)
		return time.UnixMilli(ms).UTC()
	}
	var skips []crontest.Skip
	for _, s := range c.h.Skips {
		if s.Job == j.Name && recordedSkip(s.Reason) {
			skips = append(skips, s)
		}
	}
	matches := func(e Entry, s crontest.Skip) bool {
		if e.By != byName(s.Replica) {
			return false
		}
		at := entryAt(e)
		if d := s.At.Sub(at); d < 0 || d > time.Minute {
			return false
		}
		if key, ok := s.Tick.Slot.Key(); ok && shared {
			return key == e.Slot
		}
		return true
	}
	excused := func(i int, a, b time.Time) bool {
		return c.frozenDuring(i, a, b) || !c.liveThrough(i, a, b) || c.lossBetween(a, b)
	}
	used := make([]bool, len(skips))
	for _, e := range c.h.Entries[j.Name] {
		if e.Outcome != "skipped" {
			continue
		}
		at := entryAt(e)
		n := 0
		for k, s := range skips {
			if matches(e, s) && !used[k] {
				used[k] = true
				n++
				break
			}
		}
		i := replicaIndex(e.By)
		if n == 0 && i >= 0 && !excused(i, at.Add(-time.Second), at.Add(5*time.Second)) {
			c.add("I14", "skip not said", j.Name, at, "the history records slot %s skipped (%s) by %s, who reported no such skip", e.Slot, e.Reason, e.By)
		}
	}
	for k, s := range skips {
		if used[k] {
			continue
		}
		if !shared && c.ownRunAt(j, s.Replica, s.At) {
			continue // a Warn-only ending: its replica's own run holds the interval
		}
		if excused(s.Replica, s.At.Add(-5*time.Second), s.At.Add(time.Second)) || c.flushed(s.At.Add(-time.Minute), c.nextRead(j.Name, s.At)) {
			continue
		}
		if !c.readAfter(j.Name, s.At.Add(time.Second)) {
			continue
		}
		c.add("I14", "skip said, not recorded", j.Name, s.At, "replica %d reported slot %s skipped (%s), and the history has no such skip of it",
			s.Replica, s.Tick.Slot, s.Reason)
	}
}

// listedOnce is I14's Admin.Status check.
func (c *checker) listedOnce() {
	for _, l := range c.h.Listed {
		c.add("I14", "listed twice", "", c.end, "Admin.Status listed a run twice: %s", l)
	}
}

// ownRunAt reports whether replica i had a run of j going at t.
func (c *checker) ownRunAt(j *Job, i int, t time.Time) bool {
	for _, r := range c.runsOf(j.Name) {
		if r.Replica == i && !r.Start.After(t) && r.effectiveEnd(c.end).Add(time.Second).After(t) {
			return true
		}
	}
	return false
}

// nextRead returns the first read of job's history after t, or the end.
func (c *checker) nextRead(job string, t time.Time) time.Time {
	for _, at := range c.h.HistoryReads[job] {
		if at.After(t) {
			return at
		}
	}
	return c.end
}

// restartRetried checks I15: a Cron slot whose run a Redis restarted empty
// cut short, with attempts to spare in every release, runs again once
// Redis is back, if the replica that ran it stayed up with the job and
// Redis well, and the job not paused, deployed or replaced, until within
// the slot's claim window and before the next slot begins, whose claim
// makes the slot past (R7) (the look after the run, E13, finds the slot
// none and claims it, R14).
func (c *checker) restartRetried(j *Job) {
	if !j.Versions[0].Policy.Shared() || j.Crowd {
		return
	}
	for _, v := range j.Versions {
		if v.Attempts < 2 {
			return
		}
	}
	for _, e := range c.sc.Events {
		if e.Kind != RedisRestart {
			continue
		}
		at := c.start.Add(e.At)
		for _, r := range c.runsOf(j.Name) {
			if r.Number < 0 || r.Tick.Trigger == cron.TriggerRequest || !r.Start.Before(at) || !r.effectiveEnd(c.end).After(at) {
				continue
			}
			if r.Err == nil && r.Cancelled.IsZero() {
				continue // it returned well: its slot's work is done, though unrecorded
			}
			v := j.Versions[c.version(r.Replica, j.Name, at)]
			owed := c.healthyFrom(at.Add(e.D+time.Nanosecond), time.Minute).Add(time.Minute + 2*runTTL(j))
			// Before the next slot begins: its claim makes this one past
			// (R7), as a retry must come within its slot (I4).
			end := earlier(v.LeaseEnd(r.Tick.Slot), r.Tick.Slot.End)
			if !owed.Before(end) || owed.After(c.end) || !c.upThrough(r.Replica, r.Start, owed) || c.frozenDuring(r.Replica, r.Start, owed) ||
				!c.healthy(at.Add(e.D+time.Nanosecond), owed) || c.flushed(at.Add(time.Nanosecond), owed) || c.pausedDuring(j.Name, r.Start, owed) ||
				c.replacedNear(r.Replica, j.Name, r.Start, owed) || c.skewed(at) || c.steppedBetween(r.Start, owed) {
				continue
			}
			again := false
			for _, q := range c.runsOf(j.Name) {
				if q.Start.After(at) && q.Tick.Slot.Start.Equal(r.Tick.Slot.Start) {
					again = true
					break
				}
			}
			if !again {
				c.add("I15", "not run again", j.Name, owed, "Redis restarted empty at %s in %s, with attempts to spare, and the slot did not run again by %s",
					stamp(at), describe(r), stamp(owed))
			}
		}
	}
}

// overruns checks R2's other half (I10, "overrun ran"): a Cron slot whose
// ticks were due while an earlier run held the job is skipped by every
// replica, even one whose tick or look comes after that run ended; no run
// of its schedule takes it. The due time is the slot's start plus the
// job's offset into it in the release that ran it, and the earlier run one
// that returned well (its end recorded as it came), the last run to begin
// before the slot's run (R2 reads the record's last run), began at least 50 ms
// before the due time and ended at least 50 ms after it, its end
// recorded before the slot's claim (sent again after an outage, R13), with
// Redis keeping the record throughout.
func (c *checker) overruns(j *Job) {
	if !j.Versions[0].Policy.Shared() {
		return
	}
	runs := c.runsOf(j.Name)
	for _, r := range runs {
		key, ok := r.Tick.Slot.Key()
		if !ok || r.Tick.Trigger != cron.TriggerSchedule {
			continue
		}
		// The due time that the claim sent (ARGV[16]): its release's.
		due := j.Versions[r.Version].Interval(false).Due(j.Name, r.Tick.Slot.Start)
		for _, q := range runs {
			if q == r || q.End.IsZero() || errors.Is(q.Err, crontest.ErrKilled) || !q.Cancelled.IsZero() || q.Number < 0 {
				continue
			}
			if k, _ := q.Tick.Slot.Key(); k == key && q.Tick.Trigger != cron.TriggerRequest {
				continue
			}
			if !q.Start.Before(due.Add(-50*time.Millisecond)) || !q.End.After(due.Add(50*time.Millisecond)) || !q.End.Before(r.Start) {
				continue
			}
			// R2 reads the last run (the record's last): none began since.
			if slices.ContainsFunc(runs, func(p *Run) bool { return p.Start.After(q.Start) && p.Start.Before(r.Start) }) {
				continue
			}
			// Its end recorded before the slot's claim: sent as it came, or
			// again after an outage (R13), with the record kept.
			at, ok := c.eventualArrival(q.Replica, q.End, runTTL(j))
			if !ok || !at.Before(r.Start) || c.flushed(q.Start.Add(-runTTL(j)), r.Start) || c.lossBetween(q.Start.Add(-runTTL(j)), r.Start) ||
				!c.healthy(q.Start.Add(-runTTL(j)), q.End.Add(-runTTL(j)/3)) ||
				c.skewed(due) || c.steppedBetween(q.Start.Add(-time.Hour), r.Start) {
				continue
			}
			c.add("I10", "overrun ran", j.Name, r.Start, "slot %s was due at %s while %s held the job, and it ran: %s",
				key, stamp(due), describe(q), describe(r))
			break
		}
	}
}
