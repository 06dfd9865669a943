package interval

import (
	"math/bits"
	"time"

	robfig "github.com/robfig/cron/v3"
)

// The functions here answer the cron spec's two hot questions, "does this
// wall time match?" and "which wall time matches next?", from a wall time's
// Unix seconds and the spec's bit fields, for the common case: a job due
// every second or every few minutes asks once per tick, and robfig's Next
// walks time.Time values field by field. They cover wall times from 1970
// on and the next match within the same hour; everything else goes to
// robfig's Next, which stays the reference (TestNextWallAgreesWithRobfig).

// fields is a spec's bit fields, as robfig parsed them, with what the fast
// path needs to know about them up front.
type fields struct {
	second, minute, hour, dom, month, dow uint64
	// everyDay is set when the day fields match every day of every month:
	// the date need not be computed.
	everyDay bool
}

// allMonths has the bits of the months 1 to 12.
const allMonths = 1<<13 - 1<<1

func fieldsOf(s *robfig.SpecSchedule) fields {
	return fields{
		second: s.Second, minute: s.Minute, hour: s.Hour,
		dom: s.Dom, month: s.Month, dow: s.Dow,
		everyDay: s.Month&allMonths == allMonths && s.Dom&starBit != 0 && s.Dow&starBit != 0,
	}
}

// dayMatches reports whether the wall date of u (Unix seconds of a wall
// time read as UTC, not negative) matches the day fields, by robfig's rule:
// when either of the day-of-month and day-of-week fields is "*", both must
// match; otherwise either may.
func (f *fields) dayMatches(u int64) bool {
	if f.everyDay {
		return true
	}
	_, month, day := time.Unix(u, 0).UTC().Date()
	if f.month&(1<<uint(month)) == 0 {
		return false
	}
	weekday := (u/86400 + 4) % 7 // 1970-01-01 was a Thursday
	dom, dow := f.dom&(1<<uint(day)) != 0, f.dow&(1<<uint(weekday)) != 0
	if f.dom&starBit != 0 || f.dow&starBit != 0 {
		return dom && dow
	}
	return dom || dow
}

// matches reports whether the wall time u (Unix seconds read as UTC, not
// negative) is one the spec matches.
func (f *fields) matches(u int64) bool {
	second, minute, hour := u%60, u/60%60, u/3600%24
	return f.second&(1<<uint(second)) != 0 && f.minute&(1<<uint(minute)) != 0 &&
		f.hour&(1<<uint(hour)) != 0 && f.dayMatches(u)
}

// nextInHour returns the first wall second after u (Unix seconds read as
// UTC, not negative) that the spec matches within u's hour, and true; false
// if there is none, or if u's hour or date does not match.
func (f *fields) nextInHour(u int64) (int64, bool) {
	if f.hour&(1<<uint(u/3600%24)) == 0 || !f.dayMatches(u) {
		return 0, false
	}
	second, minute := u%60, u/60%60
	hourStart := u - second - minute*60
	if f.minute&(1<<uint(minute)) != 0 {
		if s, ok := nextBit(f.second, second+1); ok {
			return hourStart + minute*60 + s, true
		}
	}
	if m, ok := nextBit(f.minute, minute+1); ok {
		if s, ok := nextBit(f.second, 0); ok {
			return hourStart + m*60 + s, true
		}
	}
	return 0, false
}

// nextBit returns the lowest value from from to 59 whose bit is set in
// mask, and true; false if there is none.
func nextBit(mask uint64, from int64) (int64, bool) {
	if from > 59 {
		return 0, false
	}
	rest := mask &^ starBit >> uint(from) << uint(from)
	n := int64(bits.TrailingZeros64(rest))
	return n, n <= 59
}

// nextWall returns the first wall time after w (read as UTC) that the spec
// matches, as robfig's Next does, or the zero time if there is none within
// its search horizon.
func (c *cronSpec) nextWall(w time.Time) time.Time {
	if u := w.Unix(); u >= 0 {
		if n, ok := c.fields.nextInHour(u); ok {
			return time.Unix(n, 0).UTC()
		}
	}
	return c.wall.Next(w)
}
