package fault_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wakuwaku-go/wakuwaku/internal/fault"
	"github.com/wakuwaku-go/wakuwaku/internal/redistest"
	"github.com/wakuwaku-go/wakuwaku/lock"
)

// fencedWork is work under WhileHeld that writes to the resource every
// millisecond while its context is live, checking it right before each
// write, and records the last time it found the context live and when it
// first found it cancelled. It writes only if its Enter was on time.
type fencedWork struct {
	res      *fault.Resource
	lease    interface{ Deadline() time.Time }
	key      string
	hold     uint64
	version  uint64
	entered  bool
	lastLive atomic.Int64 // taken before the check of ctx that found it live
	ended    atomic.Int64 // when the work first saw ctx end
	writes   atomic.Int64
}

// enter enters the resource for the hold whose acquire was sent at sent,
// with a lease of ttl.
func (w *fencedWork) enter(sent int64, ttl time.Duration) {
	w.version, w.entered = w.res.Enter(w.key, w.hold, fault.LeaseDeadline(sent, ttl))
}

func (w *fencedWork) run(ctx context.Context, until time.Duration) (int, error) {
	stop := time.After(until)
	for {
		t := fault.Now()
		if ctx.Err() != nil {
			w.ended.Store(fault.Now())
			return 0, context.Cause(ctx)
		}
		w.lastLive.Store(t)
		if w.entered {
			if ok, v := w.res.WriteBy(w.key, w.hold, w.version, fault.WallDeadline(w.lease.Deadline())); ok {
				w.version = v
				w.writes.Add(1)
			}
		}
		select {
		case <-ctx.Done():
			w.ended.Store(fault.Now())
			return 0, context.Cause(ctx)
		case <-stop:
			return 0, nil
		case <-time.After(time.Millisecond):
		}
	}
}

