package fault_test

import (
	"bufio"
	"context"
	"io"
	"net"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/wakuwaku-go/wakuwaku/internal/redistest"
	"github.com/wakuwaku-go/wakuwaku/lock"
	"github.com/wakuwaku-go/wakuwaku/proof/internal/fault"
)

// ping sends PING on a raw connection and waits at most timeout for PONG.
func ping(c net.Conn, timeout time.Duration) error {
	if err := c.SetDeadline(time.Now().Add(timeout)); err != nil {
		return err
	}
	if _, err := io.WriteString(c, "PING\r\n"); err != nil {
		return err
	}
	_, err := bufio.NewReader(c).ReadString('\n')
	return err
}

func TestProxy(t *testing.T) {
	srv := redistest.Start(t)
	p := fault.NewProxy(t, srv.Addr())
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := ping(c, time.Second); err != nil {
		t.Fatalf("PING through the proxy: %v", err)
	}

	t.Run("latency", func(t *testing.T) {
		p.SetLatency(20*time.Millisecond, 0)
		defer p.SetLatency(0, 0)
		start := time.Now()
		if err := ping(c, time.Second); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d < 40*time.Millisecond {
			t.Errorf("PING took %v with 20 ms each way, want at least 40 ms", d)
		}
	})

	t.Run("blackhole", func(t *testing.T) {
		p.Blackhole()
		if err := ping(c, 100*time.Millisecond); err == nil {
			t.Fatal("PING answered through a blackhole")
		}
		p.Heal()
		// The PING that waited is answered now, then this one.
		r := bufio.NewReader(c)
		c.SetDeadline(time.Now().Add(time.Second))
		io.WriteString(c, "PING\r\n")
		for i := range 2 {
			if line, err := r.ReadString('\n'); err != nil || line != "+PONG\r\n" {
				t.Fatalf("reply %d after the heal = %q, %v", i, line, err)
			}
		}
	})

	t.Run("cut", func(t *testing.T) {
		if n := p.Cut(); n < 1 {
			t.Errorf("Cut closed %d connections, want at least 1", n)
		}
		if err := ping(c, time.Second); err == nil {
			t.Error("PING answered on a cut connection")
		}
		c2, err := net.Dial("tcp", p.Addr())
		if err != nil {
			t.Fatal(err)
		}
		defer c2.Close()
		if err := ping(c2, time.Second); err != nil {
			t.Errorf("PING on a new connection after the cut: %v", err)
		}
	})
}

func TestChildLifecycle(t *testing.T) {
	coord := fault.NewCoordinator(t)
	c := fault.Spawn(t, coord, 1, "noop", nil)
	coord.WaitNote(t, 1, "ready", 30*time.Second)
	c.Pause(t)
	c.Resume(t)
	c.Stop(t)

	k := fault.Spawn(t, coord, 2, "noop", nil)
	coord.WaitNote(t, 2, "ready", 30*time.Second)
	k.Kill(t)
}

func TestResource(t *testing.T) {
	r := fault.NewResource()
	live := fault.Now() + int64(time.Minute)
	a, _ := r.Enter("row", 1, live)
	if ok, v := r.Write("row", 1, a); !ok || v != a+1 {
		t.Fatalf("first holder's write = %v, %d", ok, v)
	}
	b, _ := r.Enter("row", 2, live) // the lock changed hands
	// The old holder writes with the version it has: fresh for the row, but
	// stale for the lock; then the new holder's write is refused.
	if ok, _ := r.Write("row", 1, a+1); !ok {
		t.Fatal("stale write with the current version refused")
	}
	if ok, _ := r.Write("row", 2, b); ok {
		t.Fatal("write with a moved version accepted")
	}
	// A stale write whose writer's lease was still live by its own account
	// means the lock let the new holder in early.
	r.WriteBy("row", 1, a, fault.Now()+int64(time.Second))
	f := r.Figures()
	if f.Accepted != 2 || f.StaleAccepted != 1 || f.Refused != 2 || f.StaleRefused != 1 || f.StaleLive != 1 {
		t.Errorf("figures = %+v, want 2 accepted (1 stale), 2 refused (1 stale), 1 stale while live", f)
	}
}

