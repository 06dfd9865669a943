package interval

import (
	"fmt"
	"math"
	"time"

	robfig "github.com/robfig/cron/v3"
)

// cronSpec is a field spec ("30 1 * * *", "@daily"), whose slots are the
// wall times it matches, in its zone.
type cronSpec struct {
	spec string
	// wall matches wall times, read as UTC instants with the same fields.
	wall *robfig.SpecSchedule
	// zone is the spec's CRON_TZ zone; nil reads the spec in the zone of
	// the time it is asked about.
	zone *time.Location
	// fields is wall's bit fields, for the fast path of nextWall and
	// startsAt.
	fields fields
}

// maxSteps bounds nextSlot's search past wall times that already showed:
// one or two steps are all a real zone needs.
const maxSteps = 64

// nextSlot finds the first slot after after. It walks the wall times the
// spec matches, from the one after's clock shows, and maps each to an
// instant: a wall time that shows twice (fall back) is its first instant,
// so the second is not a slot; one that never shows (spring forward) is
// the end of the skipped stretch, so it runs right after the change. The
// first that maps to an instant after after is the slot.
func (c *cronSpec) nextSlot(after time.Time) (Slot, bool) {
	loc, key := c.zone, c.zone
	if loc == nil {
		loc, key = after.Location(), time.UTC
	}
	w := wallOf(after, loc)
	if s, ok := c.nextSlotSteady(after, w, loc, key); ok {
		return s, true
	}
	for range maxSteps {
		next := c.nextWall(w)
		if next.IsZero() {
			return Slot{}, false
		}
		at, exact := occurrence(next, loc)
		if at.After(after) {
			s := Slot{Start: at.In(after.Location()), zone: key, wall: next.UnixNano()}
			if key == time.UTC && loc != time.UTC {
				// A spec without a zone is named by its instant.
				s.wall = at.UnixNano()
			}
			return s, true
		}
		w = pastShown(next, at, exact, after, loc)
	}
	return Slot{}, false
}

// nextSlotSteady is nextSlot's fast path, for the usual case: the next
// wall time that matches shows in the zone period that after is in, far
// enough from its start that it cannot have shown in the period before. It
// reports false when the slow path must decide.
func (c *cronSpec) nextSlotSteady(after, w time.Time, loc, key *time.Location) (Slot, bool) {
	next := c.nextWall(w)
	if next.IsZero() {
		return Slot{}, false
	}
	at := next // in UTC, the wall time is the instant
	if loc != time.UTC {
		at = next.Add(after.Sub(w)) // the offset of after's period
		if periodOf(after, loc).nearChange(at) {
			return Slot{}, false
		}
	}
	s := Slot{Start: at.In(after.Location()), zone: key, wall: next.UnixNano()}
	if key == time.UTC && loc != time.UTC {
		s.wall = at.UnixNano() // a spec without a zone is named by its instant
	}
	return s, true
}

// pastShown returns the wall time from which nextSlot goes on when the
// wall time next first showed at at, not after after: after lies in a
// stretch of wall times that the clocks show a second time (fall back). The
// wall times up to the end of at's zone period all showed in it, before
// after, so the search goes on from there.
func pastShown(next, at time.Time, exact bool, after time.Time, loc *time.Location) time.Time {
	w := next
	if exact {
		lt := at.In(loc)
		_, offset := lt.Zone()
		if _, end := lt.ZoneBounds(); !end.IsZero() {
			w = end.UTC().Add(time.Duration(offset)*time.Second - time.Nanosecond)
		}
	}
	// Whatever the zone does, never go back, and never behind after's own
	// wall time.
	if shown := wallOf(after, loc); shown.After(w) {
		w = shown
	}
	if next.After(w) {
		w = next
	}
	return w
}

// starBit marks a robfig field that was "*" or "?".
const starBit = 1 << 63

// startsAt returns the slot that starts at t, if t is the first instant of
// a wall time the spec matches and that is plainly so: far from a zone
// change. It is Plan's fast path for a tick due at its slot; false means
// "look it up".
func (c *cronSpec) startsAt(t time.Time) (Slot, bool) {
	loc, key := c.zone, c.zone
	if loc == nil {
		loc, key = t.Location(), time.UTC
	}
	w := wallOf(t, loc)
	if u := w.Unix(); u < 0 || w.Nanosecond() != 0 || !c.fields.matches(u) {
		return Slot{}, false
	}
	if loc != time.UTC {
		if periodOf(t, loc).nearChange(t) {
			return Slot{}, false
		}
	}
	s := Slot{Start: t, zone: key, wall: w.UnixNano()}
	if key == time.UTC {
		s.wall = t.UnixNano()
	}
	return s, true
}

