package interval

import (
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"

	robfig "github.com/robfig/cron/v3"
)

// parser reads specs the way robfig/cron's users write them: five fields, an
// optional leading seconds field, and descriptors such as "@hourly".
var parser = robfig.NewParser(robfig.SecondOptional | robfig.Minute | robfig.Hour |
	robfig.Dom | robfig.Month | robfig.Dow | robfig.Descriptor)

// reference is the instant from which Cron checks that a spec has a slot at
// all. A fixed instant keeps Cron a pure function of its spec.
var reference = time.Date(2000, time.January, 1, 0, 0, 0, 0, time.UTC)

// errNoSlot is why a spec that parses but names no real date (the 30th of
// February) is refused.
var errNoSlot = errors.New("the spec matches no date")

// SpecError is the error [Cron] returns for a spec it cannot use. Its message
// quotes the spec and says what is wrong with it.
type SpecError struct {
	// Spec is the spec as it was given to Cron.
	Spec string
	// Err says what is wrong with it.
	Err error
}

// Error returns a message that quotes the spec and says what is wrong.
func (e *SpecError) Error() string {
	return fmt.Sprintf("interval: invalid cron spec %q: %v", e.Spec, e.Err)
}

// Unwrap returns what is wrong with the spec.
func (e *SpecError) Unwrap() error {
	return e.Err
}

// Cron returns the policy whose runs start at the slots of a crontab spec:
// five fields (minute hour day-of-month month day-of-week), an optional
// leading seconds field, or a descriptor ("@yearly", "@monthly", "@weekly",
// "@daily", "@hourly", "@every 1h30m"), optionally after a "CRON_TZ=Zone "
// prefix that names the IANA time zone of the slots. A slot that comes while
// the job's previous run is still going is skipped, not queued.
//
// Cron returns a *[SpecError] if the spec does not parse, names an unknown
// time zone, or matches no date (such as "0 0 30 2 *"). It never panics.
func Cron(spec string) (Interval, error) {
	sched, err := parse(spec)
	if err != nil {
		return Interval{}, &SpecError{Spec: spec, Err: err}
	}
	i := Interval{kind: cronSpec, spec: spec, sched: sched}
	if _, ok := i.NextSlot(reference); !ok {
		return Interval{}, &SpecError{Spec: spec, Err: errNoSlot}
	}
	return i, nil
}

// MustCron is like [Cron] but panics if the spec is invalid. It is meant for
// package-level policies built from constant specs.
func MustCron(spec string) Interval {
	i, err := Cron(spec)
	if err != nil {
		panic(err)
	}
	return i
}

// parse reads spec with robfig's parser. The parser assumes a time zone
// prefix is followed by a space and fails hard when it is not, so parse
// splits the prefix off itself and hands the parser a well-formed one.
func parse(spec string) (sched schedule, err error) {
	defer func() {
		// Cron promises not to panic whatever the spec; a parser bug we
		// have not met yet is reported as an invalid spec.
		if v := recover(); v != nil {
			sched, err = nil, fmt.Errorf("the parser failed: %v", v)
		}
	}()
	text := spec
	if prefix, zone, rest, ok := cutZone(spec); ok {
		rest = strings.TrimSpace(rest)
		switch {
		case zone == "":
			return nil, fmt.Errorf("%s needs a time zone name", prefix)
		case rest == "":
			return nil, fmt.Errorf("%s%s is not followed by a schedule", prefix, zone)
		}
		text = prefix + zone + " " + rest
	}
	return parser.Parse(text)
}

// cutZone splits a "CRON_TZ=Zone rest" or "TZ=Zone rest" spec into its
// prefix, zone and rest, and reports whether the spec had such a prefix.
func cutZone(spec string) (prefix, zone, rest string, ok bool) {
	for _, p := range []string{"CRON_TZ=", "TZ="} {
		after, found := strings.CutPrefix(spec, p)
		if !found {
			continue
		}
		end := strings.IndexFunc(after, unicode.IsSpace)
		if end < 0 {
			return p, after, "", true
		}
		return p, after[:end], after[end:], true
	}
	return "", "", "", false
}

// NextSlot returns the first slot of a Cron policy strictly after the given
// time, and true. The slot is in after's location; without a CRON_TZ prefix
// the spec is read in that location's time zone too. It returns false if the policy is not a Cron policy or if its spec
// has no slot within five years of after (robfig/cron's search horizon).
func (i Interval) NextSlot(after time.Time) (time.Time, bool) {
	if i.kind != cronSpec {
		return time.Time{}, false
	}
	slot := i.sched.Next(after)
	// A slot that is not after its input would make a scheduler spin on
	// it, so such an answer is treated as no slot at all.
	if slot.IsZero() || !slot.After(after) {
		return time.Time{}, false
	}
	return slot, true
}

// LatestSlot returns the latest slot of a Cron policy that is after after
// and not after until, and true; false if there is none or the policy is not
// a Cron policy. A scheduler that wakes up late runs that one slot once
// instead of every slot it missed.
func (i Interval) LatestSlot(after, until time.Time) (time.Time, bool) {
	first, ok := i.NextSlot(after)
	if !ok || first.After(until) {
		return time.Time{}, false
	}
	// Look back from until over a window that doubles until it holds a
	// slot; walking forward from there is short, unlike walking from after
	// over every slot of a long stall.
	span := until.Sub(after)
	for back := time.Second; back < span; back *= 2 {
		if slot, ok := i.NextSlot(until.Add(-back)); ok && !slot.After(until) {
			return i.walk(slot, until), true
		}
		if back > span/2 {
			break // doubling again would pass after (or overflow)
		}
	}
	return i.walk(first, until), true
}

// walk returns the last slot from slot on that is not after until.
func (i Interval) walk(slot, until time.Time) time.Time {
	for {
		next, ok := i.NextSlot(slot)
		if !ok || next.After(until) {
			return slot
		}
		slot = next
	}
}
