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
