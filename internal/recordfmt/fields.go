package recordfmt

import (
	"strconv"
	"strings"
)

// The record's packed fields (cron/PROTOCOL.md, the record), read here
// and nowhere else in Go: the scripts split them with the patterns of
// cron/internal/record's packPatterns, Go with these. The last part of
// each may hold any byte, '|' too: a replica's name, a lease's token. A
// part that is absent is empty.

// RunField is the record's run: token|since|until|try|why|slot|beat|by.
type RunField struct {
	Token, Since, Until, Try, Why, Slot string
	// Beat is when the run was last known alive, empty for a run of the
	// previous release, which has none (cron/PROTOCOL.md, the record); By
	// is its replica.
	Beat, By string
	// Valid is false for no run, or a run of an earlier layout (a token
	// alone), which is none to the scripts: then only the parts that the
	// value has are set, and By is not.
	Valid bool
}

// ParseRun reads a run field.
func ParseRun(v string) RunField {
	p := parts(v, 8)
	r := RunField{Token: p[0], Since: p[1], Until: p[2], Try: p[3], Why: p[4], Slot: p[5]}
	if strings.Count(v, "|") < 6 {
		return r
	}
	r.Valid = true
	if isBeat(p[6], p[1], p[2]) {
		r.Beat, r.By = p[6], p[7]
	} else {
		// The previous release's run, without beat: its replica's name
		// is the rest.
		r.By = strings.SplitN(v, "|", 7)[6]
	}
	return r
}

// isBeat reports whether beat, the seventh part of a run, is one: a
// number of milliseconds from the run's since to its until. A run of the
// previous release has none, and its replica's name may hold a '|'.
func isBeat(beat, since, until string) bool {
	b, err := strconv.ParseInt(beat, 10, 64)
	s, serr := strconv.ParseInt(since, 10, 64)
	u, uerr := strconv.ParseInt(until, 10, 64)
	return err == nil && serr == nil && uerr == nil && s <= b && b <= u
}

// Slot is the record's slot: id|at|state|tries|retry|lease.
type Slot struct {
	ID, At, State, Tries, Retry, Lease string
}

// ParseSlot reads a slot field.
func ParseSlot(v string) Slot {
	p := parts(v, 6)
	return Slot{ID: p[0], At: p[1], State: p[2], Tries: p[3], Retry: p[4], Lease: p[5]}
}

// Skip is the record's skip: at|reason|id|token|by.
type Skip struct {
	At, Reason, ID, Token, By string
}

// ParseSkip reads a skip field.
func ParseSkip(v string) Skip {
	p := parts(v, 5)
	return Skip{At: p[0], Reason: p[1], ID: p[2], Token: p[3], By: p[4]}
}

// Ended is a run that ended, as the record's last or fail holds it:
// last = end|start|slot|try|why|outcome|token|by, fail =
// end|start|slot|try|why|outcome|by (Token empty).
type Ended struct {
	End, Start, Slot, Try, Why, Outcome, Token, By string
}

// parseLast reads a last field.
func parseLast(v string) Ended {
	p := parts(v, 8)
	return Ended{End: p[0], Start: p[1], Slot: p[2], Try: p[3], Why: p[4], Outcome: p[5], Token: p[6], By: p[7]}
}

// parseFail reads a fail field.
func parseFail(v string) Ended {
	p := parts(v, 7)
	return Ended{End: p[0], Start: p[1], Slot: p[2], Try: p[3], Why: p[4], Outcome: p[5], By: p[6]}
}

// Mark is a field of two parts, ms|by: paused, want, seen.
type Mark struct {
	MS, By string
}

// parseMark reads a mark.
func parseMark(v string) Mark {
	p := parts(v, 2)
	return Mark{MS: p[0], By: p[1]}
}

// Fields is a whole record, its packed fields read.
type Fields struct {
	Run                RunField
	Slot               Slot
	Last, Fail         Ended
	FailError          string
	Paused, Want, Seen Mark
	// Born, Next, Good and Every are the fields of one part: when the
	// record was made, the earliest next tick announced, when the last
	// successful run ended, the job's schedule.
	Born, Next, Good, Every string
}

// Parse reads a record's fields, as HGETALL answers them.
func Parse(f map[string]string) Fields {
	return Fields{
		Run:       ParseRun(f["run"]),
		Slot:      ParseSlot(f["slot"]),
		Last:      parseLast(f["last"]),
		Fail:      parseFail(f["fail"]),
		FailError: f["fail.error"],
		Paused:    parseMark(f["paused"]),
		Want:      parseMark(f["want"]),
		Seen:      parseMark(f["seen"]),
		Born:      f["born"],
		Next:      f["next"],
		Good:      f["good"],
		Every:     f["every"],
	}
}

// parts splits a packed field into its n parts, the last of which may
// hold '|'; missing parts are empty.
func parts(v string, n int) []string {
	p := strings.SplitN(v, "|", n)
	for len(p) < n {
		p = append(p, "")
	}
	return p
}
