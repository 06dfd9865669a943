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

// pipelines counts the round trips of a client's looks (HMGET), alone or
// in pipelines: not those of its connections' handshakes.
type pipelines struct{ n, cmds atomic.Int64 }

func (p *pipelines) DialHook(next redis.DialHook) redis.DialHook { return next }
func (p *pipelines) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() == "hmget" {
			p.n.Add(1)
			p.cmds.Add(1)
		}
		return next(ctx, cmd)
	}
}
func (p *pipelines) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if len(cmds) > 0 && cmds[0].Name() == "hmget" {
			p.n.Add(1)
			p.cmds.Add(int64(len(cmds)))
		}
		return next(ctx, cmds)
	}
}

// TestLookBatcher sends the looks of many jobs due at one instant, on a
// real redis-server: they go in one pipeline, each gets its own reply, and
// a look whose context ends meanwhile returns at once without holding up
// the others.
func TestLookBatcher(t *testing.T) {
	rdb := redistest.Start(t).Client(t)
	ctx := context.Background()
	const n = 100
	for i := range n {
		if err := rdb.HSet(ctx, "rec"+strconv.Itoa(i), "slot", "s"+strconv.Itoa(i)).Err(); err != nil {
			t.Fatal(err)
		}
	}
	var count pipelines
	rdb.AddHook(&count)
	b := &lookBatcher{gather: 100 * time.Millisecond} // room for every look to join on a busy machine
	start := make(chan struct{})
	var wg sync.WaitGroup
	got := make([]string, n)
	errs := make([]error, n)
	cancelled, cancel := context.WithCancelCause(ctx)
	wg.Add(n + 1)
	for i := range n {
		go func() {
			defer wg.Done()
			<-start
			cmd := redis.NewSliceCmd(ctx, "hmget", "rec"+strconv.Itoa(i), "slot")
			if errs[i] = b.process(ctx, rdb, cmd); errs[i] == nil {
				got[i], _ = cmd.Val()[0].(string)
			}
		}()
	}
	gone := errors.New("the run was cancelled")
	var cerr error
	go func() {
		defer wg.Done()
		<-start
		cerr = b.process(cancelled, rdb, redis.NewSliceCmd(ctx, "hmget", "rec0", "slot"))
	}()
	close(start)
	cancel(gone)
	wg.Wait()
	for i := range n {
		if errs[i] != nil || got[i] != "s"+strconv.Itoa(i) {
			t.Errorf("look %d = %q, %v; want %q", i, got[i], errs[i], "s"+strconv.Itoa(i))
		}
	}
	if !errors.Is(cerr, gone) {
		t.Errorf("the cancelled look returned %v, want its context's cause", cerr)
	}
	if rt := count.n.Load(); rt > 2 {
		t.Errorf("%d looks took %d round trips (%d commands), want them in one or two", n+1, rt, count.cmds.Load())
	}
}

// unkeyable is a client that can't be a map key.
type unkeyable struct {
	*redis.Client
	_ []int
}

// TestLookBatcherUnkeyable: a client whose type can't key the batches sends
// its looks one by one.
func TestLookBatcherUnkeyable(t *testing.T) {
	rdb := redistest.Start(t).Client(t)
	var count pipelines
	rdb.AddHook(&count)
	rdb.HSet(context.Background(), "rec", "slot", "s")
	var b lookBatcher
	cmd := redis.NewSliceCmd(context.Background(), "hmget", "rec", "slot")
	if err := b.process(context.Background(), unkeyable{Client: rdb}, cmd); err != nil || cmd.Val()[0] != "s" {
		t.Errorf("look = %v, %v; want s", cmd.Val(), err)
	}
	if count.n.Load() != 1 || count.cmds.Load() != 1 {
		t.Errorf("%d round trips of %d looks, want the look sent alone", count.n.Load(), count.cmds.Load())
	}
}
