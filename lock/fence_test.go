package lock_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/wakuwaku-go/wakuwaku/internal/redistest"
	"github.com/wakuwaku-go/wakuwaku/lock"
)

var fencedInvoices = invoices.Fenced()

// fenceKeyOf is the key that keeps the fencing number of a Lock key.
func fenceKeyOf(lockKey string) string { return "@@wakuwaku-entity:LockFence:{" + lockKey + "}" }

func TestFencedOnRedis(t *testing.T) {
	srv := redistest.Start(t)
	raw := srv.Client(t)
	c, cnt := countedClient(t, srv)
	db := lock.NewDB(c)
	ctx := t.Context()
	fencedInvoices.TryLock(ctx, db, 0) // the handshake and the script cache

	var tok *lock.Token
	var fence uint64
	var err error
	if n := cnt.sent(func() { tok, fence, err = fencedInvoices.TryLock(ctx, db, 1) }); n != 1 {
		t.Errorf("TryLock sent %d commands, want 1", n)
	}
	if tok == nil || err != nil {
		t.Fatalf("TryLock = %v, %d, %v", tok, fence, err)
	}
	if tok.Key() != invoices.Key(1) {
		t.Errorf("Key = %q, want the Lock's %q", tok.Key(), invoices.Key(1))
	}
	now, _ := raw.Time(ctx).Result()
	if d := now.Sub(time.UnixMicro(int64(fence))); d < 0 || d > time.Second {
		t.Errorf("fence %d is %v before the server's TIME, want a recent µs reading", fence, d)
	}
	fk := fenceKeyOf(tok.Key())
	if v := raw.Get(ctx, fk).Val(); v != strconv.FormatUint(fence, 10) {
		t.Errorf("GET %s = %q, want %d", fk, v, fence)
	}
	if d := raw.PTTL(ctx, fk).Val(); d <= 29*time.Second || d > 30*time.Second+10*time.Millisecond {
		t.Errorf("PTTL %s = %v, want the lease's 30 s: the number must not outlive the lease", fk, d)
	}
	// A plain Lock of the same namespace sees the name held, and the other way round.
	if other, _ := invoices.TryLock(ctx, db, 1); other != nil {
		t.Error("Lock.TryLock on a name a FencedLock holds = a token, want nil")
	}
	if other, f, err := fencedInvoices.TryLock(ctx, db, 1); other != nil || f != 0 || err != nil {
		t.Errorf("TryLock while held = %v, %d, %v, want nil, 0, nil", other, f, err)
	}
	plain, _ := invoices.TryLock(ctx, db, 2)
	if other, _, _ := fencedInvoices.TryLock(ctx, db, 2); other != nil || plain == nil {
		t.Error("FencedLock.TryLock on a name a Lock holds = a token, want nil")
	}
	if ok, _ := tok.Extend(ctx); !ok {
		t.Error("Extend of a fenced token = false")
	}
	if ok, _ := tok.Release(ctx); !ok {
		t.Error("Release of a fenced token = false")
	}
	// Right after a release, the next holder's number is greater.
	next, f2, err := fencedInvoices.TryLock(ctx, db, 1)
	if next == nil || err != nil || f2 <= fence {
		t.Errorf("TryLock after Release = %v, %d, %v, want a number above %d", next, f2, err, fence)
	}

	t.Run("retry gets the first number", func(t *testing.T) {
		// A client that sends every command twice, as go-redis does when a
		// reply is lost with its connection.
		twice := lock.NewDB(replaying{c})
		tok, f, err := fencedInvoices.TryLock(ctx, twice, 10)
		if tok == nil || err != nil {
			t.Fatalf("TryLock through a replaying client = %v, %v, want a token", tok, err)
		}
		if v := raw.Get(ctx, fenceKeyOf(tok.Key())).Val(); v != strconv.FormatUint(f, 10) {
			t.Errorf("number = %d, kept %s: the retry got another number", f, v)
		}
	})
	t.Run("name with a brace", func(t *testing.T) {
		names := lock.New[string]("brace", time.Second).Fenced()
		if _, _, err := names.TryLock(ctx, lock.NewDB(refusing{t}), "a}b"); err == nil {
			t.Error("TryLock of a name holding '}' = no error")
		}
		if tok, _, err := names.TryLock(ctx, db, "a{b"); tok == nil || err != nil {
			t.Errorf("TryLock(%q) = %v, %v", "a{b", tok, err)
		}
	})
}

// replaying is a client that sends each command a second time once it has
// been answered, and keeps the second answer.
type replaying struct{ next lock.Client }

