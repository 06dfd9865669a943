package interval

import (
	"fmt"
	"time"
)

// kind tells the policies apart. The zero kind is the zero Interval, which
// is no policy at all.
type kind uint8

const (
	none kind = iota
	atLeast
	afterFinish
	afterStart
	cronSpec
)

// Interval is a policy that says when a job's next run starts.
//
// Make one with [AtLeast], [AfterFinish], [AfterStart], [Cron] or [MustCron].
// An Interval is an immutable value: copy it, share it between goroutines and
// keep it in a package-level variable freely. The zero Interval is no policy;
// [Interval.IsZero] reports it, and package cron refuses a job that has it.
//
// Intervals can be compared with ==, but two Cron intervals are equal only
// when they are copies of one value; compare [Interval.String] to compare
// what they say.
type Interval struct {
	kind  kind
	d     time.Duration
	spec  string
	sched schedule
}

// schedule is the one method of a parsed cron spec that the package uses.
type schedule interface {
	Next(time.Time) time.Time
}

// AtLeast returns the policy whose runs never overlap and start at least d
// apart: the next run starts at max(previous start + d, previous finish), so
// a run that took longer than d is followed at once by the next.
//
// AtLeast panics if d is not positive: intervals are built from constants,
// like regexp.MustCompile's patterns, and a wrong one is a programming error.
func AtLeast(d time.Duration) Interval {
	return every(atLeast, "AtLeast", d)
}

// AfterFinish returns the policy whose runs never overlap and whose next run
// starts d after the previous one finished.
//
// AfterFinish panics if d is not positive.
func AfterFinish(d time.Duration) Interval {
	return every(afterFinish, "AfterFinish", d)
}

// AfterStart returns the policy whose next run starts d after the previous
// one started, whether or not that run has finished: runs slower than d
// overlap. The scheduler in package cron bounds how many may overlap.
//
// AfterStart panics if d is not positive.
func AfterStart(d time.Duration) Interval {
	return every(afterStart, "AfterStart", d)
}

func every(k kind, constructor string, d time.Duration) Interval {
	if d <= 0 {
		panic(fmt.Sprintf("interval: %s(%v): the duration must be positive", constructor, d))
	}
	return Interval{kind: k, d: d}
}

// IsZero reports whether i is the zero Interval, which is no policy.
func (i Interval) IsZero() bool {
	return i.kind == none
}

// Period returns the duration of AtLeast, AfterFinish and AfterStart
// policies and true; for a Cron policy and the zero Interval it returns 0
// and false. A lease meant to cover one interval is sized from it.
func (i Interval) Period() (time.Duration, bool) {
	switch i.kind {
	case atLeast, afterFinish, afterStart:
		return i.d, true
	}
	return 0, false
}

// Spec returns the spec of a Cron policy, as it was given to [Cron], and
// true; for any other policy it returns "" and false.
func (i Interval) Spec() (string, bool) {
	if i.kind != cronSpec {
		return "", false
	}
	return i.spec, true
}

// Overlaps reports whether the runs of one job may overlap under i. Only
// [AfterStart] lets them.
func (i Interval) Overlaps() bool {
	return i.kind == afterStart
}

// Next returns when the run after one that started at prevStart and
// finished at prevFinish starts, and true:
//
//   - AtLeast(d): max(prevStart + d, prevFinish);
//   - AfterFinish(d): prevFinish + d (prevStart is not used);
//   - AfterStart(d): prevStart + d (prevFinish is not used, and may be the
//     zero time of a run that has not finished);
//   - Cron: the first slot after prevStart that is not before prevFinish,
//     since the slots in between come while the run is still going. It
//     returns false if the spec has no slot left (see [Interval.NextSlot]).
//
// A run that was skipped counts as one that finished when it started. The
// zero Interval returns the zero time and false.
func (i Interval) Next(prevStart, prevFinish time.Time) (time.Time, bool) {
	switch i.kind {
	case atLeast:
		next := prevStart.Add(i.d)
		if prevFinish.After(next) {
			next = prevFinish
		}
		return next, true
	case afterFinish:
		return prevFinish.Add(i.d), true
	case afterStart:
		return prevStart.Add(i.d), true
	case cronSpec:
		slot, ok := i.NextSlot(prevStart)
		if !ok || !slot.Before(prevFinish) {
			return slot, ok
		}
		// The first slot at or after prevFinish is the first one after the
		// instant just before it.
		return i.NextSlot(prevFinish.Add(-time.Nanosecond))
	}
	return time.Time{}, false
}

// String describes i, for logs: "at least 1h0m0s", "after finish 30s",
// "after start 1m0s", `cron "@hourly"`, or "no interval" for the zero
// Interval.
func (i Interval) String() string {
	switch i.kind {
	case atLeast:
		return "at least " + i.d.String()
	case afterFinish:
		return "after finish " + i.d.String()
	case afterStart:
		return "after start " + i.d.String()
	case cronSpec:
		return fmt.Sprintf("cron %q", i.spec)
	}
	return "no interval"
}
