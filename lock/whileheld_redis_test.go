package lock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/wakuwaku-go/wakuwaku/internal/redistest"
	"github.com/wakuwaku-go/wakuwaku/lock"
)

func TestWhileHeldOnRedis(t *testing.T) {
	srv := redistest.Start(t)
	raw := srv.Client(t)
	db := lock.NewDb(srv.Client(t))
	other := lock.NewDb(srv.Client(t))
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
