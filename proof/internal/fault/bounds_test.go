package fault

import (
	"slices"
	"testing"
	"time"
)

// worstTTL is the lease of the worst histories below.
const worstTTL = 200 * time.Millisecond

// worst is a history built to cost the search as much as the suite knows
// how: which kind of lock, and the verdicts it may give (an illegal history
// that the search gives up on is Unknown).
type worst struct {
	name string
	kind LockKind
	ops  func() []Op
	want []Result
}

// worstHistories returns the worst histories, each about n operations long,
// built when asked for, so that one at a time takes memory.
func worstHistories(n int) []worst {
	ms := int64(time.Millisecond)
	return []worst{
		{"Lock, 24 unknown acquires, then hand-offs, then a release of a lock never held", Lock,
			func() []Op { return unknownStorm(24, n, false) }, []Result{Illegal, Unknown}},
		{"Lock, 24 unknown acquires, then hand-offs", Lock,
			func() []Op { return unknownStorm(24, n, true) }, []Result{Ok}},
		{"Lock, 32 clients always in flight, a holder extending", Lock,
			func() []Op { return crowd(32, n) }, []Result{Ok}},
		{"RWLock, rounds of 16 readers at once, then a writer beside a live reader", RWLock,
			func() []Op { return readerRounds(16, n, false) }, []Result{Illegal, Unknown}},
		{"RWLock, rounds of 16 readers at once", RWLock,
			func() []Op { return readerRounds(16, n, true) }, []Result{Ok}},
		{"RWLock, 16 unknown read acquires, then rounds of readers, then a writer beside a live reader", RWLock,
			func() []Op { return append(unknownReads(16), readerRounds(16, n, false)...) }, []Result{Illegal, Unknown}},
		{"Lock, 300 acquires in flight at once", Lock,
			func() []Op { return wide(300, 10*ms) }, []Result{Unknown}},
	}
}

// unknownStorm: u acquires whose outcome is unknown, at the start; then two
// clients hand the lock to each other, the other one's acquire finding it
// busy each time; with legal false, at the end a release that reports true
// for a hold that never acquired, which no order explains. The search
// must try every subset of the unknown acquires, placed at every return.
func unknownStorm(u, n int, legal bool) []Op {
	ms := int64(time.Millisecond)
	var ops []Op
	for i := range u {
		ops = append(ops, Op{Client: int32(100 + i), Kind: Acquire, Name: "n", Hold: uint64(1000 + i), Call: int64(i), Return: int64(i) + ms, Err: "i/o timeout"})
	}
	t := 2 * int64(worstTTL)
	hold := uint64(1)
	for len(ops) < n {
		ops = append(ops,
			Op{Client: 1, Kind: Acquire, Name: "n", Hold: hold, Call: t, Return: t + ms, Ok: true},
			Op{Client: 2, Kind: Acquire, Name: "n", Hold: hold + 1, Call: t + 2*ms, Return: t + 3*ms},
			Op{Client: 1, Kind: Release, Name: "n", Hold: hold, Call: t + 4*ms, Return: t + 5*ms, Ok: true},
		)
		hold += 2
		t += 6 * ms
	}
	if !legal {
		ops = append(ops, Op{Client: 3, Kind: Release, Name: "n", Hold: 999, Call: t, Return: t + ms, Ok: true})
	}
	return ops
}

// crowd: c clients, each with an acquire always in flight, all finding the
// lock busy, while client 0 holds it and extends it, hands it over by
// release to itself, and so on.
func crowd(c, n int) []Op {
	ms := int64(time.Millisecond)
	var ops []Op
	hold := uint64(1)
	for t := int64(0); len(ops) < n; t += 20 * ms {
		ops = append(ops,
			Op{Client: 0, Kind: Acquire, Name: "n", Hold: hold, Call: t, Return: t + ms, Ok: true},
			Op{Client: 0, Kind: Extend, Name: "n", Hold: hold, Call: t + 8*ms, Return: t + 9*ms, Ok: true},
			Op{Client: 0, Kind: Release, Name: "n", Hold: hold, Call: t + 18*ms, Return: t + 19*ms, Ok: true},
		)
		hold++
		for k := 1; k < c; k++ {
			// Staggered so that some are always in flight.
			at := t + 2*ms + int64(k)*ms/4
			ops = append(ops, Op{Client: int32(k), Kind: Acquire, Name: "n", Hold: uint64(1<<30 + len(ops)), Call: at, Return: at + 15*ms})
		}
	}
	return ops
}

