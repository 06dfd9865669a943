package lock_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/wakuwaku-go/wakuwaku/internal/redistest"
	"github.com/wakuwaku-go/wakuwaku/lock"
)

// counter counts the commands a client sends, so tests can check that each
// lock operation is one round trip.
type counter struct{ n atomic.Int64 }

// countedClient returns a client of srv whose commands the counter counts.
func countedClient(t *testing.T, srv *redistest.Server) (*redis.Client, *counter) {
	t.Helper()
	cnt := &counter{}
	c := srv.Client(t)
	c.AddHook(cnt)
	return c, cnt
}

func (c *counter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (c *counter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.n.Add(1)
		return next(ctx, cmd)
	}
}
func (c *counter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// sent returns how many commands f sent.
func (c *counter) sent(f func()) int64 {
	before := c.n.Load()
	f()
	return c.n.Load() - before
}

var invoices = lock.New[uint64]("invoice", 30*time.Second)

func TestLockOnRedis(t *testing.T) {
	srv := redistest.Start(t)
	raw := srv.Client(t)
	c, cnt := countedClient(t, srv)
	db := lock.NewDB(c)
	ctx := t.Context()
	// Warm up: the connection's handshake, and the first EVALSHA of each
	// script, which the server answers NOSCRIPT before it caches the script.
	warm, _ := invoices.TryLock(ctx, db, 1)
	warm.Extend(ctx)
	warm.Release(ctx)

	var tok *lock.Token
	var err error
	if n := cnt.sent(func() { tok, err = invoices.TryLock(ctx, db, 42) }); n != 1 {
		t.Errorf("TryLock sent %d commands, want 1", n)
	}
	if tok == nil || err != nil {
		t.Fatalf("TryLock(42) = %v, %v, want a token", tok, err)
	}
	key := "@@wakuwaku-entity:Lock:invoice:42"
	if tok.Key() != key {
		t.Errorf("Key() = %q, want %q", tok.Key(), key)
	}
	val, err := raw.Get(ctx, key).Result()
	if err != nil || len(val) != 16 {
		t.Errorf("GET %s = %q (%d bytes), %v, want 16 bytes", key, val, len(val), err)
	}
	if pttl := raw.PTTL(ctx, key).Val(); pttl <= 29*time.Second || pttl > 30*time.Second {
		t.Errorf("PTTL = %v, want about 30s", pttl)
	}
	if d := time.Until(tok.Deadline()); d <= 29*time.Second || d > 30*time.Second {
		t.Errorf("Deadline in %v, want about 30s", d)
	}

	if other, err := invoices.TryLock(ctx, db, 42); other != nil || err != nil {
		t.Errorf("TryLock(42) while held = %v, %v, want nil, nil", other, err)
	}
	if other, err := invoices.TryLock(ctx, db, 43); other == nil || err != nil {
		t.Errorf("TryLock(43) = %v, %v, want a token", other, err)
	}

	raw.PExpire(ctx, key, time.Second)
	var ok bool
	if n := cnt.sent(func() { ok, err = tok.Extend(ctx) }); n != 1 {
		t.Errorf("Extend sent %d commands, want 1", n)
	}
	if !ok || err != nil {
		t.Errorf("Extend = %v, %v, want true", ok, err)
	}
	if pttl := raw.PTTL(ctx, key).Val(); pttl <= 29*time.Second {
		t.Errorf("PTTL after Extend = %v, want about 30s", pttl)
	}
	if n := cnt.sent(func() { ok, err = tok.Release(ctx) }); n != 1 {
		t.Errorf("Release sent %d commands, want 1", n)
	}
	if !ok || err != nil {
		t.Errorf("Release = %v, %v, want true", ok, err)
	}
	if n := raw.Exists(ctx, key).Val(); n != 0 {
		t.Errorf("key exists after Release")
	}
	if ok, err := tok.Release(ctx); ok || err != nil {
		t.Errorf("second Release = %v, %v, want false", ok, err)
	}
	if again, err := invoices.TryLock(ctx, db, 42); again == nil || err != nil {
		t.Errorf("TryLock(42) after Release = %v, %v, want a token", again, err)
	}
}

// TestLostLease checks that a holder whose lease ran out can neither delete
// nor extend the lock of the holder that overtook it, nor recreate it.
func TestLostLease(t *testing.T) {
	srv := redistest.Start(t)
	raw := srv.Client(t)
	db := lock.NewDB(srv.Client(t))
	ctx := t.Context()
	short := lock.New[string]("short", 100*time.Millisecond)
	key := short.Key("x")

	first, err := short.TryLock(ctx, db, "x")
	if first == nil || err != nil {
		t.Fatalf("TryLock = %v, %v", first, err)
	}
	waitGone(t, raw, key)
	second, err := short.TryLock(ctx, db, "x")
	if second == nil || err != nil {
		t.Fatalf("TryLock after expiry = %v, %v, want a token", second, err)
	}
	held := raw.Get(ctx, key).Val()
	raw.PExpire(ctx, key, time.Minute) // so that the second holder can't lose it during the test
	if ok, err := first.Extend(ctx); ok || err != nil {
		t.Errorf("stale Extend = %v, %v, want false", ok, err)
	}
	if pttl := raw.PTTL(ctx, key).Val(); pttl <= 59*time.Second {
		t.Errorf("stale Extend changed the next holder's PTTL to %v", pttl)
	}
	if !first.Deadline().IsZero() {
		t.Errorf("Deadline after a lost Extend = %v, want zero", first.Deadline())
	}
	if ok, err := first.Release(ctx); ok || err != nil {
		t.Errorf("stale Release = %v, %v, want false", ok, err)
	}
	if got := raw.Get(ctx, key).Val(); got != held {
		t.Errorf("stale Release left %q, want the next holder's %q", got, held)
	}
	if ok, err := second.Release(ctx); !ok || err != nil {
		t.Errorf("Release = %v, %v, want true", ok, err)
	}
	if ok, _ := first.Extend(ctx); ok || raw.Exists(ctx, key).Val() != 0 {
		t.Errorf("stale Extend on a free lock = %v, key exists %d, want false, 0", ok, raw.Exists(ctx, key).Val())
	}
}

// waitGone waits for Redis to expire key.
func waitGone(t *testing.T, raw *redis.Client, key string) {
	t.Helper()
	for range 200 {
		if raw.Exists(t.Context(), key).Val() == 0 {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("key %q did not expire", key)
}

// TestTinyTTL checks that a TTL under a millisecond is sent as 1 ms.
func TestTinyTTL(t *testing.T) {
	srv := redistest.Start(t)
	raw := srv.Client(t)
	db := lock.NewDB(srv.Client(t))
	tiny := lock.New[string]("tiny", time.Microsecond)
	tok, err := tiny.TryLock(t.Context(), db, "a")
	if err != nil || tok == nil {
		t.Fatalf("TryLock with a 1µs TTL = %v, %v, want a token", tok, err)
	}
	waitGone(t, raw, tiny.Key("a"))
}

func TestScriptCacheLost(t *testing.T) {
	srv := redistest.Start(t)
	raw := srv.Client(t)
	db := lock.NewDB(srv.Client(t))
	ctx := t.Context()
	tok, _ := invoices.TryLock(ctx, db, 1)
	raw.ScriptFlush(ctx)
	if ok, err := tok.Extend(ctx); !ok || err != nil {
		t.Errorf("Extend after SCRIPT FLUSH = %v, %v, want true", ok, err)
	}
	raw.ScriptFlush(ctx)
	if ok, err := tok.Release(ctx); !ok || err != nil {
		t.Errorf("Release after SCRIPT FLUSH = %v, %v, want true", ok, err)
	}
}

func TestBadInput(t *testing.T) {
	srv := redistest.Start(t)
	db := lock.NewDB(srv.Client(t))
	cancelled, cancel := context.WithCancel(t.Context())
	cancel()
	var nilClient *redis.Client
	down := redis.NewClient(&redis.Options{Addr: closedAddr(t), MaxRetries: -1, DialTimeout: time.Second})
	t.Cleanup(func() { down.Close() })
	rw := lock.NewRW[string]("rw", time.Second)

	tests := []struct {
		name string
		op   func() error
		want error // nil: any error
	}{
		{"zero DB", func() error { _, err := invoices.TryLock(t.Context(), lock.DB{}, 1); return err }, lock.ErrNoClient},
		{"nil client", func() error { _, err := invoices.TryLock(t.Context(), lock.NewDB(nilClient), 1); return err }, lock.ErrNoClient},
		{"nil interface", func() error { _, err := rw.TryRead(t.Context(), lock.NewDB(nil), "a"); return err }, lock.ErrNoClient},
		{"zero Lock", func() error { _, err := lock.Lock[int]{}.TryLock(t.Context(), db, 1); return err }, lock.ErrZeroLock},
		{"zero RWLock", func() error { _, err := lock.RWLock[int]{}.TryWrite(t.Context(), db, 1); return err }, lock.ErrZeroLock},
		{"cancelled TryLock", func() error { _, err := invoices.TryLock(cancelled, db, 1); return err }, context.Canceled},
		{"cancelled TryRead", func() error { _, err := rw.TryRead(cancelled, db, "a"); return err }, context.Canceled},
		{"nil token Release", func() error { var tok *lock.Token; _, err := tok.Release(t.Context()); return err }, nil},
		{"nil token Extend", func() error { var tok *lock.ReadToken; _, err := tok.Extend(t.Context()); return err }, nil},
		{"redis down", func() error { _, err := invoices.TryLock(t.Context(), lock.NewDB(down), 1); return err }, nil},
		{"redis down TryWrite", func() error { _, err := rw.TryWrite(t.Context(), lock.NewDB(down), "a"); return err }, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.op()
			if err == nil || (tt.want != nil && !errors.Is(err, tt.want)) {
				t.Errorf("error = %v, want %v", err, tt.want)
			}
		})
	}
	// A typed nil is named, so the mistake is found where it was made.
	if _, err := invoices.TryLock(t.Context(), lock.NewDB(nilClient), 1); !errors.Is(err, lock.ErrNoClient) || !strings.Contains(err.Error(), "nil *redis.Client") {
		t.Errorf("TryLock on NewDB((*redis.Client)(nil)) = %v, want ErrNoClient naming the nil *redis.Client", err)
	}

	// A token whose context is cancelled sends nothing and keeps the lock.
	tok, _ := invoices.TryLock(t.Context(), db, 9)
	if ok, err := tok.Release(cancelled); ok || !errors.Is(err, context.Canceled) {
		t.Errorf("Release(cancelled) = %v, %v, want false, context.Canceled", ok, err)
	}
	if ok, err := tok.Release(t.Context()); !ok || err != nil {
		t.Errorf("Release = %v, %v, want true", ok, err)
	}
}

// closedAddr returns a loopback address nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

func lockDB(c lock.Client) lock.DB { return lock.NewDB(c) }

// TestClients checks a lock cycle through each kind of go-redis client a
// service may have: a plain client, a Sentinel failover client and a
// cluster client.
func TestClients(t *testing.T) {
	srv := redistest.Start(t)
	sentinel := redistest.StartSentinel(t, srv)
	cluster := redistest.StartCluster(t, 3)
	clients := []struct {
		name string
		c    lock.Client
	}{
		{"plain", srv.Client(t)},
		{"failover", sentinel.FailoverClient(t)},
		{"cluster", cluster.Client(t)},
	}
	for _, c := range clients {
		t.Run(c.name, func(t *testing.T) {
			ctx := t.Context()
			db := lock.NewDB(c.c)
			for name := range uint64(20) { // names spread over the cluster's slots
				tok, err := invoices.TryLock(ctx, db, name)
				if tok == nil || err != nil {
					t.Fatalf("TryLock(%d) = %v, %v", name, tok, err)
				}
				if again, err := invoices.TryLock(ctx, db, name); again != nil || err != nil {
					t.Fatalf("TryLock(%d) while held = %v, %v, want nil, nil", name, again, err)
				}
				if ok, err := tok.Extend(ctx); !ok || err != nil {
					t.Fatalf("Extend = %v, %v", ok, err)
				}
				if ok, err := tok.Release(ctx); !ok || err != nil {
					t.Fatalf("Release = %v, %v", ok, err)
				}
				r, err := catalog.TryRead(ctx, db, fmt.Sprint(name))
				if r == nil || err != nil {
					t.Fatalf("TryRead = %v, %v", r, err)
				}
				if w, err := catalog.TryWrite(ctx, db, fmt.Sprint(name)); w != nil || err != nil {
					t.Fatalf("TryWrite with a reader = %v, %v", w, err)
				}
				if ok, err := r.Release(ctx); !ok || err != nil {
					t.Fatalf("reader Release = %v, %v", ok, err)
				}
			}
		})
	}
}

// TestDeadlineUsesSentTTL checks that a token's Deadline counts the TTL that
// Redis was given, in whole milliseconds, not the TTL the lock was built with:
// a deadline past the real lease lets two holders both believe they hold it.
func TestDeadlineUsesSentTTL(t *testing.T) {
	srv := redistest.Start(t)
	hook := &hookClient{next: srv.Client(t)}
	db := lock.NewDB(hook)
	ctx := t.Context()
	const ttl = 10*time.Second + 999*time.Microsecond
	const sent = 10 * time.Second // what Redis gets: whole ms, rounded down
	l := lock.New[string]("sent-ttl", ttl)
	rw := lock.NewRW[string]("sent-ttl", ttl)
	// Warm up, so that each operation below is one command (no NOSCRIPT).
	for _, warm := range []lock.Lease{must(l.TryLock(ctx, db, "warm")), must(rw.TryRead(ctx, db, "warm"))} {
		warm.Extend(ctx)
	}
	w := must(rw.TryWrite(ctx, db, "warm-w"))
	w.Extend(ctx)

	type lease interface {
		lock.Lease
		Release(context.Context) (bool, error)
	}
	tests := []struct {
		name    string
		acquire func() (lease, error)
	}{
		{"TryLock", func() (lease, error) { return l.TryLock(ctx, db, "a") }},
		{"TryRead", func() (lease, error) { return rw.TryRead(ctx, db, "r") }},
		{"TryWrite", func() (lease, error) { return rw.TryWrite(ctx, db, "w") }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tok, err := tt.acquire()
			if tok == nil || err != nil {
				t.Fatalf("%s = %v, %v, want a token", tt.name, tok, err)
			}
			check := func(op string) {
				t.Helper()
				// The command was sent before it reached the client, so a
				// deadline of sent+TTL is at most that moment plus the TTL.
				if d := tok.Deadline().Sub(hook.lastEntered()); d > sent || d < sent-time.Second {
					t.Errorf("after %s: Deadline is %v after the command went out, want at most %v", op, d, sent)
				}
			}
			check(tt.name)
			if got := tok.TTL(); got != sent {
				t.Errorf("TTL() = %v, want %v (the lease Redis was given)", got, sent)
			}
			if ok, err := tok.Extend(ctx); !ok || err != nil {
				t.Fatalf("Extend = %v, %v, want true", ok, err)
			}
			check("Extend")
			tok.Release(ctx)
		})
	}
}

// must returns v, the token of an acquire that had to succeed.
func must[T any](v *T, err error) *T {
	if v == nil || err != nil {
		panic(fmt.Sprintf("acquire = %v, %v", v, err))
	}
	return v
}

// TestLateExtendReply has Redis run an Extend and then a Release of one
// token, and the client handle Release's reply first. Extend's late reply
// must not bring back the deadline that Release settled: the lock is free,
// and another client may hold it already.
func TestLateExtendReply(t *testing.T) {
	srv := redistest.Start(t)
	hook := &hookClient{next: srv.Client(t)}
	db := lock.NewDB(hook)
	other := lock.NewDB(srv.Client(t))
	ctx := t.Context()
	l := lock.New[string]("late-reply", 30*time.Second)
	rw := lock.NewRW[string]("late-reply", 30*time.Second)
	type lease interface {
		lock.Lease
		Release(context.Context) (bool, error)
	}
	tests := []struct {
		name    string
		acquire func(db lock.DB) (lease, error)
	}{
		{"Token", func(db lock.DB) (lease, error) { return l.TryLock(ctx, db, "a") }},
		{"ReadToken", func(db lock.DB) (lease, error) { return rw.TryRead(ctx, db, "r") }},
		{"write Token", func(db lock.DB) (lease, error) { return rw.TryWrite(ctx, db, "w") }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tok, err := tt.acquire(db)
			if tok == nil || err != nil {
				t.Fatalf("acquire = %v, %v", tok, err)
			}
			tok.Extend(ctx) // caches the script
			held := hook.holdNext()
			extended := make(chan bool)
			go func() {
				ok, _ := tok.Extend(ctx)
				extended <- ok
			}()
			release := <-held // Redis has run the Extend; its reply waits
			if ok, err := tok.Release(ctx); !ok || err != nil {
				t.Errorf("Release = %v, %v, want true", ok, err)
			}
			if !tok.Deadline().IsZero() {
				t.Errorf("Deadline after Release = %v, want zero", tok.Deadline())
			}
			close(release)
			if ok := <-extended; !ok {
				t.Errorf("Extend = false, want true (Redis ran it before Release)")
			}
			if d := tok.Deadline(); !d.IsZero() {
				t.Errorf("Deadline after Extend's late reply = %v from now, want zero: Release settled it", time.Until(d))
			}
			if next, err := tt.acquire(other); next == nil || err != nil {
				t.Errorf("acquire by another client = %v, %v, want a token", next, err)
			} else {
				next.Release(ctx)
			}
		})
	}
}

