package record

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wakuwaku-go/wakuwaku/internal/redistest"
)

// lookTrips counts the round trips of a client's looks (HMGET), alone or
// in pipelines, and can hold them until more have come.
type lookTrips struct {
	n, cmds atomic.Int64
	gate    chan struct{} // if set, each round trip waits for it to close
	sizes   sync.Map      // round trip number -> its commands
}

func (p *lookTrips) DialHook(next redis.DialHook) redis.DialHook { return next }
func (p *lookTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() == "hmget" {
			p.count(1)
		}
		return next(ctx, cmd)
	}
}
func (p *lookTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if len(cmds) > 0 && cmds[0].Name() == "hmget" { // not a connection's handshake
			p.count(len(cmds))
		}
		return next(ctx, cmds)
	}
}

func (p *lookTrips) count(cmds int) {
	if p.gate != nil {
		<-p.gate
	}
	p.sizes.Store(p.n.Add(1), cmds)
	p.cmds.Add(int64(cmds))
}

// TestBatchClient sends many looks at once through a Batcher, on a
// real redis-server: the first goes alone, and those that come while it is
// on the wire go together in one pipeline, each with its own reply, that
// of a caller whose context ended meanwhile included.
func TestBatchClient(t *testing.T) {
	const n = 100
	rdb := lookRecords(t, n)
	ctx := context.Background()
	b := &Batcher{c: rdb, wire: 1}
	trips := &lookTrips{gate: make(chan struct{})}
	queued := func() int {
		b.mu.Lock()
		defer b.mu.Unlock()
		q := 0
		for _, bt := range b.waiting {
			q += len(bt.cmds)
		}
		return q
	}
	rdb.AddHook(trips)
	look := func(ctx context.Context, i int) (string, error) {
		cmd := redis.NewSliceCmd(ctx, "hmget", "rec"+strconv.Itoa(i), "slot")
		if err := b.Process(ctx, cmd); err != nil {
			return "", err
		}
		s, _ := cmd.Val()[0].(string)
		return s, nil
	}
	first := make(chan error, 1)
	go func() {
		s, err := look(ctx, 0)
		if err == nil && s != "s0" {
			err = errors.New("the first look read " + s)
		}
		first <- err
	}()
	onWire := func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return b.out == 1 && len(b.waiting) == 0
	}
	waitFor(t, onWire, "the first look on the wire")
	gone := errors.New("the run was cancelled")
	cancelled, cancel := context.WithCancelCause(ctx)
	var wg sync.WaitGroup
	got := make([]string, n)
	errs := make([]error, n)
	for i := 1; i < n; i++ {
		wg.Go(func() { got[i], errs[i] = look(ctx, i) })
	}
	var cgot string
	var cerr error
	wg.Go(func() { cgot, cerr = look(cancelled, 0) })
	waitFor(t, func() bool { return queued() == n }, "every other look waiting")
	cancel(gone)
	close(trips.gate) // the first look's round trip ends
	wg.Wait()
	if err := <-first; err != nil {
		t.Error(err)
	}
	for i := 1; i < n; i++ {
		if errs[i] != nil || got[i] != "s"+strconv.Itoa(i) {
			t.Errorf("look %d = %q, %v; want %q", i, got[i], errs[i], "s"+strconv.Itoa(i))
		}
	}
	if cerr != nil || cgot != "s0" {
		t.Errorf("the look whose context ended = %q, %v; want its reply, s0", cgot, cerr)
	}
	if rt, cmds := trips.n.Load(), trips.cmds.Load(); rt != 2 || cmds != n+1 {
		t.Errorf("%d looks took %d round trips, %d commands; want 2: the first alone, the rest in one pipeline", n+1, rt, cmds)
	}
	// A look alone, after, goes alone at once.
	if s, err := look(ctx, 7); err != nil || s != "s7" {
		t.Errorf("a look alone = %q, %v; want s7", s, err)
	}
	if rt := trips.n.Load(); rt != 3 {
		t.Errorf("round trips = %d after a look alone, want 3", rt)
	}
}

// lookRecords starts a redis-server and writes n records for looks to
// read: rec0 to rec<n-1>, whose field slot is s0 to s<n-1>.
func lookRecords(t *testing.T, n int) *redis.Client {
	t.Helper()
	rdb := redistest.Start(t).Client(t)
	for i := range n {
		if err := rdb.HSet(context.Background(), "rec"+strconv.Itoa(i), "slot", "s"+strconv.Itoa(i)).Err(); err != nil {
			t.Fatal(err)
		}
	}
	return rdb
}

// waitFor waits until cond holds, and fails t if it does not within 10 s.
func waitFor(t *testing.T, cond func() bool, what string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
	}
}

