package interval

import (
	"fmt"
	"time"
)

// AtLeast returns the policy whose runs never overlap and start at least d
// apart: the next run starts at max(previous start + d, previous finish), so
// a run that took longer than d is followed at once by the next.
//
// AtLeast panics if d is not positive: intervals are built from constants,
// like regexp.MustCompile's patterns, and a wrong one is a programming error.
func AtLeast(d time.Duration) Interval {
	return Interval{p: atLeast{positive("AtLeast", d)}}
}

// AfterFinish returns the policy whose runs never overlap and whose next run
// starts d after the previous one finished.
//
// AfterFinish panics if d is not positive.
func AfterFinish(d time.Duration) Interval {
	return Interval{p: afterFinish{positive("AfterFinish", d)}}
}

// AfterStart returns the policy whose next run is due d after the previous
// one was due, whether or not that run has finished: runs slower than d
// overlap. The scheduler in package cron bounds how many may overlap.
//
// AfterStart panics if d is not positive.
func AfterStart(d time.Duration) Interval {
	return Interval{p: afterStart{positive("AfterStart", d)}}
}

func positive(constructor string, d time.Duration) time.Duration {
	if d <= 0 {
		panic(fmt.Sprintf("interval: %s(%v): the duration must be positive", constructor, d))
	}
	return d
}

// ownSlot is the slot of a duration policy that opens at start: it has no
// key, and lasts d.
func ownSlot(start time.Time, d time.Duration) Slot {
	return Slot{Start: start, End: start.Add(d)}
}

// checkShorter is the lease check of the duration policies: a lease as
// long as d would still be held at the replica's next tick.
func checkShorter(ttl, d time.Duration) error {
	if ttl >= d {
		return fmt.Errorf("interval: lease TTL %v is not shorter than the interval %v", ttl, d)
	}
	return nil
}

// atLeast is AtLeast(d). Its next start depends on when a run finishes, so
// a tick's slot opens when the tick is handled: the next one is due d after
// that at the earliest.
type atLeast struct{ d time.Duration }

func (p atLeast) plan(due, now time.Time) Plan {
	return Plan{Scheduled: due, Slot: ownSlot(now, p.d), Late: now.Sub(due) > p.d, AtFinish: true}
}

func (p atLeast) next(prevStart, prevFinish time.Time) (time.Time, bool) {
	next := prevStart.Add(p.d)
	if prevFinish.After(next) {
		next = prevFinish
	}
	return next, true
}

func (p atLeast) after(now time.Time) (time.Time, bool) { return now.Add(p.d), true }
func (p atLeast) checkLease(ttl time.Duration) error    { return checkShorter(ttl, p.d) }
func (p atLeast) String() string                        { return "at least " + p.d.String() }

// afterFinish is AfterFinish(d): like atLeast, scheduled from the finish.
type afterFinish struct{ d time.Duration }

func (p afterFinish) plan(due, now time.Time) Plan {
	return Plan{Scheduled: due, Slot: ownSlot(now, p.d), Late: now.Sub(due) > p.d, AtFinish: true}
}

func (p afterFinish) next(_, prevFinish time.Time) (time.Time, bool) {
	return prevFinish.Add(p.d), true
}

func (p afterFinish) after(now time.Time) (time.Time, bool) { return now.Add(p.d), true }
func (p afterFinish) checkLease(ttl time.Duration) error    { return checkShorter(ttl, p.d) }
func (p afterFinish) String() string                        { return "after finish " + p.d.String() }

// afterStart is AfterStart(d). It counts from when a tick was due, so its
// ticks do not drift by the timer's latency; a tick more than d late runs
// once, and the schedule goes on from when it was handled.
type afterStart struct{ d time.Duration }

func (p afterStart) plan(due, now time.Time) Plan {
	start := due
	late := now.Sub(due) > p.d
	if late {
		start = now
	}
	return Plan{Scheduled: due, Slot: ownSlot(start, p.d), Late: late, Overlap: true,
		Next: start.Add(p.d), HasNext: true}
}

func (p afterStart) next(prevStart, _ time.Time) (time.Time, bool) {
	return prevStart.Add(p.d), true
}

func (p afterStart) after(now time.Time) (time.Time, bool) { return now.Add(p.d), true }
func (p afterStart) checkLease(ttl time.Duration) error    { return checkShorter(ttl, p.d) }
func (p afterStart) String() string                        { return "after start " + p.d.String() }
