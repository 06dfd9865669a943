package cronsim

import (
	"cmp"
	"errors"
	"time"

	"github.com/wakuwaku-go/wakuwaku/crontest"
)

// durationRetried checks I4 for a duration policy's slot whose last run
// failed with attempts left: only the replica that opened the slot knows
// of it, so that replica runs it again after the back-off, if it kept the
// job (a Replace that keeps the record keeps the retry, within the
// attempts of each release it ran meanwhile) from the run on, with Redis
// well, its clock steady and the job not paused, within the slot's lease;
// unless it warned that the slot gets no retry, or another run of the job
// came meanwhile.
func (c *checker) durationRetried(j *Job) {
	backoff := cmp.Or(j.Backoff, time.Second)
	runs := c.runsOf(j.Name)
	for _, s := range c.slots(j) {
		last := s.runs[len(s.runs)-1]
		if last.Err == nil || last.End.IsZero() || !last.Cancelled.IsZero() || errors.Is(last.Err, crontest.ErrKilled) {
			continue
		}
		i := last.Replica
		at, ok := c.arrival(i, last.End, runTTL(j))
		if !ok || at.After(last.End.Add(c.sc.Latencies[i])) {
			continue // not served as it came: the run lease may have lapsed first
		}
		// The back-off doubles for each attempt after the first: at most
		// four times Backoff for the third.
		due := at.Add(4*backoff + tickMargin)
		tried := max(len(s.runs), last.Tick.Attempt)
		first := s.runs[0]
		opened := first.Tick.Slot.Start.Add(-c.offset(first.Replica, first.Start))
		owed := true
		for _, t := range []time.Time{first.Start, last.Start, last.End, due} {
			v := j.Versions[c.version(i, j.Name, t)]
			owed = owed && tried < v.Attempts && due.Before(opened.Add(v.LeaseTTL()-tickMargin))
		}
		for _, e := range c.deploys[i] {
			if at := c.start.Add(e.At); e.Job == j.Name && at.After(last.Start) && at.Before(due) {
				v := j.Versions[e.Version]
				owed = owed && tried < v.Attempts && due.Before(opened.Add(v.LeaseTTL()-tickMargin))
			}
		}
		if !owed || due.After(c.end) || !c.upThrough(i, first.Start, due) || !c.healthy(first.Start, due) ||
			c.frozenDuring(i, last.Start, due) || c.pausedDuring(j.Name, first.Start, due) || c.skewed(first.Start) ||
			c.skewed(due) || c.steppedBetween(first.Start, due) || c.flushed(first.Start, due) {
			continue
		}
		// A replica up meanwhile whose release gives the slot no more
		// attempts than it had may have claimed at its tick and closed it
		// as failed (a rolling deploy that lowers Attempts: the state of
		// S in the claim; PROTOCOL.md, Limits; seed 7008787).
		fewer := false
		for k := range Replicas {
			for _, t := range []time.Time{last.End, due} {
				fewer = fewer || k != i && tried >= j.Versions[c.version(k, j.Name, t)].Attempts && c.upDuring(k, last.End, due)
			}
		}
		if fewer {
			continue
		}
		other := false
		for _, r := range runs {
			other = other || r != last && r.Start.After(last.Start) && r.Start.Before(due)
		}
		if other || c.warned(j.Name, time.Time{}, last.Start, due) {
			continue
		}
		c.add("I4", "retry lost", j.Name, due, "%s was not run again after %s on the replica that opened it, with attempts left, though it kept the job with Redis well",
			s.key, describe(last))
	}
}
