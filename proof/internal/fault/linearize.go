package fault

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"
)

// Result is what a linearizability check concluded.
type Result string

// The results of a check.
const (
	Ok      Result = "Ok"      // some order of the operations explains every result
	Illegal Result = "Illegal" // no order does: the lock misbehaved
	Unknown Result = "Unknown" // the check gave up at one of its limits; Check.Reason says which
)

// Limits bound one check of a history. The search's state (the choices it
// may still revise and the configurations it has ruled out) is counted in
// bytes as it grows; past Memory the search drops its older choices, and
// gives up, reporting Unknown, when that is not enough or when it then gets
// no further; past Time it gives up at once. See [History.Linearizable].
type Limits struct {
	Memory int64         // bytes of search state, at most
	Time   time.Duration // for the whole history
}

// DefaultLimits returns the limits the suite checks its histories within:
// 128 MiB of search state, and 2 minutes in the short mode, 5 in the long.
func DefaultLimits() Limits {
	return Limits{Memory: 128 << 20, Time: Pick(2*time.Minute, 5*time.Minute)}
}

// Check is the verdict of [History.Linearizable] and what it cost.
type Check struct {
	Result Result
	Reason string // for Illegal, the operation no order explains; for Unknown, the limit reached
	Ops    int    // operations checked
	Nodes  int64  // configurations the search visited
	Peak   int64  // the most bytes of search state held at once, by its own count
	Took   time.Duration
}

func (c Check) String() string {
	s := fmt.Sprintf("%s (%d ops, %d configurations, %.1f MiB of search state at most, %v)",
		c.Result, c.Ops, c.Nodes, float64(c.Peak)/(1<<20), c.Took.Round(time.Millisecond))
	if c.Reason != "" {
		s += ": " + c.Reason
	}
	return s
}

// Linearizable checks whether some order of the history's operations, each
// placed between its call and its return (an operation that returned an
// error anywhere after its call, or nowhere), explains every result, against
// the model of a lock of kind k whose leases last ttl. Operations on
// different names are checked apart; each name's are searched depth first,
// within the limits.
//
// The search visits configurations: an instant of the history (an
// operation's return), the lock's state, and the operations called by then
// and not yet placed. Three things keep it small. It places an operation
// only when the operation's return forces it to, trying the returning
// operation first. An acquire that found the lock busy changes no state, so
// it is placed as soon as the state allows it. And leases that had surely
// ended for every operation still to be placed are dropped from the state,
// so that configurations which differ only in old history are one. A
// configuration once ruled out is remembered and never searched again.
//
// Within the limits: the search counts the bytes its choices and the
// configurations it remembers take. As it goes, it forgets the
// configurations no choice left can lead back to; past lim.Memory it drops
// the older half of its choices, after which a failure can no longer prove
// the history illegal. It gives up, with Unknown and the reason, when one
// choice is left and the state is still too big, when it has visited
// maxStall configurations without getting further into the history after
// dropping choices, when a configuration is wider than maxWidth, or at
// lim.Time. Nothing it keeps grows with the history's length but the
// history itself.
func (h *History) Linearizable(ttl time.Duration, k LockKind, lim Limits) Check {
	start := time.Now()
	ops := h.Ops()
	byName := map[string][]Op{}
	for _, o := range ops {
		byName[o.Name] = append(byName[o.Name], o)
	}
	names := make([]string, 0, len(byName))
	for n := range byName {
		names = append(names, n)
	}
	slices.Sort(names)
	h.mu.Lock()
	b := bounds{ttl: int64(ttl), slack: int64(expirySlack), outlive: int64(h.outlive)}
	h.mu.Unlock()
	c := Check{Result: Ok, Ops: len(ops)}
	deadline := start.Add(lim.Time)
	for _, n := range names {
		s := newSearch(b, k, byName[n], lim.Memory, deadline)
		res, reason := s.run()
		c.Nodes += s.nodes
		c.Peak = max(c.Peak, s.peak)
		if res != Ok && c.Result != Illegal {
			c.Result, c.Reason = res, n+": "+reason
		}
		if res == Illegal {
			break
		}
	}
	c.Took = time.Since(start)
	return c
}

// maxWidth bounds a configuration: the operations in flight and the
// readers of its state, together. Every step of the search costs at most
// the square of it, in time and in memory.
const maxWidth = 256