// TestResourceLateEnter replays what failed long runs of the suite: an old
// hold's Enter, delayed on the link past the end of that hold's own lease,
// arrives after a newer holder took the lock and entered. The resource must
// refuse the late Enter (and count it), so that the real holder stays the
// latest and its writes are not taken for stale writes during a live lease.
func TestResourceLateEnter(t *testing.T) {
	const ttl = 800 * time.Millisecond
	ms := int64(time.Millisecond)
	coord := fault.NewCoordinator(t)
	link, err := fault.DialLink(coord.Addr(), 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { link.Close() })
	paths := []struct {
		name  string
		res   *fault.Resource
		enter func(r *fault.Resource, name string, hold uint64, deadline int64) (bool, error)
	}{
		{"local", fault.NewResource(), func(r *fault.Resource, name string, hold uint64, deadline int64) (bool, error) {
			_, ok := r.Enter(name, hold, deadline)
			return ok, nil
		}},
		{"over the link", coord.Resource, func(_ *fault.Resource, name string, hold uint64, deadline int64) (bool, error) {
			_, ok, err := link.Enter(name, hold, deadline)
			return ok, err
		}},
	}
	for _, p := range paths {
		t.Run(p.name, func(t *testing.T) {
			// Old hold 1 sent its acquire a second ago: its lease ended
			// 200 ms ago. Hold 2 took the lock 100 ms after that (its
			// lease lasts 700 ms more) and entered; then hold 1's
			// Enter arrives.
			sent := fault.Now() - int64(time.Second)
			oldDeadline := fault.LeaseDeadline(sent, ttl)
			newDeadline := fault.LeaseDeadline(sent+int64(ttl)+100*ms, ttl)
			v, ok := p.res.Enter("row", 2, newDeadline)
			if !ok {
				t.Fatalf("Enter of the current holder, live for %v more, refused", time.Duration(newDeadline-fault.Now()))
			}
			late, err := p.enter(p.res, "row", 1, oldDeadline)
			if err != nil {
				t.Fatal(err)
			}
			accepted, _ := p.res.WriteBy("row", 2, v, newDeadline)
			f := p.res.Figures()
			if f.StaleLive != 0 {
				t.Errorf("%d stale writes while their writer's lease was live (the current holder's write counted as stale), want 0", f.StaleLive)
			}
			if late {
				t.Errorf("Enter %v after the hold's lease deadline = true, want false", time.Duration(fault.Now()-oldDeadline).Round(time.Millisecond))
			}
			if !accepted || f.StaleAccepted+f.StaleRefused != 0 {
				t.Errorf("the current holder's write: accepted %v, figures %+v; want accepted, not stale", accepted, f)
			}
			if f.EntersLate != 1 {
				t.Errorf("EntersLate = %d, want 1", f.EntersLate)
			}
		})
	}
}

