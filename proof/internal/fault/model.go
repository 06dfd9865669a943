package fault

import (
	"math"
	"slices"
	"time"
)

// The models below are the sequential specifications of a Lock and an
// RWLock, expiry included, against which [History.Linearizable] checks a
// history.
//
// A lease set (or extended) by an operation that was called at c and returned
// at r ends, on Redis, at a time E with c+ttl <= E <= r+ttl+1ms: the command
// ran between c and r; the key expires a TTL after that, rounded up to the
// next millisecond of the server's clock. So an operation x that ran after
// the lease was set:
//
//   - may have found it ended if x returned after c+ttl;
//   - may have found it live if x was called before r+ttl+1ms.
//
// Both bounds are widened by expirySlack, for the reading of one wall clock
// by two processes, and the second by the history's outlive too: how much
// longer than its TTL the server may keep a key (a slot migration's MIGRATE
// stretches a key's life by the time its target took to run the RESTORE).
// Everything else is exact. An operation that returned an
// error took effect or didn't: the model allows both, and its return is taken
// to be the end of time.

// expirySlack widens the bounds between which a lease may end.
const expirySlack = 2 * time.Millisecond

// never is the return time of an operation whose outcome is unknown.
const never = math.MaxInt64 / 4

// lease is a hold's lease in a model state: the hold and the call and return
// of the operation that last set it.
type lease struct {
	hold      uint64
	call, ret int64
}

// bounds is what the model knows about time: the TTL, the slack, and how
// much longer than the TTL a key may outlive its last setting (outlive).
type bounds struct{ ttl, slack, outlive int64 }

// mayHaveEnded reports whether l may have ended when x ran.
func (b bounds) mayHaveEnded(l lease, x Op) bool {
	return ret(x)+b.slack >= l.call+b.ttl
}

// mayBeLive reports whether l may still have been live when x ran.
func (b bounds) mayBeLive(l lease, x Op) bool {
	return x.Call-b.slack < b.lastLive(l)
}

// lastLive is the latest instant at which l may still be live.
func (b bounds) lastLive(l lease) int64 {
	return l.ret + b.ttl + int64(time.Millisecond) + b.outlive
}

func ret(x Op) int64 {
	if x.Err != "" {
		return never
	}
	return x.Return
}

func (b bounds) leaseOf(x Op) lease { return lease{x.Hold, x.Call, ret(x)} }

// stepLock returns the leases a Lock whose holder's lease is w (hold 0 when
// free) may have after x, none if x could not have happened. An RWLock's
// writer side steps the same way.
func (b bounds) stepLock(w lease, x Op) []lease {
	held := w.hold != 0
	mine := held && w.hold == x.Hold
	mayEnd := held && b.mayHaveEnded(w, x)
	mayLive := held && b.mayBeLive(w, x)
	var out []lease
	add := func(cond bool, l lease) {
		if cond {
			out = append(out, l)
		}
	}
	unknown := x.Err != ""
	switch x.Kind {
	case Acquire, WriteAcquire:
		add((unknown || x.Ok) && (!held || mayEnd), b.leaseOf(x))
		add(unknown || !x.Ok && held && mayLive, w)
	case Extend:
		add((unknown || x.Ok) && mine && mayLive, b.leaseOf(x))
		add((unknown || !x.Ok) && mine && mayEnd, lease{})
		add(unknown || !x.Ok && !mine, w)
	case Release:
		add((unknown || x.Ok) && mine && mayLive, lease{})
		add((unknown || !x.Ok) && mine && mayEnd, lease{})
		add(unknown || !x.Ok && !mine, w)
	}
	return out
}

// rwState is an RWLock's state: the writer's lease (hold 0 when none) and
// the readers' leases, sorted by hold.
type rwState struct {
	w       lease
	readers []lease
}

func (s rwState) reader(hold uint64) (int, bool) {
	return slices.BinarySearchFunc(s.readers, hold, func(l lease, h uint64) int {
		switch {
		case l.hold < h:
			return -1
		case l.hold > h:
			return 1
		}
		return 0
	})
}

func (s rwState) withReader(l lease) rwState {
	i, found := s.reader(l.hold)
	r := slices.Clone(s.readers)
	if found {
		r[i] = l
	} else {
		r = slices.Insert(r, i, l)
	}
	return rwState{s.w, r}
}