// TestScriptCacheLostWrapped checks the NOSCRIPT fallback through a client
// that wraps the errors it returns.
func TestScriptCacheLostWrapped(t *testing.T) {
	srv := redistest.Start(t)
	raw := srv.Client(t)
	db := lock.NewDB(&hookClient{next: srv.Client(t), wrap: true})
	ctx := t.Context()
	rw := lock.NewRW[string]("wrapped", time.Minute)
	var tok *lock.Token
	var r *lock.ReadToken
	ops := []struct {
		name string
		op   func() (bool, error)
	}{
		{"TryLock", func() (bool, error) { var err error; tok, err = invoices.TryLock(ctx, db, 5); return tok != nil, err }},
		{"Extend", func() (bool, error) { return tok.Extend(ctx) }},
		{"Release", func() (bool, error) { return tok.Release(ctx) }},
		{"TryRead", func() (bool, error) { var err error; r, err = rw.TryRead(ctx, db, "a"); return r != nil, err }},
		{"ReadToken.Extend", func() (bool, error) { return r.Extend(ctx) }},
		{"ReadToken.Release", func() (bool, error) { return r.Release(ctx) }},
		{"TryWrite", func() (bool, error) { var err error; tok, err = rw.TryWrite(ctx, db, "a"); return tok != nil, err }},
	}
	// In order: each operation acts on the token the one before took.
	for _, o := range ops {
		if err := raw.ScriptFlush(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		if ok, err := o.op(); !ok || err != nil {
			t.Fatalf("%s after SCRIPT FLUSH, through a wrapping client = %v, %v, want true", o.name, ok, err)
		}
	}
}
