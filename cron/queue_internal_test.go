package cron

import (
	"math/rand/v2"
	"testing"
)

// TestQueueRemove pushes, pops, moves and removes items at random and
// checks, after each step, that the heap is a heap, that every entry knows
// its place, and that it holds what it should.
func TestQueueRemove(t *testing.T) {
	const n = 500
	entries := make([]entry, n)
	for i := range entries {
		entries[i].pos = -1
	}
	rng := rand.New(rand.NewPCG(3, 4))
	var q queue
	due := make(map[*entry]int64) // what the queue should hold
	for step := range 20_000 {
		e := &entries[rng.IntN(n)]
		switch op := rng.IntN(4); {
		case op == 0 && len(q) > 0:
			it := q.pop()
			want := int64(-1)
			for _, d := range due {
				if want < 0 || d < want {
					want = d
				}
			}
			if it.due != want || due[it.e] != it.due {
				t.Fatalf("step %d: pop = due %d, want the earliest, %d", step, it.due, want)
			}
			delete(due, it.e)
		case op == 1 && e.pos >= 0:
			if it := q.remove(int(e.pos)); it.e != e {
				t.Fatalf("step %d: remove(%d) removed another entry", step, e.pos)
			}
			delete(due, e)
		case e.pos >= 0:
			d := rng.Int64N(1000)
			q.fix(int(e.pos), item{d, e})
			due[e] = d
		default:
			d := rng.Int64N(1000)
			q.push(d, e)
			due[e] = d
		}
		checkHeap(t, step, q, due)
	}
}

func checkHeap(t *testing.T, step int, q queue, due map[*entry]int64) {
	t.Helper()
	if len(q) != len(due) {
		t.Fatalf("step %d: the queue holds %d items, want %d", step, len(q), len(due))
	}
	for i, it := range q {
		if int(it.e.pos) != i {
			t.Fatalf("step %d: the entry at %d says it is at %d", step, i, it.e.pos)
		}
		if due[it.e] != it.due {
			t.Fatalf("step %d: the entry at %d is due at %d, want %d", step, i, it.due, due[it.e])
		}
		if i > 0 && before(it, q[(i-1)/arity]) {
			t.Fatalf("step %d: item %d is due before its parent", step, i)
		}
	}
}
