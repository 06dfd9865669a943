package fault

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Kind is what a lock operation did.
type Kind uint8

// The operations a history records. A Lock's token and an RWLock's writer
// token share Acquire, Extend and Release: an RWLock's writer is recorded as
// WriteAcquire and then Extend and Release on the same hold.
const (
	Acquire      Kind = iota + 1 // Lock.TryLock
	Extend                       // Token.Extend
	Release                      // Token.Release
	WriteAcquire                 // RWLock.TryWrite
	ReadAcquire                  // RWLock.TryRead
	ReadExtend                   // ReadToken.Extend
	ReadRelease                  // ReadToken.Release
)

var kindNames = [...]string{"?", "acquire", "extend", "release", "write", "read", "read-extend", "read-release"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", k)
}

func (k Kind) acquires() bool { return k == Acquire || k == WriteAcquire || k == ReadAcquire }
func (k Kind) extends() bool  { return k == Extend || k == ReadExtend }
func (k Kind) releases() bool { return k == Release || k == ReadRelease }
func (k Kind) reads() bool    { return k == ReadAcquire || k == ReadExtend || k == ReadRelease }

// Op is one lock operation as a caller saw it: called at Call, returned at
// Return (both on the suite's clock, see [Now]). Ok is the result: a token
// for an acquire, true for a release or an extension. Err is set when the
// call returned an error, which leaves its outcome unknown.
type Op struct {
	Client int32  // the goroutine that called, unique across processes
	Kind   Kind   // what was called
	Name   string // the lock's name (its Redis key)
	Hold   uint64 // the token: one per acquire, unique across processes
	Call   int64
	Return int64
	Ok     bool
	Err    string
}

func (o Op) String() string {
	res := fmt.Sprint(o.Ok)
	if o.Err != "" {
		res = "error " + o.Err
	}
	return fmt.Sprintf("client %d %s %s hold %x [%d, %d] -> %s",
		o.Client, o.Kind, o.Name, o.Hold, o.Call, o.Return, res)
}

// Recorder records the lock operations of one process. Its methods are safe
// for concurrent use.
type Recorder struct {
	proc  uint64 // the process's number, in the high bits of every hold
	holds atomic.Uint64

	mu  sync.Mutex
	ops []Op
}

// NewRecorder returns a recorder for process number proc (0 for the test
// process, 1, 2... for children), which keeps the holds of different
// processes apart.
func NewRecorder(proc int) *Recorder {
	return &Recorder{proc: uint64(proc) << 40}
}

// NewHold returns a hold id no other acquire, in any process, uses.
func (r *Recorder) NewHold() uint64 { return r.proc | r.holds.Add(1) }

// Do records one operation: it takes the call time, runs call, takes the
// return time, and records the result and error. It returns what call did.
func (r *Recorder) Do(client int32, kind Kind, name string, hold uint64, call func() (bool, error)) (bool, error) {
	op := Op{Client: client, Kind: kind, Name: name, Hold: hold, Call: Now()}
	ok, err := call()
	op.Return = Now()
	op.Ok = ok && err == nil
	if err != nil {
		op.Err = err.Error()
	}
	r.mu.Lock()
	r.ops = append(r.ops, op)
	r.mu.Unlock()
	return ok, err
}

// Take removes and returns the operations recorded so far.
func (r *Recorder) Take() []Op {
	r.mu.Lock()
	defer r.mu.Unlock()
	ops := r.ops
	r.ops = nil
	return ops
}

// History is the operations of every process in one scenario. Its methods are
// safe for concurrent use.
type History struct {
	mu      sync.Mutex
	ops     []Op
	outlive time.Duration
}

// KeysOutlive tells the check that the server may keep a lock's key up to d
// longer than its TTL, as a slot migration's MIGRATE does
// (redistest.Cluster.LongestMigrate): an acquire that found the lock busy
// up to d after the lease's end is then explained. It loosens the check
// only that way: a lease never ends earlier.
func (h *History) KeysOutlive(d time.Duration) {
	h.mu.Lock()
	h.outlive = d
	h.mu.Unlock()
}

// Add appends operations to the history.
func (h *History) Add(ops ...Op) {
	h.mu.Lock()
	h.ops = append(h.ops, ops...)
	h.mu.Unlock()
}

// Ops returns a copy of the history.
func (h *History) Ops() []Op {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.ops)
}

// Tally counts a history's operations.
type Tally struct {
	Ops, Acquired, Busy, Errors int
}

// Tally counts the operations, the acquires that got a token and those that
// found the lock busy, and the calls that returned an error.
func (h *History) Tally() Tally {
	h.mu.Lock()
	defer h.mu.Unlock()
	var t Tally
	for _, o := range h.ops {
		t.Ops++
		switch {
		case o.Err != "":
			t.Errors++
		case o.Kind.acquires() && o.Ok:
			t.Acquired++
		case o.Kind.acquires():
			t.Busy++
		}
	}
	return t
}

