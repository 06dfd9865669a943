package interval

import (
	"fmt"
	"time"
)

// Interval is a policy that says when a job's runs are due.
//
// Make one with [AtLeast], [AfterFinish], [AfterStart], [Cron] or [MustCron].
// An Interval is an immutable value: copy it, share it between goroutines and
// keep it in a package-level variable freely. The zero Interval is no policy;
// [Interval.IsZero] reports it, and package cron refuses a job that has it.
//
// Intervals can be compared with ==. Two Cron intervals of one spec text
// are equal, since [Cron] shares a parsed spec by its text; two specs that
// say the same in other words ("@hourly", "0 * * * *") are not.
type Interval struct {
	p         policy
	noStartup bool
}

// policy is one kind of Interval. Each lives in a file of its own and
// answers every question about when for its kind; Interval's methods only
// hand the questions on. Implementations must be comparable (a pointer or a
// struct of comparable fields), so that Intervals are.
type policy interface {
	// plan answers Interval.Plan.
	plan(due, now time.Time) Plan
	// next answers Interval.Next.
	next(prevStart, prevFinish time.Time) (time.Time, bool)
	// after returns when the first tick after now is due, for a job without
	// a startup run.
	after(now time.Time) (time.Time, bool)
	// checkLease answers Interval.CheckLease for a positive ttl.
	checkLease(ttl time.Duration) error
	String() string
}

// slotter is a policy whose slots are instants of the calendar, the same on
// every replica: a Cron spec.
type slotter interface {
	// nextSlot returns the first slot that starts after after, without
	// its End, which only the slot after it tells.
	nextSlot(after time.Time) (Slot, bool)
}

// slotPolicy is a policy with calendar slots.
type slotPolicy interface {
	policy
	slotter
}

// withEnd sets the End of a slot that s returned: the start of the slot
// after it, or an hour after its own start if the spec has none.
func withEnd(s slotter, slot Slot) Slot {
	if next, ok := s.nextSlot(slot.Start); ok {
		slot.End = next.Start
	} else {
		slot.End = slot.Start.Add(time.Hour)
	}
	return slot
}

// IsZero reports whether i is the zero Interval, which is no policy.
func (i Interval) IsZero() bool {
	return i.p == nil
}

// WithoutStartupRun returns i for a job that does not run when its runtime
// starts: its first run is the first one its schedule has after the start
// (see [Interval.First]). A nightly report that should not run at every
// deploy wants it:
//
//	var nightly = interval.MustCron("0 3 * * *").WithoutStartupRun()
//
// The zero Interval stays the zero Interval.
func (i Interval) WithoutStartupRun() Interval {
	if i.p != nil {
		i.noStartup = true
	}
	return i
}

// First returns when a job's first tick is due in a runtime that starts at
// now, and true: now itself, since a job runs once at startup, unless
// [Interval.WithoutStartupRun] said otherwise; then the first tick after now
// (now + d for the duration policies, the first slot after now for a Cron
// spec). It returns false if there is no such tick (a spec with no slot
// left) and for the zero Interval.
func (i Interval) First(now time.Time) (time.Time, bool) {
	switch {
	case i.p == nil:
		return time.Time{}, false
	case i.noStartup:
		return i.p.after(now)
	}
	return now, true
}

// Plan is what a scheduler does at one tick of a job: the slot the run
// belongs to, and when the next tick is due. [Interval.Plan] makes it.
type Plan struct {
	// Scheduled is when the run was due: the tick's due time, or, for a
	// tick of a Cron spec that came after later slots had passed, the
	// latest of them.
	Scheduled time.Time
	// Slot is the slot the run belongs to.
	Slot Slot
	// Late reports that the tick came so late that it stands for ticks
	// that were missed; its run is the one run for them all.
	Late bool
	// Overlap reports that the run may start while earlier runs of the job
	// are still going ([AfterStart]); under any other policy a tick that
	// comes during a run is skipped.
	Overlap bool
	// Next is when the next tick is due, if HasNext: known as this run
	// starts, whatever it does.
	Next    time.Time
	HasNext bool
	// AtFinish reports that the next tick is known only when this run has
	// finished ([AtLeast], [AfterFinish]): it is due at [Interval.Next] of
	// the run's start and finish. If neither HasNext nor AtFinish is set,
	// the policy has no further tick.
	AtFinish bool
}

