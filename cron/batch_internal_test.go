package cron

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wakuwaku-go/wakuwaku/internal/redistest"
)

// lookTrips counts the round trips of a client's looks (HMGET), alone or
// in pipelines, and can hold the first until more have come.
type lookTrips struct {
	n, cmds atomic.Int64
	hold    func() // called before the first look goes, if set
	once    sync.Once
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
	if p.hold != nil {
		p.once.Do(p.hold)
	}
	p.n.Add(1)
	p.cmds.Add(int64(cmds))
}

// TestBatchClient sends many looks at once through a batchClient, on a
// real redis-server: the first goes alone, and those that come while it is
// on the wire go together in one pipeline, each with its own reply, that
// of a caller whose context ended meanwhile included.
func TestBatchClient(t *testing.T) {
	rdb := redistest.Start(t).Client(t)
	ctx := context.Background()
	const n = 100
	for i := range n {
		if err := rdb.HSet(ctx, "rec"+strconv.Itoa(i), "slot", "s"+strconv.Itoa(i)).Err(); err != nil {
			t.Fatal(err)
		}
	}
	b := &batchClient{c: rdb}
	trips := &lookTrips{}
	queued := func() int {
		b.mu.Lock()
		defer b.mu.Unlock()
		if b.next == nil {
			return 0
		}
		return len(b.next.cmds)
	}
	// The first look's round trip lasts until every other look waits for
	// the next batch.
	trips.hold = func() {
		for deadline := time.Now().Add(10 * time.Second); queued() < n && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond)
		}
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
		return b.busy && b.next == nil
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

// waitFor waits until cond holds, and fails t if it does not within 10 s.
func waitFor(t *testing.T, cond func() bool, what string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
	}
}
