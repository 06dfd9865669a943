package interval

import (
	"fmt"
	"strings"
	"time"
	"unicode"
)

// The bounds of an "@every" period. Under a second, a lease and its Redis
// round trip would be a good part of the period; past ten years, the
// default lease of a slot (two periods) would no longer be a time.Duration.
const (
	minEvery = time.Second
	maxEvery = 10 * 365 * 24 * time.Hour
)

// every is "@every d": its slots lie on a grid of multiples of d since the
// Unix epoch, 1970-01-01T00:00:00Z, so every replica and every restart
// agrees on them, whenever it started.
type every struct {
	spec string
	d    time.Duration
}

func parseEvery(spec, period string) (slotPolicy, error) {
	if period == "" || !unicode.IsSpace(rune(period[0])) {
		return nil, fmt.Errorf("@every needs a period, as in %q", "@every 1h30m")
	}
	d, err := time.ParseDuration(strings.TrimSpace(period))
	switch {
	case err != nil:
		return nil, err
	case d <= 0:
		return nil, fmt.Errorf("the period %v of @every is not positive", d)
	case d < minEvery:
		return nil, fmt.Errorf("the period %v of @every is under %v", d, minEvery)
	case d > maxEvery:
		return nil, fmt.Errorf("the period %v of @every is over ten years (%v)", d, maxEvery)
	}
	return every{spec: spec, d: d}, nil
}

// slotAt returns the grid slot that t is in. t must lie between the years
// 1678 and 2262, which Unix nanoseconds hold.
func (e every) slotAt(t time.Time) Slot {
	ns := t.UnixNano()
	d := int64(e.d)
	k := ns / d
	if ns%d < 0 {
		k-- // round towards the past for instants before the epoch
	}
	start := time.Unix(0, k*d).In(t.Location())
	return Slot{Start: start, End: start.Add(e.d), wall: k * d, zone: time.UTC}
}

func (e every) nextSlot(after time.Time) (Slot, bool) {
	s := e.slotAt(after)
	start := s.Start.Add(e.d)
	return Slot{Start: start, wall: s.wall + int64(e.d), zone: time.UTC}, true
}

func (e every) plan(due, now time.Time) Plan {
	slot := e.slotAt(now)
	p := Plan{Scheduled: due, Slot: slot, Late: slot.Start.After(due), Next: slot.End, HasNext: true}
	if p.Late {
		p.Scheduled = slot.Start
	}
	return p
}

func (e every) next(prevStart, prevFinish time.Time) (time.Time, bool) {
	return nextFrom(e, prevStart, prevFinish)
}

func (e every) after(now time.Time) (time.Time, bool) { return e.slotAt(now).End, true }
func (e every) checkLease(time.Duration) error        { return nil }
func (e every) String() string                        { return fmt.Sprintf("cron %q", e.spec) }
