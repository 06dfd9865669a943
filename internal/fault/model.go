package fault

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// The models below are the sequential specifications of a Lock and an
// RWLock, expiry included, against which porcupine checks a history.
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
// by two processes. Everything else is exact. An operation that returned an
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

// bounds is what the model knows about time: the TTL and the slack.
type bounds struct{ ttl, slack int64 }

// mayHaveEnded reports whether l may have ended when x ran.
func (b bounds) mayHaveEnded(l lease, x Op) bool {
	return ret(x)+b.slack >= l.call+b.ttl
}

// mayBeLive reports whether l may still have been live when x ran.
func (b bounds) mayBeLive(l lease, x Op) bool {
	return x.Call-b.slack < l.ret+b.ttl+int64(time.Millisecond)
}

func ret(x Op) int64 {
	if x.Err != "" {
		return never
	}
	return x.Return
}

func (b bounds) leaseOf(x Op) lease { return lease{x.Hold, x.Call, ret(x)} }

// lockState is a Lock's state: its holder's lease, hold 0 when free.
type lockState struct{ l lease }

// stepLock returns the states a Lock in state s may be in after x, none if x
// could not have happened.
func (b bounds) stepLock(s lockState, x Op) []any {
	held := s.l.hold != 0
	mine := held && s.l.hold == x.Hold
	mayEnd := held && b.mayHaveEnded(s.l, x)
	mayLive := held && b.mayBeLive(s.l, x)
	var out []any
	add := func(cond bool, st lockState) {
		if cond {
			out = append(out, st)
		}
	}
	unknown := x.Err != ""
	switch x.Kind {
	case Acquire, WriteAcquire:
		add((unknown || x.Ok) && (!held || mayEnd), lockState{b.leaseOf(x)})
		add(unknown || !x.Ok && held && mayLive, s)
	case Extend:
		add((unknown || x.Ok) && mine && mayLive, lockState{b.leaseOf(x)})
		add((unknown || !x.Ok) && mine && mayEnd, lockState{})
		add(unknown || !x.Ok && !mine, s)
	case Release:
		add((unknown || x.Ok) && mine && mayLive, lockState{})
		add((unknown || !x.Ok) && mine && mayEnd, lockState{})
		add(unknown || !x.Ok && !mine, s)
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

// stepRW returns the states an RWLock in state s may be in after x.
func (b bounds) stepRW(s rwState, x Op) []any {
	var out []any
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
		for _, st := range b.stepLock(lockState{s.w}, x) {
			out = append(out, rwState{st.(lockState).l, s.readers})
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

func equalRW(a, b any) bool {
	x, y := a.(rwState), b.(rwState)
	return x.w == y.w && slices.Equal(x.readers, y.readers)
}

func hashLease(l lease) uint64 {
	h := l.hold*0x9e3779b97f4a7c15 ^ uint64(l.call)*0xbf58476d1ce4e5b9 ^ uint64(l.ret)*0x94d049bb133111eb
	return h ^ h>>31
}

// LockKind is the kind of lock a history was recorded on, which picks the
// model [History.Linearizable] checks it against. The zero LockKind is Lock.
type LockKind uint8

// The kinds of lock, as package lock has them.
const (
	Lock   LockKind = iota // lock.Lock: one holder at a time
	RWLock                 // lock.RWLock: one writer, or any number of readers
)

// model returns the porcupine model of a lock of kind k with leases of ttl,
// partitioned by lock name.
func model(ttl time.Duration, k LockKind) porcupine.Model {
	b := bounds{ttl: int64(ttl), slack: int64(expirySlack)}
	nm := porcupine.NondeterministicModel{
		Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
			byName := map[string][]porcupine.Operation{}
			var names []string
			for _, o := range history {
				n := o.Input.(Op).Name
				if _, ok := byName[n]; !ok {
					names = append(names, n)
				}
				byName[n] = append(byName[n], o)
			}
			slices.Sort(names)
			parts := make([][]porcupine.Operation, len(names))
			for i, n := range names {
				parts[i] = byName[n]
			}
			return parts
		},
		DescribeOperation: func(in, _ any) string { return in.(Op).String() },
	}
	switch k {
	case RWLock:
		nm.Init = func() []any { return []any{rwState{}} }
		nm.Step = func(s, in, _ any) []any { return b.stepRW(s.(rwState), in.(Op)) }
		nm.Equal = equalRW
		nm.Hash = func(s any) uint64 {
			st := s.(rwState)
			h := hashLease(st.w)
			for _, r := range st.readers {
				h = h*31 + hashLease(r)
			}
			return h
		}
		nm.DescribeState = func(s any) string {
			st := s.(rwState)
			var b strings.Builder
			fmt.Fprintf(&b, "w=%x r=[", st.w.hold)
			for _, r := range st.readers {
				fmt.Fprintf(&b, "%x ", r.hold)
			}
			b.WriteString("]")
			return b.String()
		}
	default:
		nm.Init = func() []any { return []any{lockState{}} }
		nm.Step = func(s, in, _ any) []any { return b.stepLock(s.(lockState), in.(Op)) }
		nm.Hash = func(s any) uint64 { return hashLease(s.(lockState).l) }
		nm.DescribeState = func(s any) string { return fmt.Sprintf("holder=%x", s.(lockState).l.hold) }
	}
	return nm.ToModel()
}

// Linearizable checks the history with porcupine against the model of a lock
// of kind k whose leases last ttl, for at most timeout, and returns
// porcupine's verdict: Ok, Illegal, or Unknown when it ran out of time.
func (h *History) Linearizable(ttl time.Duration, k LockKind, timeout time.Duration) porcupine.CheckResult {
	ops := h.Ops()
	hist := make([]porcupine.Operation, len(ops))
	for i, o := range ops {
		hist[i] = porcupine.Operation{ClientId: int(o.Client), Input: o, Output: o.Ok, Call: o.Call, Return: ret(o)}
	}
	return porcupine.CheckOperationsTimeout(model(ttl, k), hist, timeout)
}
