package lock_test

import (
	"bytes"
	"context"
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/wakuwaku-go/wakuwaku/internal/redistest"
	"github.com/wakuwaku-go/wakuwaku/lock"
)

func TestWhileHeldOnRedis(t *testing.T) {
	srv := redistest.Start(t)
	raw := srv.Client(t)
	db := lock.NewDB(srv.Client(t))
	other := lock.NewDB(srv.Client(t))
	ctx := t.Context()
	const ttl = 300 * time.Millisecond
	rebuild := lock.New[string]("rebuild", ttl)

	tok, err := rebuild.TryLock(ctx, db, "index")
	if tok == nil || err != nil {
		t.Fatalf("TryLock = %v, %v", tok, err)
	}
	// The work outlives five TTLs; meanwhile nobody else may take the lock.
	stolen := 0
	got, err := lock.WhileHeld(ctx, tok, func(ctx context.Context) (string, error) {
		end := time.Now().Add(5 * ttl)
		for time.Now().Before(end) {
			if tok, _ := rebuild.TryLock(ctx, other, "index"); tok != nil {
				stolen++
			}
			select {
			case <-ctx.Done():
				return "", context.Cause(ctx)
			case <-time.After(20 * time.Millisecond):
			}
		}
		return "rebuilt", nil
	})
	if got != "rebuilt" || err != nil {
		t.Fatalf("WhileHeld = %q, %v, want rebuilt, nil", got, err)
	}
	if stolen != 0 {
		t.Errorf("another client took the lock %d times during WhileHeld", stolen)
	}
	if ok, err := tok.Release(ctx); !ok || err != nil {
		t.Errorf("Release after WhileHeld = %v, %v, want true", ok, err)
	}

	// Fault cases: the lease is lost behind the holder's back. The work must
	// be cancelled, with ErrLeaseLost, within one TTL of the fault.
	const faultTTL = time.Second
	long := lock.New[string]("rebuild-long", faultTTL)
	faults := []struct {
		name   string
		inject func()
		heal   func()
	}{
		{"key deleted", func() { raw.Del(ctx, long.Key("index")) }, func() {}},
		{"redis paused", func() { srv.Pause(t) }, func() { srv.Resume(t) }},
	}
	for _, f := range faults {
		t.Run(f.name, func(t *testing.T) {
			tok, err := long.TryLock(ctx, db, "index")
			if tok == nil || err != nil {
				t.Fatalf("TryLock = %v, %v", tok, err)
			}
			var faulted, cancelled time.Time
			_, err = lock.WhileHeld(ctx, tok, func(ctx context.Context) (int, error) {
				select {
				case <-time.After(faultTTL / 2):
				case <-ctx.Done():
					return 0, errors.New("cancelled before the fault")
				}
				faulted = time.Now()
				f.inject()
				select {
				case <-ctx.Done():
					cancelled = time.Now()
					return 0, context.Cause(ctx)
				case <-time.After(5 * faultTTL):
					return 0, errors.New("not cancelled")
				}
			})
			f.heal()
			if !errors.Is(err, lock.ErrLeaseLost) {
				t.Fatalf("WhileHeld = %v, want ErrLeaseLost", err)
			}
			if d := cancelled.Sub(faulted); d > faultTTL {
				t.Errorf("work cancelled %v after the fault, want within the TTL %v", d, faultTTL)
			} else {
				t.Logf("work cancelled %v after the fault (TTL %v)", d, faultTTL)
			}
			raw.Del(ctx, long.Key("index"))
		})
	}
}

// recommendedClient returns a client of srv with the options a service
// should give the client behind its locks: ContextTimeoutEnabled, so that an
// extension stalled on an unresponsive Redis ends at the lease's deadline.
func recommendedClient(t *testing.T, srv *redistest.Server) *redis.Client {
	t.Helper()
	opts := srv.Options()
	opts.ContextTimeoutEnabled = true
	c := redis.NewClient(opts)
	t.Cleanup(func() { c.Close() })
	return c
}

// extensionsInFlight counts the goroutines of this package's heartbeats that
// are still calling Extend.
func extensionsInFlight() int {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	return bytes.Count(buf, []byte("wakuwaku/lock.(*heartbeat).extend("))
}

// TestWhileHeldRedisPaused pauses Redis while work runs, so that the first
// extension stalls. WhileHeld must return soon after both work has returned
// and the lease's deadline has passed. With go-redis's default options the
// stalled call can't be abandoned: its goroutine ends when the client's
// ReadTimeout (5 s) fails it. With ContextTimeoutEnabled it ends at the
// lease's deadline, and WhileHeld waits for it.
func TestWhileHeldRedisPaused(t *testing.T) {
	const ttl = 900 * time.Millisecond
	srv := redistest.Start(t)
	clients := []struct {
		name    string
		c       *redis.Client
		outlive time.Duration // how long the stalled extension may outlive WhileHeld
	}{
		{"default options", srv.Client(t), srv.Client(t).Options().ReadTimeout + time.Second},
		{"ContextTimeoutEnabled", recommendedClient(t, srv), 0},
	}
	l := lock.New[string]("paused", ttl)
	for _, c := range clients {
		t.Run(c.name, func(t *testing.T) {
			ctx := t.Context()
			db := lock.NewDB(c.c)
			tok, err := l.TryLock(ctx, db, c.name)
			if tok == nil || err != nil {
				t.Fatalf("TryLock = %v, %v", tok, err)
			}
			tok.Extend(ctx) // caches the script
			deadline := tok.Deadline()
			start := time.Now()
			defer srv.Resume(t)
			got, err := lock.WhileHeld(ctx, tok, func(ctx context.Context) (string, error) {
				srv.Pause(t) // before the first extension, a third of the TTL in
				time.Sleep(time.Until(start.Add(400 * time.Millisecond)))
				return "done", nil
			})
			returned := time.Now()
			inFlight := extensionsInFlight()
			if got != "done" || err != nil {
				t.Errorf("WhileHeld = %q, %v, want done, nil: work returned while the lease was held", got, err)
			}
			if late := returned.Sub(deadline); late > 400*time.Millisecond {
				t.Errorf("WhileHeld returned %v after the lease's deadline (work returned at 400ms, lease %v), want soon after it", late, ttl)
			} else {
				t.Logf("WhileHeld returned %v after the lease's deadline", late)
			}
			// The extension's own goroutine may still be unwinding when
			// WhileHeld returns; with deadlines honoured it must be gone
			// within moments, not at the client's ReadTimeout.
			limit := max(c.outlive, 200*time.Millisecond)
			t.Logf("%d extensions in flight when WhileHeld returned", inFlight)
			for extensionsInFlight() != 0 {
				if time.Since(returned) > limit {
					t.Fatalf("an extension still in flight %v after WhileHeld returned, want it gone within %v", time.Since(returned), limit)
				}
				time.Sleep(10 * time.Millisecond)
			}
			t.Logf("the stalled extension outlived WhileHeld by %v", time.Since(returned).Round(10*time.Millisecond))
		})
	}
}
