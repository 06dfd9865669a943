package interval

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// randomField returns a random cron field for values lo to hi: a star, a
// value, a range, a step or a list of them.
func randomField(r *rand.Rand, lo, hi int) string {
	one := func() string {
		a := lo + r.IntN(hi-lo+1)
		switch r.IntN(4) {
		case 0:
			return fmt.Sprint(a)
		case 1:
			b := a + r.IntN(hi-a+1)
			return fmt.Sprintf("%d-%d", a, b)
		case 2:
			return fmt.Sprintf("*/%d", 1+r.IntN(hi-lo+1))
		default:
			return fmt.Sprintf("%d/%d", a, 1+r.IntN(hi-lo+1))
		}
	}
	switch r.IntN(5) {
	case 0:
		return "*"
	case 1:
		return one() + "," + one()
	default:
		return one()
	}
}

func randomSpec(r *rand.Rand) string {
	dom, dow := "*", "*"
	if r.IntN(3) == 0 {
		dom = randomField(r, 1, 31)
	}
	if r.IntN(3) == 0 {
		dow = randomField(r, 0, 6)
	}
	month := "*"
	if r.IntN(4) == 0 {
		month = randomField(r, 1, 12)
	}
	return fmt.Sprintf("%s %s %s %s %s %s", randomField(r, 0, 59), randomField(r, 0, 59),
		randomField(r, 0, 23), dom, month, dow)
}

// TestNextWallAgreesWithRobfig checks the fast path of wallfast.go against
// robfig's Next, which stays the reference: for random specs and random
// wall times, nextWall gives what robfig gives, and matches says yes
// exactly when robfig's next match after the second before is this one.
func TestNextWallAgreesWithRobfig(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	lo := time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC).Unix()
	hi := time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC).Unix()
	fast := 0
	for range 3000 {
		spec := randomSpec(r)
		p, err := parse(spec)
		if err != nil {
			continue // a random range may be empty or reversed
		}
		c := p.(*cronSpec)
		for range 40 {
			u := lo + r.Int64N(hi-lo)
			if r.IntN(2) == 0 {
				u -= u % 3600 // the top of an hour, and the hour's last seconds
				u += []int64{0, 3599, 3540, 59}[r.IntN(4)]
			}
			w := time.Unix(u, 0).UTC()
			if r.IntN(4) == 0 {
				w = w.Add(time.Duration(1 + r.IntN(999_999_999))) // not a whole second
			}
			got, want := c.nextWall(w), c.wall.Next(w)
			if !got.Equal(want) {
				t.Fatalf("%q after %s: nextWall %s, robfig %s", spec, w, got, want)
			}
			if _, ok := c.fields.nextInHour(w.Unix()); ok {
				fast++
			}
			if w.Nanosecond() == 0 {
				before := c.wall.Next(w.Add(-time.Second))
				if m := c.fields.matches(u); m != before.Equal(w) {
					t.Fatalf("%q at %s: matches %v, robfig's next after the second before is %s", spec, w, m, before)
				}
			}
		}
	}
	if fast == 0 {
		t.Fatal("no case took the fast path: the test compares nothing of it")
	}
	t.Logf("%d cases took the fast path", fast)
}

// samePlan reports how a and b differ, or "" if they do not.
func samePlan(a, b Plan) string {
	ka, _ := a.Slot.Key()
	kb, _ := b.Slot.Key()
	switch {
	case !a.Scheduled.Equal(b.Scheduled):
		return "Scheduled"
	case !a.Slot.Start.Equal(b.Slot.Start) || !a.Slot.End.Equal(b.Slot.End):
		return "Slot"
	case ka != kb:
		return "Slot.Key"
	case a.Late != b.Late || a.Overlap != b.Overlap || a.AtFinish != b.AtFinish:
		return "flags"
	case a.HasNext != b.HasNext || !a.Next.Equal(b.Next) || a.Next.Location() != b.Next.Location():
		return "Next"
	}
	return ""
}