// TestBatchClientBounds: with wire batches on the wire, the looks that
// come meanwhile wait in batches of at most size, sent first come first as
// the wire frees up, each look with its own reply.
func TestBatchClientBounds(t *testing.T) {
	const n = 27
	rdb := lookRecords(t, n)
	ctx := context.Background()
	b := &Batcher{c: rdb, wire: 2, size: 10}
	trips := &lookTrips{gate: make(chan struct{})}
	rdb.AddHook(trips)
	state := func() (out int, waiting []int) {
		b.mu.Lock()
		defer b.mu.Unlock()
		for _, bt := range b.waiting {
			waiting = append(waiting, len(bt.cmds))
		}
		return b.out, waiting
	}
	got := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	look := func(i int) {
		wg.Go(func() {
			cmd := redis.NewSliceCmd(ctx, "hmget", "rec"+strconv.Itoa(i), "slot")
			if errs[i] = b.Process(ctx, cmd); errs[i] == nil {
				got[i], _ = cmd.Val()[0].(string)
			}
		})
	}
	look(0)
	look(1)
	waitFor(t, func() bool { out, w := state(); return out == 2 && len(w) == 0 }, "two looks on the wire")
	for i := 2; i < n; i++ {
		look(i)
	}
	waitFor(t, func() bool { _, w := state(); return slices.Equal(w, []int{10, 10, 5}) }, "the rest waiting in batches of 10, 10 and 5")
	close(trips.gate)
	wg.Wait()
	for i := range n {
		if errs[i] != nil || got[i] != "s"+strconv.Itoa(i) {
			t.Errorf("look %d = %q, %v; want %q", i, got[i], errs[i], "s"+strconv.Itoa(i))
		}
	}
	var sizes []int
	trips.sizes.Range(func(_, v any) bool { sizes = append(sizes, v.(int)); return true })
	slices.Sort(sizes)
	if want := []int{1, 1, 5, 10, 10}; !slices.Equal(sizes, want) {
		t.Errorf("round trips of %v looks, want %v", sizes, want)
	}
	// The last sender lets go of the wire just after its callers have
	// their replies.
	waitFor(t, func() bool { out, w := state(); return out == 0 && len(w) == 0 }, "no batch on the wire or waiting after")
}

// tripOrder records, for each round trip, the names of its commands, and
// holds the trips until gate closes.
type tripOrder struct {
	gate  chan struct{}
	mu    sync.Mutex
	trips [][]string
}

func (p *tripOrder) DialHook(next redis.DialHook) redis.DialHook { return next }
func (p *tripOrder) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		p.record([]redis.Cmder{cmd})
		return next(ctx, cmd)
	}
}
func (p *tripOrder) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		p.record(cmds)
		return next(ctx, cmds)
	}
}

func (p *tripOrder) record(cmds []redis.Cmder) {
	if len(cmds) == 0 || (cmds[0].Name() != "hmget" && cmds[0].Name() != "hget") {
		return // a connection's handshake
	}
	<-p.gate
	names := make([]string, len(cmds))
	for i, c := range cmds {
		names[i] = c.Name()
	}
	p.mu.Lock()
	p.trips = append(p.trips, names)
	p.mu.Unlock()
}

// TestBatchClientLater: the completions (sent through laterClient) that
// wait go after the claims and looks that wait, even those that came after
// them, so that no run's start waits for another run's completion; but a
// batch of completions lets at most wire batches pass it, so a backlog of
// claims that never ends can't hold completions back for good.
func TestBatchClientLater(t *testing.T) {
	for _, tc := range []struct {
		name string
		size int
		sent []string // after the first look, which is on the wire: hget a completion, hmget a look
		want [][]string
	}{
		{"the looks first", 0, []string{"hget", "hget", "hget", "hmget", "hmget"},
			[][]string{{"hmget"}, {"hmget", "hmget"}, {"hget", "hget", "hget"}}},
		{"a completion passed by one batch at most", 1, []string{"hget", "hmget", "hmget", "hmget"},
			[][]string{{"hmget"}, {"hmget"}, {"hget"}, {"hmget"}, {"hmget"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rdb := lookRecords(t, 1)
			ctx := context.Background()
			b := &Batcher{c: rdb, wire: 1, size: tc.size}
			order := &tripOrder{gate: make(chan struct{})}
			rdb.AddHook(order)
			state := func() (out, queued int) {
				b.mu.Lock()
				defer b.mu.Unlock()
				for _, bt := range append(slices.Clone(b.waiting), b.later...) {
					queued += len(bt.cmds)
				}
				return b.out, queued
			}
			var wg sync.WaitGroup
			var failed atomic.Int64
			send := func(name string) {
				wg.Go(func() {
					var c interface {
						Process(context.Context, redis.Cmder) error
					} = b
					var cmd redis.Cmder = redis.NewSliceCmd(ctx, "hmget", "rec0", "slot")
					if name == "hget" {
						c, cmd = laterClient{b}, redis.NewStringCmd(ctx, "hget", "rec0", "slot")
					}
					if err := c.Process(ctx, cmd); err != nil {
						failed.Add(1)
					}
				})
			}
			send("hmget")
			waitFor(t, func() bool { out, _ := state(); return out == 1 }, "the first look on the wire")
			for i, name := range tc.sent {
				send(name)
				waitFor(t, func() bool { _, q := state(); return q == i+1 }, "the commands queued in order")
			}
			close(order.gate)
			wg.Wait()
			if n := failed.Load(); n > 0 {
				t.Fatalf("%d commands failed", n)
			}
			if !slices.EqualFunc(order.trips, tc.want, slices.Equal) {
				t.Errorf("round trips %v, want %v", order.trips, tc.want)
			}
		})
	}
}

// TestBatchClientEndedContext sends a command whose context has ended
// through a Batcher and its later client, on a real redis-server: neither
// sends it, as a go-redis client would not, and the command holds the
// context's error. A Batcher used to send it, so that a completion could
// reach Redis after Shutdown had given up and returned.
func TestBatchClientEndedContext(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	trips := &lookTrips{}
	rdb.AddHook(trips)
	b := NewBatcher(rdb, 0)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	for _, c := range []struct {
		name string
		send func(context.Context, redis.Cmder) error
	}{{"claims", b.Process}, {"completions", b.Later().Process}} {
		t.Run(c.name, func(t *testing.T) {
			cmd := redis.NewSliceCmd(ctx, "hmget", "record", "run")
			if err := c.send(ctx, cmd); !errors.Is(err, context.Canceled) || !errors.Is(cmd.Err(), context.Canceled) {
				t.Errorf("Process = %v, command's error %v; want %v", err, cmd.Err(), context.Canceled)
			}
		})
	}
	if n := trips.cmds.Load(); n != 0 {
		t.Errorf("%d commands sent, want none", n)
	}
}