// readerRounds: rounds of r readers whose acquires, extensions and
// releases all overlap each other's, with a writer finding the lock busy
// beside each round; with legal false, at the end a writer gets the lock
// while a reader surely holds it.
func readerRounds(r, n int, legal bool) []Op {
	ms := int64(time.Millisecond)
	var ops []Op
	hold := uint64(1)
	t := int64(0)
	for len(ops) < n {
		for k := range r {
			h := hold + uint64(k)
			c := int32(k + 1)
			ops = append(ops,
				Op{Client: c, Kind: ReadAcquire, Name: "n", Hold: h, Call: t, Return: t + 3*ms, Ok: true},
				Op{Client: c, Kind: ReadExtend, Name: "n", Hold: h, Call: t + 4*ms, Return: t + 7*ms, Ok: true},
				Op{Client: c, Kind: ReadRelease, Name: "n", Hold: h, Call: t + 8*ms, Return: t + 11*ms, Ok: true},
			)
		}
		ops = append(ops, Op{Client: 100, Kind: WriteAcquire, Name: "n", Hold: hold + uint64(r), Call: t + 2*ms, Return: t + 9*ms})
		hold += uint64(r) + 1
		t += 20 * ms
	}
	if !legal {
		ops = append(ops,
			Op{Client: 1, Kind: ReadAcquire, Name: "n", Hold: hold, Call: t, Return: t + ms, Ok: true},
			Op{Client: 100, Kind: WriteAcquire, Name: "n", Hold: hold + 1, Call: t + 2*ms, Return: t + 3*ms, Ok: true},
		)
	}
	return ops
}

// unknownReads: u read acquires whose outcome is unknown, before the
// rounds of readerRounds, which start at 0.
func unknownReads(u int) []Op {
	var ops []Op
	for i := range u {
		at := -int64(time.Second) + int64(i)
		ops = append(ops, Op{Client: int32(200 + i), Kind: ReadAcquire, Name: "n", Hold: uint64(1<<40 + i), Call: at, Return: at + 1, Err: "i/o timeout"})
	}
	return ops
}

// wide: w acquires in flight at once, one of which gets the lock.
func wide(w int, d int64) []Op {
	var ops []Op
	for i := range w {
		ops = append(ops, Op{Client: int32(i), Kind: Acquire, Name: "n", Hold: uint64(i + 1), Call: int64(i), Return: d + int64(i), Ok: i == w-1})
	}
	return ops
}

// TestSearchBounds checks the search on the worst histories it knows: it
// never calls an illegal history Ok, it finds the legal ones Ok, and it
// gives up, with a reason, on those it can't settle within its limits.
// Run in long mode with -test.v, it logs what each check cost, as
// RELIABILITY.md publishes it.
func TestSearchBounds(t *testing.T) {
	n := Pick(2_000, 300_000)
	lim := Limits{Memory: 4 << 20, Time: time.Minute}
	if Long() {
		lim = DefaultLimits()
	}
	for _, w := range worstHistories(n) {
		t.Run(w.name, func(t *testing.T) {
			h := &History{}
			h.Add(w.ops()...)
			c := h.Linearizable(worstTTL, w.kind, lim)
			if !slices.Contains(w.want, c.Result) {
				t.Errorf("Linearizable = %v, want one of %v", c, w.want)
			}
			if c.Result == Unknown && c.Reason == "" {
				t.Errorf("Linearizable = %v: a check that gives up must say why", c)
			}
			t.Logf("%v", c)
		})
	}
}