// plan is Plan for a field spec: the run belongs to the latest slot at or
// before now, which for a tick due at a slot and handled before the next is
// that slot; the next tick is the slot after it. A tick that comes before
// any slot of the spec (a startup run) has a slot of its own.
func (c *cronSpec) plan(due, now time.Time) Plan {
	if p, ok := c.planSteady(due, now); ok {
		return p
	}
	return c.planSlow(due, now)
}

// planSteady is plan's fast path, for the ticks of a job due every second
// or every few minutes: due is a slot, far from a zone change, and the next
// slot comes within due's hour of wall time, in the same zone period, after
// now. It works in Unix seconds, and reports false when planSlow must
// decide.
func (c *cronSpec) planSteady(due, now time.Time) (Plan, bool) {
	loc, key := c.zone, c.zone
	if loc == nil {
		loc, key = due.Location(), time.UTC
	}
	if due.Nanosecond() != 0 {
		return Plan{}, false
	}
	u, offset, end := due.Unix(), int64(0), int64(math.MaxInt64)
	if loc != time.UTC {
		p := periodOf(due, loc)
		if p.nearChange(due) {
			return Plan{}, false
		}
		offset, end = p.offset, p.end
	}
	w := u + offset // due's wall time, read as UTC
	if w < 0 || !c.fields.matches(w) {
		return Plan{}, false
	}
	nw, ok := c.fields.nextInHour(w)
	n := nw - offset
	if !ok || n >= end {
		return Plan{}, false
	}
	next := time.Unix(n, 0).In(due.Location())
	if !next.After(now) {
		return Plan{}, false // the tick came late
	}
	slot := Slot{Start: due, End: next, zone: key, wall: w * int64(time.Second)}
	if key == time.UTC {
		slot.wall = u * int64(time.Second) // a spec without a zone is named by its instant
	}
	return Plan{Scheduled: due, Slot: slot, Next: next, HasNext: true}, true
}

// planSlow is plan for any tick.
func (c *cronSpec) planSlow(due, now time.Time) Plan {
	slot, ok := c.startsAt(due) // the fast way, allowed to say "don't know"
	if !ok {
		slot, ok = c.nextSlot(due.Add(-time.Nanosecond)) // due's own slot, when due is one
	}
	var next Slot
	var hasNext bool
	switch {
	case !ok:
		slot, _ = c.ownSlot(due)
	case slot.Start.After(now):
		// due is not a slot (the startup tick): the run belongs to the
		// slot that now is in, or is one of its own before the first.
		next, hasNext = slot, true
		if latest, found := latestSlot(c, now.AddDate(-5, 0, 0), now); found {
			slot = latest
		} else {
			slot, _ = c.ownSlot(due)
		}
	default:
		next, hasNext = c.nextSlot(slot.Start)
		if hasNext && !next.Start.After(now) {
			// Later slots have passed too: the tick came late, and runs
			// the latest of them.
			slot, _ = latestSlot(c, slot.Start, now)
			next, hasNext = c.nextSlot(slot.Start)
		}
	}
	p := Plan{Scheduled: due, Slot: slot, Late: slot.Start.After(due)}
	if p.Late {
		p.Scheduled = slot.Start
	}
	if !hasNext {
		p.Slot.End = slot.Start.Add(time.Hour)
		return p
	}
	p.Slot.End, p.Next, p.HasNext = next.Start, next.Start, true
	return p
}

// ownSlot is the slot of a tick before any slot of the spec, named by its
// time.
func (c *cronSpec) ownSlot(at time.Time) (Slot, bool) {
	zone := c.zone
	if zone == nil {
		zone = time.UTC
	}
	return Slot{Start: at, wall: wallOf(at, zone).UnixNano(), zone: zone}, true
}

func (c *cronSpec) next(prevStart, prevFinish time.Time) (time.Time, bool) {
	return nextFrom(c, prevStart, prevFinish)
}

func (c *cronSpec) after(now time.Time) (time.Time, bool) {
	s, ok := c.nextSlot(now)
	return s.Start, ok
}

func (c *cronSpec) checkLease(time.Duration) error { return nil }
func (c *cronSpec) String() string                 { return fmt.Sprintf("cron %q", c.spec) }

// nextFrom is Next for a policy with slots: the first slot after prevStart
// that is not before prevFinish.
func nextFrom(s slotter, prevStart, prevFinish time.Time) (time.Time, bool) {
	slot, ok := s.nextSlot(prevStart)
	if !ok || !slot.Start.Before(prevFinish) {
		return slot.Start, ok
	}
	// The first slot at or after prevFinish is the first one after the
	// instant just before it.
	slot, ok = s.nextSlot(prevFinish.Add(-time.Nanosecond))
	return slot.Start, ok
}