// Errors returns the operations that returned an error.
func (h *History) Errors() []Op {
	h.mu.Lock()
	defer h.mu.Unlock()
	var errs []Op
	for _, o := range h.ops {
		if o.Err != "" {
			errs = append(errs, o)
		}
	}
	return errs
}

// segment is a stretch of time during which one hold surely held its lease:
// from the return of a successful acquire or extension to its call plus the
// TTL, cut at the call of the hold's release. Redis expires a key no earlier
// than one TTL after the command that set it ran, which is after its call;
// and the caller knew of the lease only from the return on.
type segment struct {
	name       string
	hold       uint64
	read       bool
	start, end int64
}

// Overlap is two holds of one lock whose leases were both live at once, which
// a lock must never allow: two holders of a Lock or of an RWLock's writer
// side, or a writer with a reader.
type Overlap struct {
	Name    string
	A, B    uint64 // the two holds
	Read    bool   // whether one of them was a reader
	From    int64  // when both were live, on the suite's clock
	Overlap time.Duration
}

func (o Overlap) String() string {
	what := "two writers"
	if o.Read {
		what = "a writer and a reader"
	}
	return fmt.Sprintf("%s: %s, holds %x and %x, both live for %v from %d",
		o.Name, what, o.A, o.B, o.Overlap, o.From)
}

// Overlaps returns every overlap in the history, for locks whose lease is
// ttl. Only holds whose lease had not ended count: a holder that stalled past
// its lease may still act, and a lease bounds nothing more.
func (h *History) Overlaps(ttl time.Duration) []Overlap {
	segs := segments(h.Ops(), ttl)
	var found []Overlap
	for name, ss := range segs {
		slices.SortFunc(ss, func(a, b segment) int { return cmp.Compare(a.start, b.start) })
		// The latest-ending writer and reader seen so far.
		var w, r segment
		for _, s := range ss {
			if w.end > s.start {
				found = append(found, Overlap{name, w.hold, s.hold, s.read, s.start, time.Duration(min(w.end, s.end) - s.start)})
			}
			if !s.read && r.end > s.start {
				found = append(found, Overlap{name, r.hold, s.hold, true, s.start, time.Duration(min(r.end, s.end) - s.start)})
			}
			if s.read && s.end > r.end {
				r = s
			} else if !s.read && s.end > w.end {
				w = s
			}
		}
	}
	return found
}

// segments returns, by lock name, each hold's live stretches, merged so that
// one hold's stretches don't overlap each other.
func segments(ops []Op, ttl time.Duration) map[string][]segment {
	type holdInfo struct {
		name    string
		read    bool
		cut     int64 // the earliest release call
		stretch []segment
	}
	holds := map[uint64]*holdInfo{}
	get := func(o Op) *holdInfo {
		hi := holds[o.Hold]
		if hi == nil {
			hi = &holdInfo{name: o.Name, read: o.Kind.reads(), cut: math.MaxInt64}
			holds[o.Hold] = hi
		}
		return hi
	}
	for _, o := range ops {
		switch {
		case o.Kind.releases():
			hi := get(o)
			hi.cut = min(hi.cut, o.Call)
		case o.Ok && (o.Kind.acquires() || o.Kind.extends()):
			hi := get(o)
			hi.stretch = append(hi.stretch, segment{start: o.Return, end: o.Call + int64(ttl)})
		}
	}
	out := map[string][]segment{}
	for id, hi := range holds {
		ss := hi.stretch
		slices.SortFunc(ss, func(a, b segment) int { return cmp.Compare(a.start, b.start) })
		var merged []segment
		for _, s := range ss {
			s.end = min(s.end, hi.cut)
			if s.end <= s.start {
				continue
			}
			s.name, s.hold, s.read = hi.name, id, hi.read
			if n := len(merged); n > 0 && s.start <= merged[n-1].end {
				merged[n-1].end = max(merged[n-1].end, s.end)
				continue
			}
			merged = append(merged, s)
		}
		out[hi.name] = append(out[hi.name], merged...)
	}
	return out
}

// flushEvery is how often a child sends its recorded operations to the test
// process.
const flushEvery = 100 * time.Millisecond

// Stream sends what rec records to link every flushEvery until ctx ends, and
// once more then. It returns the first error sending met.
func Stream(ctx context.Context, rec *Recorder, l *Link) error {
	t := time.NewTicker(flushEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return l.Record(rec.Take())
		case <-t.C:
			if err := l.Record(rec.Take()); err != nil {
				return err
			}
		}
	}
}
