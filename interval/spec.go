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
// the job's previous run is still going is skipped, not queued. The package
// documentation says how slots are found, across daylight-saving changes
// too, and how "@every" differs from robfig/cron's.
//
// Cron returns a *[SpecError] if the spec does not parse, names an unknown
// time zone, matches no date (such as "0 0 30 2 *"), or is an "@every" whose
// period is under a second or over ten years. It never panics.
//
// Specs are shared by their text: Cron parses a spec once while any
// Interval made from it is in use, and every Cron of the same text returns
// an equal Interval, however many jobs read it from configuration.
func Cron(spec string) (Interval, error) {
	if p := specs.lookup(spec); p != nil {
		return Interval{p: p}, nil
	}
	p, err := parse(spec)
	if err != nil {
		return Interval{}, &SpecError{Spec: spec, Err: err}
	}
	if _, ok := p.nextSlot(reference); !ok {
		return Interval{}, &SpecError{Spec: spec, Err: errNoSlot}
	}
	return Interval{p: specs.keep(spec, p)}, nil
}

// MustCron is like [Cron] but panics if the spec is invalid. It is meant for
// package-level policies built from constant specs; a spec read from
// configuration goes through Cron and its error.
func MustCron(spec string) Interval {
	i, err := Cron(spec)
	if err != nil {
		panic(err)
	}
	return i
}

// parse reads spec into its policy. "@every" is read here, since its slots
// lie on a grid robfig's schedule doesn't have; the rest goes to robfig's
// parser, which assumes a time zone prefix is followed by a space and fails
// hard when it is not, so parse splits the prefix off itself and hands the
// parser a well-formed one.
func parse(spec string) (p slotPolicy, err error) {
	defer func() {
		// Cron promises not to panic whatever the spec; a parser bug we
		// have not met yet is reported as an invalid spec.
		if v := recover(); v != nil {
			p, err = nil, fmt.Errorf("the parser failed: %v", v)
		}
	}()
	text, body := spec, spec
	zoned := false
	if prefix, zone, rest, ok := cutZone(spec); ok {
		rest = strings.TrimSpace(rest)
		switch {
		case zone == "":
			return nil, fmt.Errorf("%s needs a time zone name", prefix)
		case rest == "":
			return nil, fmt.Errorf("%s%s is not followed by a schedule", prefix, zone)
		}
		text, body, zoned = prefix+zone+" "+rest, rest, true
	}
	if period, ok := strings.CutPrefix(body, "@every"); ok {
		return parseEvery(spec, period)
	}
	sched, err := parser.Parse(text)
	if err != nil {
		return nil, err
	}
	fields, ok := sched.(*robfig.SpecSchedule)
	if !ok {
		return nil, fmt.Errorf("unexpected schedule %T", sched)
	}
	// A copy: the spec may be a slice of a larger text (a line of a
	// file), which the policy must not keep alive.
	c := &cronSpec{spec: strings.Clone(spec)}
	if zoned {
		c.zone = fields.Location
	}
	// The spec is matched against wall times, which parse hands it as UTC
	// instants with the same fields: robfig's own arithmetic in a zone
	// runs a repeated wall time twice and skips one that doesn't exist.
	wall := *fields
	wall.Location = time.UTC
	c.wall = &wall
	c.fields = fieldsOf(&wall)
	return c, nil
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