// TestPartition cuts one holder off from Redis with the proxy (a blackhole:
// its connections stay open, nothing gets through) while it runs work under
// WhileHeld, and has another client wait for the lock. Pass: the holder's
// work finds its context cancelled before the other client's acquire
// returns, and the holder's Release after the heal reports false. A second
// part cuts the holder's connections every fifth of the TTL instead (with a
// TTL of 1 s): the holder must keep its lease through the reconnections, and
// the other client must never get the lock.
func TestPartition(t *testing.T) {
	srv := redistest.Start(t)
	proxy := fault.NewProxy(t, srv.Addr())
	behind := conn{Addr: proxy.Addr()}.client()
	t.Cleanup(func() { behind.Close() })
	held := lock.NewDb(behind)
	direct := lock.NewDb(srv.Client(t))
	res := fault.NewResource()
	rec := fault.NewRecorder(0)
	const ttl = 300 * time.Millisecond
	l := lock.New[string]("partition", ttl)
	ctx := t.Context()

	began := time.Now()
	rounds := fault.Pick(3, 30)
	var liveMargin, doneMargin time.Duration = 1 << 62, 1 << 62
	for round := range rounds {
		name := fmt.Sprintf("shard-%d", round)
		key := l.Key(name)
		sent := fault.Now()
		tok, err := l.TryLock(ctx, held, name)
		if tok == nil || err != nil {
			t.Fatalf("TryLock(%q) = %v, %v", name, tok, err)
		}
		w := &fencedWork{res: res, lease: tok, key: key, hold: rec.NewHold()}
		w.enter(sent, ttl)
		done := make(chan error, 1)
		go func() {
			_, err := lock.WhileHeld(ctx, tok, func(ctx context.Context) (int, error) { return w.run(ctx, time.Minute) })
			done <- err
		}()
		time.Sleep(ttl) // a few extensions go through
		proxy.Blackhole()
		_, _, ret := takeOver(t, direct, l, name, res, rec, 3*ttl)
		var err2 error
		select {
		case err2 = <-done:
		case <-time.After(10 * ttl):
			t.Fatalf("round %d: WhileHeld did not return within %v of the partition", round, 10*ttl)
		}
		proxy.Heal()
		if !errors.Is(err2, lock.ErrLeaseLost) {
			t.Errorf("round %d: WhileHeld = %v, want ErrLeaseLost", round, err2)
		}
		if last := w.lastLive.Load(); last >= ret {
			t.Errorf("round %d: the partitioned work found its context live %v after the other client got the lock", round, time.Duration(last-ret))
		}
		liveMargin = min(liveMargin, time.Duration(ret-w.lastLive.Load()))
		doneMargin = min(doneMargin, time.Duration(ret-w.ended.Load()))
		if ok, err := tok.Release(ctx); ok || err != nil {
			t.Errorf("round %d: the partitioned holder's Release after the heal = %v, %v, want false", round, ok, err)
		}
	}

	// Cuts: the holder reconnects and keeps its lease. Each extension has
	// two thirds of the TTL to get through, go-redis's own retries and
	// reconnections included; under a loaded -race run on two cores that
	// took up to 200 ms, hence a longer TTL here.
	const cutTTL = time.Second
	cl := lock.New[string]("partition-cut", cutTTL)
	cutSpell := fault.Pick(3*cutTTL, 30*cutTTL)
	name := "cut"
	sent := fault.Now()
	tok, err := cl.TryLock(ctx, held, name)
	if tok == nil || err != nil {
		t.Fatalf("TryLock(%q) = %v, %v", name, tok, err)
	}
	stopCuts := make(chan struct{})
	cutsDone := make(chan int)
	go func() {
		n := 0
		tick := time.NewTicker(cutTTL / 5)
		defer tick.Stop()
		for {
			select {
			case <-stopCuts:
				cutsDone <- n
				return
			case <-tick.C:
				n += proxy.Cut()
			}
		}
	}()
	var stolen, polls atomic.Int64
	pollCtx, stopPolls := context.WithCancel(ctx)
	polled := make(chan struct{})
	go func() {
		defer close(polled)
		for pollCtx.Err() == nil {
			polls.Add(1)
			if other, _ := cl.TryLock(pollCtx, direct, name); other != nil {
				stolen.Add(1)
			}
			time.Sleep(2 * time.Millisecond)
		}
	}()
	w := &fencedWork{res: res, lease: tok, key: cl.Key(name), hold: rec.NewHold()}
	w.enter(sent, cutTTL)
	_, err = lock.WhileHeld(ctx, tok, func(ctx context.Context) (int, error) { return w.run(ctx, cutSpell) })
	close(stopCuts)
	connsCut := <-cutsDone
	stopPolls()
	<-polled
	if err != nil {
		t.Errorf("WhileHeld through connection cuts = %v, want nil", err)
	}
	if n := stolen.Load(); n != 0 {
		t.Errorf("another client took the lock %d times while its holder's connections were being cut", n)
	}
	if ok, err := tok.Release(ctx); !ok || err != nil {
		t.Errorf("Release after the cuts = %v, %v, want true", ok, err)
	}

	fig := res.Figures()
	if fig.StaleAccepted != 0 {
		t.Errorf("the resource accepted %d stale writes, want 0", fig.StaleAccepted)
	}
	st := proxy.Stats()
	fault.Publish(t, fault.Figures{
		Scenario:       "partition",
		Seconds:        time.Since(began).Seconds(),
		Acquired:       rounds*2 + 1,
		Faults:         fmt.Sprintf("%d blackholes of a holder's traffic; %d cuts (%d connections) during %v of WhileHeld", st.Blackholes, st.Cuts, connsCut, cutSpell),
		Overlaps:       int(stolen.Load()),
		WritesAccepted: fig.Accepted,
		StaleAccepted:  fig.StaleAccepted,
		StaleRefused:   fig.StaleRefused,
		EntersLate:     fig.EntersLate,
		Notes: []string{
			fmt.Sprintf("partitioned work: its last check that found ctx live came at least %v before the other client's acquire returned; smallest gap from the work seeing Done to that return: %v (negative: Done closed after it)", liveMargin, doneMargin),
			fmt.Sprintf("%d acquires by the other client during the cuts, all refused", polls.Load()),
			stale(t, fig),
		},
	})
}