func (r replaying) Process(ctx context.Context, cmd redis.Cmder) error {
	if err := r.next.Process(ctx, cmd); err != nil {
		return err
	}
	return r.next.Process(ctx, cmd)
}

// TestFencedOrder has 8 goroutines take one fenced name in turn on a real
// server, 100 times each, and checks that the numbers grow in the order of
// the acquisitions, which the lock itself orders.
func TestFencedOrder(t *testing.T) {
	srv := redistest.Start(t)
	db := lock.NewDB(srv.Client(t))
	ctx := t.Context()
	var mu sync.Mutex
	var order []uint64
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				tok, f, err := fencedInvoices.TryLock(ctx, db, 77)
				for tok == nil && err == nil {
					tok, f, err = fencedInvoices.TryLock(ctx, db, 77)
				}
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				order = append(order, f)
				mu.Unlock()
				tok.Release(ctx)
			}
		})
	}
	wg.Wait()
	for i := 1; i < len(order); i++ {
		if order[i] <= order[i-1] {
			t.Fatalf("acquisition %d got %d after %d: not increasing", i, order[i], order[i-1])
		}
	}
}

// TestFencedClock checks the claims about the server's clock on miniredis,
// whose TIME a test sets: a clock that stands still or steps back keeps the
// order, the number key expiring only once the clock has passed it, and a
// lost key with the clock behind breaks it, as the documentation says.
func TestFencedClock(t *testing.T) {
	m, c := redistest.Mini(t)
	db := lock.NewDB(c)
	ctx := t.Context()
	short := lock.New[int]("fenced", time.Second).Fenced()
	t0 := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	take := func() uint64 {
		t.Helper()
		tok, f, err := short.TryLock(ctx, db, 1)
		if tok == nil || err != nil {
			t.Fatalf("TryLock = %v, %v", tok, err)
		}
		if ok, _ := tok.Release(ctx); !ok {
			t.Fatal("Release = false")
		}
		return f
	}
	m.SetTime(t0)
	first := take()
	if first != uint64(t0.UnixMicro()) {
		t.Errorf("first number = %d, want the server's µs %d", first, t0.UnixMicro())
	}
	// The clock stands still: the kept number is raised by one each time.
	for i := range 3 {
		if f := take(); f != first+uint64(i)+1 {
			t.Errorf("number with a still clock = %d, want %d", f, first+uint64(i)+1)
		}
	}
	// The clock steps back a minute: still higher, and the number key now
	// lives until the clock has passed it again.
	m.SetTime(t0.Add(-time.Minute))
	if f := take(); f != first+4 {
		t.Errorf("number after a step back = %d, want %d", f, first+4)
	}
	fk := fenceKeyOf(lock.New[int]("fenced", time.Second).Key(1))
	if ttl := m.TTL(fk); ttl < time.Minute+time.Second || ttl > time.Minute+time.Second+10*time.Millisecond {
		t.Errorf("TTL of the number key after a step back = %v, want the lease plus the minute", ttl)
	}
	m.FastForward(time.Minute + 2*time.Second)
	if n := len(m.Keys()); n != 0 {
		t.Errorf("%d keys left once the leases ended, want 0: %v", n, m.Keys())
	}
	// The key lost before it expired (a failover to a replica that did not
	// have it), with the clock behind: the order breaks, as documented.
	take()
	m.Del(fk)
	if f := take(); f >= first {
		t.Errorf("number after the key was lost with the clock a minute back = %d, want below %d", f, first)
	}
}

// TestFencedOnCluster checks that the lock and its number key share a slot
// on a real cluster, brace in the name included.
func TestFencedOnCluster(t *testing.T) {
	cl := redistest.StartCluster(t, 3)
	db := lock.NewDB(cl.Client(t))
	ctx := t.Context()
	names := lock.New[string]("fenced", 10*time.Second).Fenced()
	for _, name := range []string{"a", "b{c", "{d", "x{"} {
		var last uint64
		for range 2 {
			tok, f, err := names.TryLock(ctx, db, name)
			if tok == nil || err != nil {
				t.Fatalf("TryLock(%q) on a cluster = %v, %v", name, tok, err)
			}
			if redistest.Slot(tok.Key()) != redistest.Slot(fenceKeyOf(tok.Key())) {
				t.Errorf("lock and number keys of %q in different slots", name)
			}
			if f <= last {
				t.Errorf("TryLock(%q): number %d after %d", name, f, last)
			}
			last = f
			tok.Release(ctx)
		}
	}
}
