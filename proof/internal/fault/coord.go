package fault

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/rpc"
	"slices"
	"sync"
	"testing"
	"time"
)

// Coordinator is the test process's end of the suite's side channel: it
// serves the [Resource], collects the [History] of every process, keeps the
// notes children send, and opens gates that children wait for. Children reach
// it over loopback TCP through a [Link]; the test process uses it directly.
// Its methods are safe for concurrent use. The test's cleanup closes it.
type Coordinator struct {
	Resource *Resource
	History  *History

	l net.Listener

	mu      sync.Mutex
	notes   []Note
	changed chan struct{} // closed and replaced when a note arrives
	gates   map[string]chan struct{}
	counts  map[string]int64
	hooks   map[string]func(Note)
	conns   []net.Conn
	wg      sync.WaitGroup
}

// Note is something a child tells the test process: what happened, when (on
// the suite's clock), and a number or text that goes with it.
type Note struct {
	Child int
	What  string
	At    int64
	Value int64
	Text  string
}

// NewCoordinator starts a coordinator with an empty resource and history on a
// free loopback port.
func NewCoordinator(tb testing.TB) *Coordinator {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("fault: coordinator listen: %v", err)
	}
	c := &Coordinator{
		Resource: NewResource(),
		History:  &History{},
		l:        l,
		changed:  make(chan struct{}),
		gates:    map[string]chan struct{}{},
		counts:   map[string]int64{},
		hooks:    map[string]func(Note){},
	}
	srv := rpc.NewServer()
	if err := srv.RegisterName("Fault", &Service{c}); err != nil {
		tb.Fatalf("fault: %v", err)
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			c.mu.Lock()
			c.conns = append(c.conns, conn)
			c.mu.Unlock()
			c.wg.Add(1)
			go func() {
				defer c.wg.Done()
				srv.ServeConn(conn)
			}()
		}
	}()
	tb.Cleanup(c.close)
	return c
}

// Addr returns the address children dial.
func (c *Coordinator) Addr() string { return c.l.Addr().String() }

func (c *Coordinator) close() {
	c.l.Close()
	c.mu.Lock()
	for _, conn := range c.conns {
		conn.Close()
	}
	for _, g := range c.gates { // release children still waiting
		select {
		case <-g:
		default:
			close(g)
		}
	}
	c.mu.Unlock()
	c.wg.Wait()
}

func (c *Coordinator) gate(name string) chan struct{} {
	g := c.gates[name]
	if g == nil {
		g = make(chan struct{})
		c.gates[name] = g
	}
	return g
}

// Open opens the gate called name: every child waiting for it, now or later,
// goes on. Opening an open gate does nothing.
func (c *Coordinator) Open(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	g := c.gate(name)
	select {
	case <-g:
	default:
		close(g)
	}
}

// OnNote makes the coordinator call fn for each note called what, before the
// child's call that sent it returns: the child is still waiting for the reply
// while fn runs, which lets a test pause it at a known point.
func (c *Coordinator) OnNote(what string, fn func(Note)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.hooks[what] = fn
}

func (c *Coordinator) note(n Note) {
	c.mu.Lock()
	hook := c.hooks[n.What]
	c.mu.Unlock()
	if hook != nil {
		hook(n)
	}
	c.mu.Lock()
	c.notes = append(c.notes, n)
	close(c.changed)
	c.changed = make(chan struct{})
	c.mu.Unlock()
}

// Notes returns the notes called what, in the order they arrived; every note
// when what is "".
func (c *Coordinator) Notes(what string) []Note {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.DeleteFunc(slices.Clone(c.notes), func(n Note) bool { return what != "" && n.What != what })
}

// WaitNote waits until child has sent a note called what, and returns the
// first one. It fails the test if none arrives within timeout.
func (c *Coordinator) WaitNote(tb testing.TB, child int, what string, timeout time.Duration) Note {
	tb.Helper()
	n, err := c.waitNote(tb.Context(), child, what, timeout)
	if err != nil {
		tb.Fatalf("fault: %v", err)
	}
	return n
}

func (c *Coordinator) waitNote(ctx context.Context, child int, what string, timeout time.Duration) (Note, error) {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		c.mu.Lock()
		for _, n := range c.notes {
			if n.Child == child && n.What == what {
				c.mu.Unlock()
				return n, nil
			}
		}
		changed := c.changed
		c.mu.Unlock()
		select {
		case <-changed:
		case <-deadline.C:
			return Note{}, fmt.Errorf("child %d sent no note %q within %v", child, what, timeout)
		case <-ctx.Done():
			return Note{}, ctx.Err()
		}
	}
}

// Add adds delta to the counter called name, which starts at 0, and returns
// its new value: a count that every process shares, such as the attempts at
// a job's slot across replicas.
func (c *Coordinator) Add(name string, delta int64) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.counts[name] += delta
	return c.counts[name]
}