// Plan returns what a scheduler does with a tick that was due at due and
// that it handles at now, which is not before due. The startup tick is due
// at the runtime's start. Each policy's answer is stated in the package
// documentation. The zero Interval returns the zero Plan, which has no next
// tick.
func (i Interval) Plan(due, now time.Time) Plan {
	if i.p == nil {
		return Plan{}
	}
	return i.p.plan(due, now)
}

// Next returns when the run after one that started at prevStart and
// finished at prevFinish is due, and true:
//
//   - AtLeast(d): max(prevStart + d, prevFinish);
//   - AfterFinish(d): prevFinish + d (prevStart is not used);
//   - AfterStart(d): prevStart + d (prevFinish is not used, and may be the
//     zero time of a run that has not finished);
//   - Cron: the first slot after prevStart that is not before prevFinish,
//     since the slots in between come while the run is still going. It
//     returns false if the spec has no slot left.
//
// A run that was skipped counts as one that finished when it started. The
// zero Interval returns the zero time and false.
func (i Interval) Next(prevStart, prevFinish time.Time) (time.Time, bool) {
	if i.p == nil {
		return time.Time{}, false
	}
	return i.p.next(prevStart, prevFinish)
}

// NextSlot returns the first slot of a Cron policy that starts strictly
// after the given time, and true. Its times are in after's location; a spec
// without a CRON_TZ prefix is read in that location too. It returns false if
// the policy is not a Cron policy or if its spec has no slot within five
// years of after (robfig/cron's search horizon).
func (i Interval) NextSlot(after time.Time) (Slot, bool) {
	s, ok := i.p.(slotter)
	if !ok {
		return Slot{}, false
	}
	slot, ok := s.nextSlot(after)
	if !ok {
		return Slot{}, false
	}
	return withEnd(s, slot), true
}

// LatestSlot returns the latest slot of a Cron policy that starts after
// after and not after until, and true; false if there is none or the policy
// is not a Cron policy. A scheduler that wakes up late runs that one slot
// once instead of every slot it missed.
func (i Interval) LatestSlot(after, until time.Time) (Slot, bool) {
	s, ok := i.p.(slotter)
	if !ok {
		return Slot{}, false
	}
	slot, ok := latestSlot(s, after, until)
	if !ok {
		return Slot{}, false
	}
	return withEnd(s, slot), true
}

// CheckLease reports whether a lease of ttl taken at each tick can make a
// job run once per slot across replicas: nil if it can, an error saying why
// not otherwise. A ttl of 0 asks for the default, which always can (see
// [Slot.LeaseEnd]). A negative ttl, and for the duration policies a ttl not
// shorter than d, cannot: with a lease as long as the interval, a replica
// would find its own lease of the previous slot still held at its next tick.
// Nor can a ttl not longer than the spread of an Interval
// [Interval.WithSpread]: a job due that far into its slot would find the
// slot's lease over at each of its ticks.
func (i Interval) CheckLease(ttl time.Duration) error {
	switch {
	case i.p == nil:
		return fmt.Errorf("interval: no interval has no lease")
	case ttl < 0:
		return fmt.Errorf("interval: lease TTL %v is negative", ttl)
	case ttl == 0:
		return nil
	}
	return i.p.checkLease(ttl)
}

// String describes i, for logs: "at least 1h0m0s", "after finish 30s",
// "after start 1m0s", `cron "@hourly"`, or "no interval" for the zero
// Interval, followed by ", no startup run" after
// [Interval.WithoutStartupRun].
func (i Interval) String() string {
	if i.p == nil {
		return "no interval"
	}
	if i.noStartup {
		return i.p.String() + ", no startup run"
	}
	return i.p.String()
}

// latestSlot implements LatestSlot for any slotter.
func latestSlot(s slotter, after, until time.Time) (Slot, bool) {
	first, ok := s.nextSlot(after)
	if !ok || first.Start.After(until) {
		return Slot{}, false
	}
	// Look back from until over a window that doubles until it holds a
	// slot; walking forward from there is short, unlike walking from after
	// over every slot of a long stall.
	span := until.Sub(after)
	for back := time.Second; back < span; back *= 2 {
		if slot, ok := s.nextSlot(until.Add(-back)); ok && !slot.Start.After(until) {
			return walk(s, slot, until), true
		}
		if back > span/2 {
			break // doubling again would pass after (or overflow)
		}
	}
	return walk(s, first, until), true
}

// walk returns the last slot from slot on that does not start after until.
func walk(s slotter, slot Slot, until time.Time) Slot {
	for {
		next, ok := s.nextSlot(slot.Start)
		if !ok || next.Start.After(until) {
			return slot
		}
		slot = next
	}
}