// maxStall is how many configurations the search visits without getting
// further into the history, once it has dropped choices, before it gives
// up: past that it is most likely exploring, at great cost, the orders
// that can't explain an operation, and it could not conclude Illegal.
const maxStall = 1 << 18

// event is an operation's call or return, in a name's history.
type event struct {
	at  int64
	op  int32
	ret bool
}

// node is a configuration of the search: the next event, the lock's state,
// and the operations called and not yet placed, by index, sorted.
type node struct {
	i    int
	s    rwState
	pend []int32
}

// frame is a configuration whose children the search tries one after the
// other, should the one it follows fail. A child places one of the
// operations in flight, in one of the states the model allows after it:
// the returning operation first, which takes the search to the next event,
// then the others, which keep it at this one. Children are made as they are
// tried.
type frame struct {
	n      node
	cands  []int32   // the operations to place, the returning one first
	k      int       // the candidate whose states are being tried
	states []rwState // its states left to try
	given  bool      // a child was handed out
	cost   int64
}

type search struct {
	b        bounds
	step     func(rwState, Op) []rwState
	ops      []Op
	events   []event
	memory   int64
	deadline time.Time

	seen      map[string]int32 // configurations ruled out or on the way, by key, to their event
	seenBytes int64
	forgotAt  int64 // seenBytes after the last forget
	stack     []frame
	bytes     int64 // the stack's and seen's, by estimate
	peak      int64
	nodes     int64
	key       []byte
	dropped   bool  // choices were dropped to stay within memory
	furthest  int   // the furthest event a configuration reached
	since     int64 // configurations visited since then

	// the furthest return no child got past, for the report
	stuckAt   int
	stuckNode node
}

func newSearch(b bounds, k LockKind, ops []Op, memory int64, deadline time.Time) *search {
	events := make([]event, 0, 2*len(ops))
	for i, o := range ops {
		events = append(events, event{at: o.Call, op: int32(i)})
		if o.Err == "" {
			events = append(events, event{at: o.Return, op: int32(i), ret: true})
		}
	}
	// At one instant calls come first: intervals are closed, so an
	// operation called when another returns may be placed before it.
	slices.SortFunc(events, func(a, b event) int {
		if c := cmp.Compare(a.at, b.at); c != 0 {
			return c
		}
		switch {
		case a.ret == b.ret:
			return cmp.Compare(a.op, b.op)
		case a.ret:
			return 1
		}
		return -1
	})
	return &search{
		b: b, step: b.step(k), ops: ops, events: events, memory: memory, deadline: deadline,
		seen: map[string]int32{}, stuckAt: -1,
	}
}

func (s *search) run() (Result, string) {
	n := node{}
	for {
		n = s.advance(n)
		if n.i == len(s.events) {
			return Ok, ""
		}
		s.nodes++
		if s.nodes%1024 == 0 && time.Now().After(s.deadline) {
			return Unknown, fmt.Sprintf("gave up at its time limit after %d configurations, at %s", s.nodes, s.progress(n.i))
		}
		if n.i > s.furthest {
			s.furthest, s.since = n.i, 0
		}
		if s.since++; s.dropped && s.since > maxStall {
			return Unknown, fmt.Sprintf("gave up: it had dropped older choices to stay within its memory limit, then searched %d configurations without getting past %s; %s",
				maxStall, s.where(s.furthest), s.illegal())
		}
		if w := len(n.pend) + len(n.s.readers); w > maxWidth {
			return Unknown, fmt.Sprintf("gave up: %d operations in flight and live readers at once, over its limit of %d, at %s", w, maxWidth, s.progress(n.i))
		}
		if !s.remember(s.encode(n), n.i) {
			f := s.frame(n)
			s.stack = append(s.stack, f)
			s.grow(f.cost)
		}
		if s.seenBytes > 2*s.forgotAt+1<<20 {
			s.forget(n.i)
		}
		if s.bytes > s.memory && !s.shrink(n.i) {
			return Unknown, fmt.Sprintf("gave up at its memory limit, %.0f MiB of search state, after %d configurations, at %s",
				float64(s.memory)/(1<<20), s.nodes, s.progress(n.i))
		}
		// Follow the newest frame's next child; a frame with none left
		// is done.
		for {
			if len(s.stack) == 0 {
				if s.dropped {
					return Unknown, "gave up: every order it kept failed, and it had dropped older choices to stay within its memory limit; " + s.illegal()
				}
				return Illegal, s.illegal()
			}
			f := &s.stack[len(s.stack)-1]
			if kid, ok := s.next(f); ok {
				n = kid
				break
			}
			if !f.given && f.n.i > s.stuckAt {
				s.stuckAt, s.stuckNode = f.n.i, f.n
			}
			s.grow(-f.cost)
			s.stack = s.stack[:len(s.stack)-1]
		}
	}
}

