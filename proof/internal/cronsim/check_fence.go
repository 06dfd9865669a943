package cronsim

import (
	"errors"
	"iter"
	"slices"

	"github.com/wakuwaku-go/wakuwaku/crontest"
)

// fences checks I16 (PROTOCOL.md's F1): every run of j the job's code saw
// has a fence, a run begun after another returned has a higher fence than
// it, and a fenced store (one value per job, which accepts a write only
// with a fence above the highest it took) that every run writes as it
// returns never takes a write of a run after a write of a run begun later.
// The server's clock, which numbers the fences, never steps back in the
// simulator, and a Redis that lost the record keeps the order for that
// reason, so nothing weakens it but this: a run whose replica froze
// between its claim and its start (within a run lease before it began)
// may have been claimed before a run that began earlier, so pairs whose
// later run's replica froze then are not compared.
func (c *checker) fences(j *Job) {
	var runs []*Run
	for _, r := range c.runsOf(j.Name) {
		if r.Number < 0 {
			continue // the job's code never saw the run
		}
		if r.Tick.Fence == 0 {
			c.add("I16", "no fence", j.Name, r.Start, "a leased run without a fence: %s", describe(r))
			continue
		}
		runs = append(runs, r)
	}
	claimedLater := func(a, b *Run) bool { // b's claim surely came after a's
		return !b.Start.Before(a.Start) && !c.frozenDuring(b.Replica, a.Start.Add(-runTTL(j)), b.Start)
	}
	for k, b := range runs {
		for _, a := range runs[:k] {
			if a.End.IsZero() || !a.End.Before(b.Start) || !claimedLater(a, b) {
				continue
			}
			if a.Tick.Fence >= b.Tick.Fence {
				c.add("I16", "fence order", j.Name, b.Start, "fence %d of %s is not above fence %d of %s, which returned before it began",
					b.Tick.Fence, describe(b), a.Tick.Fence, describe(a))
			}
		}
	}
	var taken []*Run
	for w, ok := range storeWrites(runs) {
		if !ok {
			continue
		}
		for _, b := range taken {
			if claimedLater(w, b) && b.Start.After(w.Start) {
				c.add("I16", "stale write", j.Name, w.End, "the fenced store took the write of %s after that of %s, which began later",
					describe(w), describe(b))
				break
			}
		}
		taken = append(taken, w)
	}
}

// storeWrites yields the writes to a job's fenced store, in the order they
// come, and whether the store takes each: every run that returned (a
// killed replica's run writes nothing) writes its fence as it returns, and
// the store takes a fence above the highest it took.
func storeWrites(runs []*Run) iter.Seq2[*Run, bool] {
	writes := slices.DeleteFunc(slices.Clone(runs), func(r *Run) bool {
		return r.Number < 0 || r.End.IsZero() || errors.Is(r.Err, crontest.ErrKilled)
	})
	slices.SortStableFunc(writes, func(a, b *Run) int { return a.End.Compare(b.End) })
	return func(yield func(*Run, bool) bool) {
		var high uint64
		for _, w := range writes {
			ok := w.Tick.Fence > high
			if ok {
				high = w.Tick.Fence
			}
			if !yield(w, ok) {
				return
			}
		}
	}
}
