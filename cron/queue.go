package cron

import "unsafe"

// item is a job's place in the queue: when its next tick is due, in Unix
// nanoseconds, and the job. The due time lives here alone, so that the
// heap's comparisons read the queue's own memory and not the entries.
type item struct {
	due int64
	e   *entry
}

// queue is a min-heap of items by due time. Each entry knows its item's
// position (entry.pos), so that a job removed or rescheduled while the
// runtime runs leaves the heap in O(log n), without a rebuild.
//
// Items due at the same instant come out in the order of their entries'
// addresses: for the jobs given to [Start], whose entries are one
// allocation, the order of the slice; for jobs added later, an order of
// their own. The heap compares addresses, not contents, so a tie costs no
// memory read. It is written out rather than run through container/heap,
// whose calls through an interface were a fifth of the scheduler's time
// with thousands of jobs due at once, and it moves an item into the hole
// its sift leaves rather than swapping, so that each level writes one
// entry's position.
type queue []item

// before reports whether a is due before b.
func before(a, b item) bool {
	if a.due != b.due {
		return a.due < b.due
	}
	return uintptr(unsafe.Pointer(a.e)) < uintptr(unsafe.Pointer(b.e))
}

// set puts it at i.
func (q queue) set(i int, it item) {
	q[i] = it
	it.e.pos = int32(i)
}

// push adds e, due at due, to the queue, and returns its position: 0 when
// it is due first. e must not be queued.
func (q *queue) push(due int64, e *entry) int {
	*q = append(*q, item{due, e})
	return q.up(len(*q)-1, item{due, e})
}

// pop removes the item due first from the queue, which must not be empty,
// and returns it.
func (q *queue) pop() item {
	return q.remove(0)
}

// remove removes the item at i and returns it.
func (q *queue) remove(i int) item {
	old := *q
	n := len(old) - 1
	it := old[i]
	it.e.pos = -1
	last := old[n]
	old[n] = item{}
	*q = old[:n]
	if i < n {
		q.fix(i, last)
	}
	return it
}

// fix puts it, whose due time may have changed, at i or wherever the heap
// wants it from there, and returns where it ends.
func (q queue) fix(i int, it item) int {
	if i > 0 && before(it, q[(i-1)/arity]) {
		return q.up(i, it)
	}
	return q.down(i, it)
}

// The heap is 4-ary: a parent's four children are 64 bytes, one cache
// line, and the tree is half as deep as a binary one, so a pop from a
// queue of 100,000 jobs moves an item 8 levels rather than 17.
const arity = 4

// up puts it at j or above, moving the parents it is due before down,
// and returns where it ends.
func (q queue) up(j int, it item) int {
	for j > 0 {
		i := (j - 1) / arity // parent
		if !before(it, q[i]) {
			break
		}
		q.set(j, q[i])
		j = i
	}
	q.set(j, it)
	return j
}

// down puts it at i or below, moving the children due before it up, and
// returns where it ends.
func (q queue) down(i int, it item) int {
	n := len(q)
	for {
		first := arity*i + 1 // first child
		if first >= n {
			break
		}
		j := first // the child due first
		for c := first + 1; c < min(first+arity, n); c++ {
			if before(q[c], q[j]) {
				j = c
			}
		}
		if !before(q[j], it) {
			break
		}
		q.set(i, q[j])
		i = j
	}
	q.set(i, it)
	return i
}