// forget drops the configurations that no choice left can lead back to:
// those of events before the oldest choice's (before event i when no choice
// is left), since the search only moves forward from a choice.
func (s *search) forget(i int) {
	cut := int32(i)
	if len(s.stack) > 0 {
		cut = int32(s.stack[0].n.i)
	}
	for k, at := range s.seen {
		if at < cut {
			delete(s.seen, k)
			d := int64(len(k)) + seenOverhead
			s.seenBytes -= d
			s.bytes -= d
		}
	}
	// A map keeps its buckets after deletes: a copy gives them back.
	s.seen = maps.Clone(s.seen)
	s.forgotAt = s.seenBytes
}

// shrink brings the search's state under half its memory limit, at the
// configuration of event i, by dropping the older half of the choices left
// (after which the search can no longer prove the history illegal) and
// forgetting, again until it fits or one choice is left. It reports whether
// the state fits in the limit.
func (s *search) shrink(i int) bool {
	s.forget(i)
	for s.bytes > s.memory/2 && len(s.stack) > 1 {
		half := len(s.stack) / 2
		for _, f := range s.stack[:half] {
			s.bytes -= f.cost
		}
		s.stack = slices.Clone(s.stack[half:])
		s.dropped = true
		s.forget(i)
	}
	return s.bytes <= s.memory
}

// advance moves n along the events that leave no choice: calls, and returns
// of operations placed already. It stops at the return of an operation not
// placed yet, or at the end.
func (s *search) advance(n node) node {
	for ; n.i < len(s.events); n.i++ {
		e := s.events[n.i]
		if !e.ret {
			if x := s.ops[e.op]; pure(x) && len(s.step(n.s, x)) > 0 {
				continue // placed at once
			}
			n.pend = insertSorted(n.pend, e.op)
			continue
		}
		if _, found := slices.BinarySearch(n.pend, e.op); found {
			n.s = s.prune(n.s, n.pend, e.at)
			return n
		}
	}
	return n
}

// frame returns the frame of n, at the return of an operation not placed
// yet.
func (s *search) frame(n node) frame {
	x := s.events[n.i].op
	cands := []int32{x}
	for _, y := range n.pend {
		// A busy acquire still in flight could not be placed in this
		// state, or it would have been.
		if y != x && !pure(s.ops[y]) {
			cands = append(cands, y)
		}
	}
	return frame{
		n: n, cands: cands, k: -1,
		cost: 160 + 8*int64(len(n.pend)) + 32*int64(len(n.s.readers)),
	}
}

// next returns f's next child, or false when none is left.
func (s *search) next(f *frame) (node, bool) {
	for len(f.states) == 0 {
		if f.k++; f.k == len(f.cands) {
			return node{}, false
		}
		y := s.ops[f.cands[f.k]]
		f.states = s.step(f.n.s, y)
		if y.Err != "" && f.k > 0 {
			// An unknown outcome without effect: leaving the operation
			// in flight keeps every choice placing it would.
			f.states = slices.DeleteFunc(f.states, func(st rwState) bool { return equalState(st, f.n.s) })
		}
	}
	st := f.states[0]
	f.states = f.states[1:]
	f.given = true
	y := f.cands[f.k]
	i := f.n.i
	if f.k == 0 {
		i++ // the returning operation is placed: on to the next event
	}
	return node{i, st, s.settle(st, without(f.n.pend, y))}, true
}

// settle places, in state st, the busy acquires in flight that st allows:
// each leaves the state as it is, so placing it now rules nothing out.
func (s *search) settle(st rwState, pend []int32) []int32 {
	return slices.DeleteFunc(pend, func(y int32) bool {
		return pure(s.ops[y]) && len(s.step(st, s.ops[y])) > 0
	})
}

