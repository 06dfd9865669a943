package cron

import "unsafe"

// item is a job's place in the queue: when its next tick is due, in Unix
// nanoseconds, and the job. The due time lives here alone, so that the
// heap's comparisons read the queue's own memory and not the entries.
type item struct {
	due int64
	e   *entry
}

// queue is a min-heap of items by due time. Items due at the same instant
// come out in the order of their jobs in the slice given to [Start], whose
// entries are one allocation in that order: the heap compares the entries'
// addresses, not their contents, so a tie costs no memory read. It is
// written out rather than run through container/heap, whose calls through
// an interface were a fifth of the scheduler's time with thousands of jobs
// due at once.
type queue []item

func (q queue) less(i, j int) bool {
	a, b := q[i], q[j]
	if a.due != b.due {
		return a.due < b.due
	}
	return uintptr(unsafe.Pointer(a.e)) < uintptr(unsafe.Pointer(b.e))
}

// push adds e, due at due, to the queue, and returns its position: 0 when
// it is due first.
func (q *queue) push(due int64, e *entry) int {
	*q = append(*q, item{due, e})
	return q.up(len(*q) - 1)
}

// pop removes the item due first from the queue, which must not be empty,
// and returns it.
func (q *queue) pop() item {
	old := *q
	n := len(old) - 1
	it := old[0]
	old[0] = old[n]
	old[n] = item{}
	*q = old[:n]
	if n > 0 {
		(*q).down(0)
	}
	return it
}

// The heap is 4-ary: a parent's four children are 64 bytes, one cache
// line, and the tree is half as deep as a binary one, so a pop from a
// queue of 100,000 jobs moves an item 8 levels rather than 17.
const arity = 4

// up moves the item at j towards the root while it is due before its
// parent, and returns where it ends.
func (q queue) up(j int) int {
	for j > 0 {
		i := (j - 1) / arity // parent
		if !q.less(j, i) {
			break
		}
		q[i], q[j] = q[j], q[i]
		j = i
	}
	return j
}

func (q queue) down(i int) {
	n := len(q)
	for {
		first := arity*i + 1 // first child
		if first >= n {
			return
		}
		j := first // the child due first
		for c := first + 1; c < min(first+arity, n); c++ {
			if q.less(c, j) {
				j = c
			}
		}
		if !q.less(j, i) {
			return
		}
		q[i], q[j] = q[j], q[i]
		i = j
	}
}
