package lock_test

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wakuwaku-go/wakuwaku/internal/redistest"
	"github.com/wakuwaku-go/wakuwaku/lock"
)

const (
	contenders      = 32
	contentionSpell = 3 * time.Second
	// enoughTaken is how many acquisitions each tally needs for the test
	// to have contended; contentionLimit bounds how long a busy machine
	// may take to reach them.
	enoughTaken     = 50
	contentionLimit = time.Minute
)

// tally counts what a contention test did.
type tally struct {
	attempts, taken, overlaps, errs atomic.Int64
}

func (ta *tally) report(t *testing.T, what string) {
	t.Helper()
	t.Logf("%s: %d attempts, %d acquired, %d overlaps, %d errors",
		what, ta.attempts.Load(), ta.taken.Load(), ta.overlaps.Load(), ta.errs.Load())
	if n := ta.overlaps.Load(); n != 0 {
		t.Errorf("%s: %d overlapping holders, want 0", what, n)
	}
	if n := ta.errs.Load(); n != 0 {
		t.Errorf("%s: %d errors, want 0", what, n)
	}
	if n := ta.taken.Load(); n < enoughTaken {
		t.Errorf("%s: only %d acquisitions in %v: the test did not contend", what, n, contentionLimit)
	}
}

// contend runs fn in contenders goroutines, spread over dbs, for the spell
// and then until every tally has enough acquisitions (a busy machine
// starves some contenders), within contentionLimit.
func contend(t *testing.T, dbs []lock.DB, tallies []*tally, fn func(ctx context.Context, db lock.DB, i int)) {
	ctx, cancel := context.WithTimeout(t.Context(), contentionLimit)
	defer cancel()
	var wg sync.WaitGroup
	for i := range contenders {
		db := dbs[i%len(dbs)]
		wg.Go(func() {
			for ctx.Err() == nil {
				fn(ctx, db, i)
			}
		})
	}
	enough := func() bool {
		for _, ta := range tallies {
			if ta.taken.Load() < enoughTaken {
				return false
			}
		}
		return true
	}
	spell := time.After(contentionSpell)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
wait:
	for {
		select {
		case <-ctx.Done():
			break wait
		case <-spell:
			spell = nil
		case <-tick.C:
		}
		if spell == nil && enough() {
			break wait
		}
	}
	cancel()
	wg.Wait()
}

// hold stays in a critical section for a moment, so that overlaps would show.
func hold() { time.Sleep(time.Duration(rand.IntN(200)) * time.Microsecond) }

func lockContention(t *testing.T, dbs []lock.DB) {
	l := lock.New[string]("contended", 10*time.Second)
	var ta tally
	var inside atomic.Int64
	contend(t, dbs, []*tally{&ta}, func(ctx context.Context, db lock.DB, _ int) {
		ta.attempts.Add(1)
		tok, err := l.TryLock(ctx, db, "one")
		if err != nil {
			if ctx.Err() == nil {
				ta.errs.Add(1)
			}
			return
		}
		if tok == nil {
			return
		}
		ta.taken.Add(1)
		if inside.Add(1) != 1 {
			ta.overlaps.Add(1)
		}
		hold()
		inside.Add(-1)
		if ok, err := tok.Release(context.WithoutCancel(ctx)); !ok || err != nil {
			ta.errs.Add(1)
		}
	})
	ta.report(t, "Lock")
}

func rwContention(t *testing.T, dbs []lock.DB) {
	l := lock.NewRW[string]("contended", 10*time.Second)
	var reads, writes tally
	var readers, writers atomic.Int64
	contend(t, dbs, []*tally{&reads, &writes}, func(ctx context.Context, db lock.DB, i int) {
		release := context.WithoutCancel(ctx)
		if i%4 == 0 { // 8 readers, 24 writers: readers starve writers otherwise
			reads.attempts.Add(1)
			tok, err := l.TryRead(ctx, db, "one")
			if err != nil || tok == nil {
				if err != nil && ctx.Err() == nil {
					reads.errs.Add(1)
				}
				return
			}
			reads.taken.Add(1)
			readers.Add(1)
			if writers.Load() != 0 {
				reads.overlaps.Add(1)
			}
			hold()
			readers.Add(-1)
			if ok, err := tok.Release(release); !ok || err != nil {
				reads.errs.Add(1)
			}
			time.Sleep(2 * time.Millisecond) // let writers find a gap
			return
		}
		writes.attempts.Add(1)
		tok, err := l.TryWrite(ctx, db, "one")
		if err != nil || tok == nil {
			if err != nil && ctx.Err() == nil {
				writes.errs.Add(1)
			}
			return
		}
		writes.taken.Add(1)
		if writers.Add(1) != 1 || readers.Load() != 0 {
			writes.overlaps.Add(1)
		}
		hold()
		writers.Add(-1)
		if ok, err := tok.Release(release); !ok || err != nil {
			writes.errs.Add(1)
		}
	})
	reads.report(t, "RWLock readers")
	writes.report(t, "RWLock writers")
}

func TestContention(t *testing.T) {
	srv := redistest.Start(t)
	lockContention(t, []lock.DB{lock.NewDB(srv.Client(t)), lock.NewDB(srv.Client(t))})
}

func TestClusterContention(t *testing.T) {
	cl := redistest.StartCluster(t, 3)
	dbs := []lock.DB{lock.NewDB(cl.Client(t)), lock.NewDB(cl.Client(t))}
	t.Run("Lock", func(t *testing.T) { lockContention(t, dbs) })
	t.Run("RWLock", func(t *testing.T) { rwContention(t, dbs) })
}