// prune drops from st the leases no operation still to be placed can see
// live, at the event at now.
func (s *search) prune(st rwState, pend []int32, now int64) rwState {
	horizon := now
	for _, y := range pend {
		if o := s.ops[y]; o.Err == "" {
			horizon = min(horizon, o.Call)
		}
	}
	return s.b.prune(st, horizon, func(hold uint64) int64 {
		at := int64(math.MaxInt64)
		for _, y := range pend {
			if o := s.ops[y]; o.Err != "" && o.Hold == hold {
				at = min(at, o.Call)
			}
		}
		return at
	})
}

// seenOverhead is about what a remembered configuration costs beside its
// key: its share of the map, the key's header and the rounding up of its
// allocation (measured: with it, the count is within a third of the heap
// the search holds).
const seenOverhead = 96

// remember records the configuration with key k, at event i, as visited,
// and reports whether it had been already.
func (s *search) remember(k []byte, i int) bool {
	if _, ok := s.seen[string(k)]; ok {
		return true
	}
	s.seen[string(k)] = int32(i)
	d := int64(len(k)) + seenOverhead
	s.seenBytes += d
	s.grow(d)
	return false
}

func (s *search) grow(d int64) {
	s.bytes += d
	s.peak = max(s.peak, s.bytes)
}

// encode writes n's key: its event, its state and its operations in flight.
func (s *search) encode(n node) []byte {
	k := s.key[:0]
	k = binary.AppendUvarint(k, uint64(n.i))
	put := func(l lease) []byte {
		k = binary.AppendUvarint(k, l.hold)
		k = binary.AppendVarint(k, l.call)
		return binary.AppendVarint(k, l.ret)
	}
	k = put(n.s.w)
	k = binary.AppendUvarint(k, uint64(len(n.s.readers)))
	for _, r := range n.s.readers {
		k = put(r)
	}
	for _, y := range n.pend {
		k = binary.AppendUvarint(k, uint64(y))
	}
	s.key = k
	return k
}

func equalState(a, b rwState) bool {
	return a.w == b.w && slices.Equal(a.readers, b.readers)
}

// insertSorted returns a copy of p with y in it.
func insertSorted(p []int32, y int32) []int32 {
	i, _ := slices.BinarySearch(p, y)
	q := make([]int32, 0, len(p)+1)
	q = append(q, p[:i]...)
	q = append(q, y)
	return append(q, p[i:]...)
}

// without returns a copy of p without y.
func without(p []int32, y int32) []int32 {
	q := make([]int32, 0, len(p))
	for _, z := range p {
		if z != y {
			q = append(q, z)
		}
	}
	return q
}

func (s *search) where(i int) string {
	return fmt.Sprintf("op %v", s.ops[s.events[i].op])
}

func (s *search) progress(i int) string {
	return fmt.Sprintf("event %d of %d (%s)", i, len(s.events), s.where(i))
}

// illegal describes the furthest return no order got past.
func (s *search) illegal() string {
	if s.stuckAt < 0 {
		return "no order explains the history"
	}
	n := s.stuckNode
	var b strings.Builder
	fmt.Fprintf(&b, "no order explains %s; in one state tried, %s", s.where(n.i), describeState(n.s))
	if len(n.pend) > 1 {
		b.WriteString(", with in flight:")
		for i, y := range n.pend {
			if i == 5 {
				fmt.Fprintf(&b, " and %d more", len(n.pend)-5)
				break
			}
			if y != s.events[n.i].op {
				fmt.Fprintf(&b, " [%v]", s.ops[y])
			}
		}
	}
	return b.String()
}

func describeState(st rwState) string {
	if st.w.hold == 0 && len(st.readers) == 0 {
		return "the lock free"
	}
	var parts []string
	if st.w.hold != 0 {
		parts = append(parts, fmt.Sprintf("held by hold %x (lease set by an op called at %d)", st.w.hold, st.w.call))
	}
	for i, r := range st.readers {
		if i == 4 {
			parts = append(parts, fmt.Sprintf("and %d more readers", len(st.readers)-4))
			break
		}
		parts = append(parts, fmt.Sprintf("read by hold %x (lease set at %d)", r.hold, r.call))
	}
	return strings.Join(parts, ", ")
}