// TestPlanSteadyAgreesWithPlanSlow checks plan's fast path against its
// long way, for random specs in zones with and without daylight saving,
// around their changes too.
func TestPlanSteadyAgreesWithPlanSlow(t *testing.T) {
	var zones []*time.Location
	for _, name := range []string{"America/New_York", "Australia/Lord_Howe", "Asia/Kolkata"} {
		loc, err := time.LoadLocation(name)
		if err != nil {
			t.Fatal(err)
		}
		zones = append(zones, loc)
	}
	zones = append(zones, time.UTC, time.Local)
	r := rand.New(rand.NewPCG(3, 5))
	lo := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC).Unix()
	span := int64(10 * 365 * 24 * 3600)
	fast := 0
	for range 3000 {
		spec := randomSpec(r)
		if r.IntN(3) == 0 {
			spec = "CRON_TZ=" + zones[r.IntN(3)].String() + " " + spec
		}
		p, err := parse(spec)
		if err != nil {
			continue
		}
		c := p.(*cronSpec)
		for range 20 {
			loc := zones[r.IntN(len(zones))]
			at := time.Unix(lo+r.Int64N(span), 0).In(loc)
			if r.IntN(2) == 0 {
				// Near a change of the zone, where the fast path must
				// step aside.
				if _, end := at.ZoneBounds(); !end.IsZero() {
					at = end.Add(time.Duration(r.IntN(7200)-3600) * time.Second)
				}
			}
			slot, ok := c.nextSlot(at)
			if !ok {
				continue
			}
			due := slot.Start
			if r.IntN(4) == 0 {
				due = at // not always a slot
			}
			now := due.Add(time.Duration(r.Int64N(int64(3 * time.Second))))
			if r.IntN(5) == 0 {
				now = due.Add(time.Duration(r.Int64N(int64(2 * time.Hour)))) // late
			}
			steady, ok := c.planSteady(due, now)
			if !ok {
				continue
			}
			fast++
			if d := samePlan(steady, c.planSlow(due, now)); d != "" {
				t.Fatalf("%q, due %s, now %s: planSteady and planSlow differ in %s:\n%+v\n%+v",
					spec, due, now, d, steady, c.planSlow(due, now))
			}
		}
	}
	// Zones whose clocks changed in the middle of a wall hour (Goose Bay at
	// 00:01, Caracas at 02:30): the second before the change, whose next
	// wall second lies past the zone period's end.
	c := MustCron("* * * * * *").p.(*cronSpec)
	for _, z := range []struct {
		name string
		from time.Time
	}{
		{"America/Goose_Bay", time.Date(1991, 1, 1, 0, 0, 0, 0, time.UTC)},
		{"America/Caracas", time.Date(2016, 1, 1, 0, 0, 0, 0, time.UTC)},
	} {
		loc, err := time.LoadLocation(z.name)
		if err != nil {
			t.Fatal(err)
		}
		changes := 0
		for at := z.from; changes < 3; changes++ {
			_, end := at.In(loc).ZoneBounds()
			if end.IsZero() {
				break
			}
			for _, before := range []time.Duration{time.Second, 2 * time.Second, time.Minute} {
				due := end.Add(-before).In(loc)
				now := due.Add(time.Millisecond)
				if steady, ok := c.planSteady(due, now); ok {
					if d := samePlan(steady, c.planSlow(due, now)); d != "" {
						t.Fatalf("%s, due %s: planSteady and planSlow differ in %s:\n%+v\n%+v",
							z.name, due, d, steady, c.planSlow(due, now))
					}
				}
			}
			at = end
		}
		if changes == 0 {
			t.Fatalf("%s: no zone change after %s", z.name, z.from)
		}
	}
	if fast == 0 {
		t.Fatal("no case took the fast path: the test compares nothing of it")
	}
	t.Logf("%d cases took the fast path", fast)
}