// TestCheckers feeds the overlap check and the linearizability check histories whose verdict
// is known, so that a green suite means something.
func TestCheckers(t *testing.T) {
	const ttl = 100 * time.Millisecond
	ms := int64(time.Millisecond)
	op := func(client int32, k fault.Kind, hold uint64, call, ret int64, ok bool) fault.Op {
		return fault.Op{Client: client, Kind: k, Name: "n", Hold: hold, Call: call * ms, Return: ret * ms, Ok: ok}
	}
	unknown := func(o fault.Op) fault.Op { o.Err = "i/o timeout"; return o }
	tests := []struct {
		name     string
		kind     fault.LockKind
		ops      []fault.Op
		overlaps int
		want     fault.Result
	}{
		{"handoff by release", fault.Lock, []fault.Op{
			op(1, fault.Acquire, 1, 0, 1, true), op(2, fault.Acquire, 2, 5, 6, false),
			op(1, fault.Release, 1, 10, 11, true), op(2, fault.Acquire, 3, 12, 13, true),
		}, 0, fault.Ok},
		{"handoff by expiry", fault.Lock, []fault.Op{
			op(1, fault.Acquire, 1, 0, 1, true), op(2, fault.Acquire, 2, 105, 106, true),
			op(1, fault.Release, 1, 110, 111, false),
		}, 0, fault.Ok},
		{"two holders", fault.Lock, []fault.Op{
			op(1, fault.Acquire, 1, 0, 1, true), op(2, fault.Acquire, 2, 50, 51, true),
		}, 1, fault.Illegal},
		{"taken before the extended lease ended", fault.Lock, []fault.Op{
			op(1, fault.Acquire, 1, 0, 1, true), op(1, fault.Extend, 1, 60, 61, true),
			op(2, fault.Acquire, 2, 120, 121, true),
		}, 1, fault.Illegal},
		{"release false while live", fault.Lock, []fault.Op{
			op(1, fault.Acquire, 1, 0, 1, true), op(1, fault.Release, 1, 10, 11, false),
		}, 0, fault.Illegal},
		{"busy with nobody holding", fault.Lock, []fault.Op{
			op(1, fault.Acquire, 1, 0, 1, true), op(1, fault.Release, 1, 10, 11, true),
			op(2, fault.Acquire, 2, 20, 21, false),
		}, 0, fault.Illegal},
		{"busy behind an acquire that timed out", fault.Lock, []fault.Op{
			unknown(op(1, fault.Acquire, 1, 0, 1, false)), op(2, fault.Acquire, 2, 20, 21, false),
		}, 0, fault.Ok},
		{"readers share", fault.RWLock, []fault.Op{
			op(1, fault.ReadAcquire, 1, 0, 1, true), op(2, fault.ReadAcquire, 2, 2, 3, true),
			op(3, fault.WriteAcquire, 3, 4, 5, false), op(1, fault.ReadRelease, 1, 10, 11, true),
			op(2, fault.ReadRelease, 2, 10, 11, true), op(3, fault.WriteAcquire, 4, 20, 21, true),
		}, 0, fault.Ok},
		{"writer with a reader", fault.RWLock, []fault.Op{
			op(1, fault.ReadAcquire, 1, 0, 1, true), op(3, fault.WriteAcquire, 3, 4, 5, true),
		}, 1, fault.Illegal},
		{"reader with a writer", fault.RWLock, []fault.Op{
			op(3, fault.WriteAcquire, 3, 0, 1, true), op(1, fault.ReadAcquire, 1, 4, 5, true),
		}, 1, fault.Illegal},
		{"writer after the reader's lease ended", fault.RWLock, []fault.Op{
			op(1, fault.ReadAcquire, 1, 0, 1, true), op(3, fault.WriteAcquire, 3, 104, 105, true),
			op(1, fault.ReadExtend, 1, 110, 111, false),
		}, 0, fault.Ok},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := &fault.History{}
			h.Add(tt.ops...)
			if got := len(h.Overlaps(ttl)); got != tt.overlaps {
				t.Errorf("Overlaps = %d, want %d", got, tt.overlaps)
			}
			if got := h.Linearizable(ttl, tt.kind, fault.Limits{Memory: 1 << 20, Time: 10 * time.Second}); got.Result != tt.want {
				t.Errorf("Linearizable = %v, want %s", got, tt.want)
			}
		})
	}
}

// TestCheckersCatchStolenLocks runs contenders while another client deletes
// the lock keys behind their backs, as a broken lock would let happen: the
// overlap check and the linearizability check must both notice.
func TestCheckersCatchStolenLocks(t *testing.T) {
	srv := redistest.Start(t)
	raw := srv.Client(t)
	ld := load{Namespace: "stolen", TTL: 200 * time.Millisecond, Names: []string{"a", "b"}, Backoff: 2 * time.Millisecond, MaxSteps: 3}
	ctx, stop := context.WithTimeout(t.Context(), 2*time.Second)
	defer stop()
	rec := fault.NewRecorder(0)
	wg := runLocal(ctx, lock.NewDB(srv.Client(t)), rec, fault.NewResource(), ld, 1, 8)
	l := lock.New[string](ld.Namespace, ld.TTL)
	for ctx.Err() == nil {
		for _, n := range ld.Names {
			if err := raw.Del(t.Context(), l.Key(n)).Err(); err != nil && err != redis.Nil {
				t.Fatal(err)
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	wg.Wait()
	h := &fault.History{}
	h.Add(rec.Take()...)
	if n := len(h.Overlaps(ld.TTL)); n == 0 {
		t.Error("no overlap found though the keys were deleted under their holders")
	}
	c := h.Linearizable(ld.TTL, ld.Kind, fault.DefaultLimits())
	if c.Result != fault.Illegal {
		t.Errorf("linearizability: %v, want Illegal", c)
	}
	t.Logf("linearizability: %v", c)
}