func (s rwState) without(hold uint64) rwState {
	i, found := s.reader(hold)
	if !found {
		return s
	}
	return rwState{s.w, slices.Delete(slices.Clone(s.readers), i, i+1)}
}

// stepRW returns the states an RWLock in state s may be in after x, none if
// x could not have happened.
func (b bounds) stepRW(s rwState, x Op) []rwState {
	var out []rwState
	add := func(cond bool, st rwState) {
		if cond {
			out = append(out, st)
		}
	}
	unknown := x.Err != ""
	wHeld := s.w.hold != 0
	wMayEnd := wHeld && b.mayHaveEnded(s.w, x)
	wMayLive := wHeld && b.mayBeLive(s.w, x)
	switch x.Kind {
	case WriteAcquire:
		readersMayEnd, someReaderMayLive := true, false
		for _, r := range s.readers {
			readersMayEnd = readersMayEnd && b.mayHaveEnded(r, x)
			someReaderMayLive = someReaderMayLive || b.mayBeLive(r, x)
		}
		add((unknown || x.Ok) && (!wHeld || wMayEnd) && readersMayEnd, rwState{w: b.leaseOf(x)})
		add(unknown || !x.Ok && (wMayLive || someReaderMayLive), s)
	case Extend, Release:
		for _, w := range b.stepLock(s.w, x) {
			out = append(out, rwState{w, s.readers})
		}
	case ReadAcquire:
		add((unknown || x.Ok) && (!wHeld || wMayEnd), rwState{readers: s.readers}.withReader(b.leaseOf(x)))
		add(unknown || !x.Ok && wMayLive, s)
	case ReadExtend, ReadRelease:
		i, found := s.reader(x.Hold)
		mayLive := found && b.mayBeLive(s.readers[i], x)
		mayEnd := !found || b.mayHaveEnded(s.readers[i], x)
		if x.Kind == ReadExtend {
			add((unknown || x.Ok) && mayLive, s.withReader(b.leaseOf(x)))
		} else {
			add((unknown || x.Ok) && mayLive, s.without(x.Hold))
		}
		add((unknown || !x.Ok) && mayEnd, s.without(x.Hold))
		add(unknown, s)
	}
	return out
}

// LockKind is the kind of lock a history was recorded on, which picks the
// model [History.Linearizable] checks it against. The zero LockKind is Lock.
type LockKind uint8

// The kinds of lock, as package lock has them.
const (
	Lock   LockKind = iota // lock.Lock: one holder at a time
	RWLock                 // lock.RWLock: one writer, or any number of readers
)

// step returns the model of a lock of kind k: the states it may be in after
// an operation. A Lock's state is an rwState without readers.
func (b bounds) step(k LockKind) func(rwState, Op) []rwState {
	if k == RWLock {
		return b.stepRW
	}
	return func(s rwState, x Op) []rwState {
		ws := b.stepLock(s.w, x)
		out := make([]rwState, len(ws))
		for i, w := range ws {
			out[i] = rwState{w: w}
		}
		return out
	}
}

// pure reports whether x leaves every state it can happen in as it was: an
// acquire that found the lock busy, and returned no error, only tells what
// the state was.
func pure(x Op) bool { return x.Kind.acquires() && !x.Ok && x.Err == "" }

// prune drops the leases of s that had surely ended for every operation
// still to be placed: those called at or after horizon, and, for the lease of
// a hold, those in pending of that hold whose outcome is unknown. A lease so
// old acts in every step as no lease at all (an acquire may take the lock, an
// extension or release of its hold reports false and leaves no lease), so
// pruning it merges states that only old history told apart.
func (b bounds) prune(s rwState, horizon int64, unknownCall func(hold uint64) int64) rwState {
	over := func(l lease) bool {
		return min(horizon, unknownCall(l.hold))-b.slack >= b.lastLive(l)
	}
	if s.w.hold != 0 && over(s.w) {
		s.w = lease{}
	}
	if slices.ContainsFunc(s.readers, over) {
		s.readers = slices.DeleteFunc(slices.Clone(s.readers), over)
	}
	return s
}