// Service is the coordinator's RPC service, which children call through a
// [Link]. Its methods follow net/rpc's conventions; tests don't call them.
type Service struct{ c *Coordinator }

// EnterArgs are the arguments of [Resource.Enter].
type EnterArgs struct {
	Name     string
	Hold     uint64
	Deadline int64
}

// EnterReply is the result of [Resource.Enter].
type EnterReply struct {
	Version uint64
	Entered bool
}

// WriteArgs are the arguments of [Resource.WriteBy].
type WriteArgs struct {
	Name          string
	Hold, Version uint64
	Deadline      int64
}

// WriteReply is the result of [Resource.WriteBy].
type WriteReply struct {
	Accepted bool
	Version  uint64
}

// Enter serves [Resource.Enter].
func (s *Service) Enter(a EnterArgs, r *EnterReply) error {
	r.Version, r.Entered = s.c.Resource.Enter(a.Name, a.Hold, a.Deadline)
	return nil
}

// Write serves [Resource.WriteBy].
func (s *Service) Write(a WriteArgs, r *WriteReply) error {
	r.Accepted, r.Version = s.c.Resource.WriteBy(a.Name, a.Hold, a.Version, a.Deadline)
	return nil
}

// Record adds a child's operations to the history.
func (s *Service) Record(ops []Op, _ *struct{}) error {
	s.c.History.Add(ops...)
	return nil
}

// Note records a child's note, after running the hook set for it.
func (s *Service) Note(n Note, _ *struct{}) error {
	s.c.note(n)
	return nil
}

// AddArgs are the arguments of [Coordinator.Add].
type AddArgs struct {
	Name  string
	Delta int64
}

// Add serves [Coordinator.Add].
func (s *Service) Add(a AddArgs, n *int64) error {
	*n = s.c.Add(a.Name, a.Delta)
	return nil
}

// Wait returns when the gate called name opens.
func (s *Service) Wait(name string, _ *struct{}) error {
	s.c.mu.Lock()
	g := s.c.gate(name)
	s.c.mu.Unlock()
	<-g
	return nil
}

// Link is a child's connection to the test process's [Coordinator]. Its
// methods are safe for concurrent use; each is one round trip.
type Link struct {
	child int
	c     *rpc.Client
}

// errNoLink is returned by the methods of a nil Link, as in a test process.
var errNoLink = errors.New("fault: no link to the test process")

// Enter is [Resource.Enter] in the test process. The deadline travels with
// the call, so the resource judges it by when the call arrives, however long
// the link took.
func (l *Link) Enter(name string, hold uint64, deadline int64) (uint64, bool, error) {
	if l == nil {
		return 0, false, errNoLink
	}
	var r EnterReply
	err := l.c.Call("Fault.Enter", EnterArgs{name, hold, deadline}, &r)
	return r.Version, r.Entered, err
}

// Write is [Resource.WriteBy] in the test process.
func (l *Link) Write(name string, hold, version uint64, deadline int64) (bool, uint64, error) {
	if l == nil {
		return false, 0, errNoLink
	}
	var r WriteReply
	err := l.c.Call("Fault.Write", WriteArgs{name, hold, version, deadline}, &r)
	return r.Accepted, r.Version, err
}

// Record sends operations to the test process's history.
func (l *Link) Record(ops []Op) error {
	if l == nil {
		return errNoLink
	}
	if len(ops) == 0 {
		return nil
	}
	return l.c.Call("Fault.Record", ops, &struct{}{})
}

// Note tells the test process what happened, with a number and a text, and
// returns once the test process has handled it (see [Coordinator.OnNote]).
func (l *Link) Note(what string, value int64, text string) error {
	if l == nil {
		return errNoLink
	}
	return l.c.Call("Fault.Note", Note{Child: l.child, What: what, At: Now(), Value: value, Text: text}, &struct{}{})
}

// Add is [Coordinator.Add] in the test process.
func (l *Link) Add(name string, delta int64) (int64, error) {
	if l == nil {
		return 0, errNoLink
	}
	var n int64
	err := l.c.Call("Fault.Add", AddArgs{name, delta}, &n)
	return n, err
}

// Wait blocks until the test process opens the gate called name.
func (l *Link) Wait(name string) error {
	if l == nil {
		return errNoLink
	}
	return l.c.Call("Fault.Wait", name, &struct{}{})
}

// Child returns the number of the child the link belongs to.
func (l *Link) Child() int { return l.child }

func dialLink(addr string, child int) (*Link, error) {
	c, err := rpc.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	return &Link{child: child, c: c}, nil
}

// Close closes the link.
func (l *Link) Close() error { return l.c.Close() }
