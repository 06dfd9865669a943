package interval

import (
	"math"
	"sync/atomic"
	"time"
)

// Slot is the stretch of a job's schedule that one run stands for: the run
// of an hourly spec's 14:00 slot covers 14:00 to 15:00. A leased job runs at
// most once per slot across replicas.
//
// The slots of a Cron spec are the same on every replica and across
// restarts: [Slot.Key] names one the same way everywhere. The slots of the
// duration policies belong to one replica's schedule (a slot opens when the
// replica's tick says, and lasts d), so they have no key: the lease of such
// a slot is the job's own, as in the Rust crate's pattern.
//
// The zero Slot is no slot.
type Slot struct {
	// Start is when the slot begins: the instant its wall time first shows
	// in its zone; for a wall time that a daylight-saving change skips,
	// the instant the skipped stretch ends.
	Start time.Time
	// End is when the next slot begins (for a duration policy, Start + d).
	End time.Time

	// wall is the slot's wall date and time in zone, as Unix nanoseconds
	// of the UTC instant with the same fields. zone is nil for a slot
	// without a key.
	wall int64
	zone *time.Location
}

// Key returns the name every replica gives the slot, and true; for a slot
// of a duration policy it returns "" and false.
//
// The name of a slot in UTC (a spec without CRON_TZ on a machine in UTC,
// every "@every" slot) is its instant in RFC 3339, "2026-12-02T14:00:00Z".
// The name of a slot in any other zone is its wall date and time followed by
// the zone's name, "2026-11-01T01:30:00[America/New_York]", so that the two
// instants at which a repeated wall time shows are one slot.
func (s Slot) Key() (string, bool) {
	if s.zone == nil {
		return "", false
	}
	wall := time.Unix(0, s.wall).UTC()
	if s.zone == time.UTC {
		return wall.Format(time.RFC3339Nano), true
	}
	return wall.Format("2006-01-02T15:04:05.999999999") + "[" + s.zone.String() + "]", true
}

// String returns the slot's key, or its start and end for a slot without
// one.
func (s Slot) String() string {
	if key, ok := s.Key(); ok {
		return key
	}
	return s.Start.Format(time.RFC3339Nano) + "/" + s.End.Format(time.RFC3339Nano)
}

// IsZero reports whether s is the zero Slot.
func (s Slot) IsZero() bool {
	return s.Start.IsZero() && s.End.IsZero() && s.zone == nil
}

// ownFraction is the part of a duration policy's slot that its lease lasts
// by default: 11/12, 55 minutes of an hour. The rest is the margin by which
// the lease runs out before the replica's next tick, however the schedules
// of the replicas drift.
const ownFraction = 11.0 / 12.0

// sharedFactor is how many slot lengths the lease of a Cron slot lasts by
// default. The key is the slot's alone, so a long lease costs nothing but
// the key's memory, and it covers replicas whose ticks for one slot are up
// to that far apart.
const sharedFactor = 2

// LeaseEnd returns when the lease taken for a run of the slot ends: Start +
// ttl, however late the lease is taken, so that a slow answer from Redis
// never makes a replica's lease last into its own next slot. A ttl of 0
// asks for the default: for a slot with a key, twice the slot's length; for
// a slot of a duration policy, 11/12 of it (55 minutes of an hour). The
// lease must not be taken once this time has passed: the slot is over for
// it.
func (s Slot) LeaseEnd(ttl time.Duration) time.Time {
	if ttl > 0 {
		return s.Start.Add(ttl)
	}
	length := s.End.Sub(s.Start)
	if s.zone != nil {
		return s.Start.Add(sharedFactor * length)
	}
	return s.Start.Add(max(time.Duration(float64(length)*ownFraction), time.Millisecond))
}

// wallOf returns the wall date and time that t shows in loc, as the UTC
// instant with the same fields.
func wallOf(t time.Time, loc *time.Location) time.Time {
	if loc == time.UTC {
		return t.UTC()
	}
	return t.UTC().Add(time.Duration(periodOf(t, loc).offset) * time.Second)
}

// zonePeriod is a stretch of time in which a zone's clocks keep one offset
// from UTC: from start (inclusive) to end (exclusive), in Unix seconds.
type zonePeriod struct {
	loc        *time.Location
	start, end int64 // math.MinInt64 and math.MaxInt64 when unbounded
	offset     int64 // seconds east of UTC
}

// lastPeriod is the zone period that periodOf found last. A scheduler asks
// about one zone, most often time.Local, again and again; one entry spares
// it time.Location's lookups, and a program that asks about several zones
// in turn only looks them up as before.
var lastPeriod atomic.Pointer[zonePeriod]

// periodOf returns the zone period of loc that t is in.
func periodOf(t time.Time, loc *time.Location) *zonePeriod {
	u := t.Unix()
	if p := lastPeriod.Load(); p != nil && p.loc == loc && p.start <= u && u < p.end {
		return p
	}
	lt := t.In(loc)
	_, offset := lt.Zone()
	p := &zonePeriod{loc: loc, start: math.MinInt64, end: math.MaxInt64, offset: int64(offset)}
	start, end := lt.ZoneBounds()
	if !start.IsZero() {
		p.start = start.Unix()
	}
	if !end.IsZero() {
		p.end = end.Unix()
	}
	lastPeriod.Store(p)
	return p
}

// nearChange reports whether at is within 2*maxOffset after the start of
// the zone period p, or at or after its end: too near a change for the
// fast paths, which assume one offset around at.
func (p *zonePeriod) nearChange(at time.Time) bool {
	u := at.Unix()
	return (p.start != math.MinInt64 && u-p.start <= int64(2*maxOffset/time.Second)) || u >= p.end
}

// maxOffset bounds how far any zone's clock has been from UTC (the widest
// offsets in use are -12h and +14h), with a margin.
const maxOffset = 16 * time.Hour

// occurrence returns the first instant at which loc's clocks show the wall
// time w (its fields read as UTC), and true; or, if loc's clocks skip w (a
// spring-forward change), the instant at which the skipped stretch ends,
// and false.
func occurrence(w time.Time, loc *time.Location) (time.Time, bool) {
	if loc == time.UTC {
		return w, true
	}
	// Walk loc's zone periods from one that surely starts before any
	// instant showing w, in time order: the first period in which w
	// shows holds its first occurrence. A period whose start is already
	// past w's instant in that period's offset began with a jump over w.
	u := w.Add(-maxOffset)
	for range 8 {
		lt := u.In(loc)
		_, offset := lt.Zone()
		start, end := lt.ZoneBounds()
		at := w.Add(-time.Duration(offset) * time.Second)
		if !start.IsZero() && at.Before(start) {
			return start, false
		}
		if end.IsZero() || at.Before(end) {
			return at, true
		}
		u = end
	}
	// Eight zone changes within a day and a half: no real zone has them.
	// Read w in the last offset seen.
	_, offset := u.In(loc).Zone()
	return w.Add(-time.Duration(offset) * time.Second), true
}
