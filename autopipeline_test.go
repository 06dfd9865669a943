package wakuwaku_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wakuwaku-go/wakuwaku/internal/redistest"
	"github.com/wakuwaku-go/wakuwaku/lock"
)

// autoPipelined returns a DB over an autopipeliner of a client of srv, the
// blocking one (go-redis's Client.AutoPipeline, as README.md shows) or,
// with async, the deferred one (Client.AsyncAutoPipeline), whose Process
// returns before the reply and leaves the error on the command; and a plain
// client of the same server to look at the keys and flush the scripts with.
func autoPipelined(t *testing.T, srv *redistest.Server, async bool, opts ...lock.DBOption) (lock.DB, *redis.Client) {
	t.Helper()
	c := srv.Client(t)
	open := c.AutoPipeline
	if async {
		open = c.AsyncAutoPipeline
	}
	ap, err := open()
	if err != nil {
		t.Fatalf("AutoPipeline() = %v", err)
	}
	t.Cleanup(func() { _ = ap.Close() })
	return lock.NewDB(ap, opts...), srv.Client(t)
}

// TestAutoPipelined runs each lock operation through both faces of
// go-redis's AutoPipeliner on a real redis-server: acquire, busy, extend,
// release, the batch, and the scripts' NOSCRIPT fallback after SCRIPT FLUSH,
// alone and with many goroutines whose EVALSHAs share one pipeline.
func TestAutoPipelined(t *testing.T) {
	srv := redistest.Start(t)
	for _, face := range []string{"blocking", "async"} {
		t.Run(face, func(t *testing.T) {
			db, plain := autoPipelined(t, srv, face == "async")
			testAutoPipelined(t, db, plain)
		})
	}
}

func testAutoPipelined(t *testing.T, db lock.DB, plain *redis.Client) {
	ctx := t.Context()
	l := lock.New[string]("autopipelined", 30*time.Second)
	rw := lock.NewRW[string]("autopipelined", 30*time.Second)

	cycle := func(t *testing.T, name string) {
		t.Helper()
		tok, err := l.TryLock(ctx, db, name)
		if tok == nil || err != nil {
			t.Fatalf("TryLock(%q) = %v, %v; want a token", name, tok, err)
		}
		if again, err := l.TryLock(ctx, db, name); again != nil || err != nil {
			t.Errorf("TryLock(%q) while held = %v, %v; want nil, nil (busy)", name, again, err)
		}
		if ok, err := tok.Extend(ctx); !ok || err != nil {
			t.Errorf("Extend = %v, %v; want true", ok, err)
		}
		if ok, err := tok.Release(ctx); !ok || err != nil {
			t.Errorf("Release = %v, %v; want true", ok, err)
		}
		if ok, err := tok.Release(ctx); ok || err != nil {
			t.Errorf("second Release = %v, %v; want false", ok, err)
		}
		if n, err := plain.Exists(ctx, l.Key(name)).Result(); n != 0 || err != nil {
			t.Errorf("EXISTS %s after the release = %d, %v; want 0", l.Key(name), n, err)
		}
	}
	flush := func(t *testing.T) {
		t.Helper()
		if err := plain.ScriptFlush(ctx).Err(); err != nil {
			t.Fatal(err)
		}
	}

	for _, tc := range []struct {
		name  string
		flush bool // SCRIPT FLUSH first, so every script meets NOSCRIPT once
	}{
		{"cached scripts", false},
		{"after SCRIPT FLUSH", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Run("lock", func(t *testing.T) {
				if tc.flush {
					flush(t)
				}
				cycle(t, "one")
			})
			t.Run("rwlock", func(t *testing.T) {
				if tc.flush {
					flush(t)
				}
				r, err := rw.TryRead(ctx, db, "shared")
				if r == nil || err != nil {
					t.Fatalf("TryRead = %v, %v; want a token", r, err)
				}
				if w, err := rw.TryWrite(ctx, db, "shared"); w != nil || err != nil {
					t.Errorf("TryWrite beside a reader = %v, %v; want nil, nil", w, err)
				}
				if ok, err := r.Extend(ctx); !ok || err != nil {
					t.Errorf("read Extend = %v, %v; want true", ok, err)
				}
				if ok, err := r.Release(ctx); !ok || err != nil {
					t.Errorf("read Release = %v, %v; want true", ok, err)
				}
			})
			t.Run("batch", func(t *testing.T) {
				if tc.flush {
					flush(t)
				}
				names := []string{"b1", "b2", "b3"}
				held, err := l.TryLock(ctx, db, "b2")
				if held == nil || err != nil {
					t.Fatalf("TryLock(b2) = %v, %v", held, err)
				}
				toks, err := l.TryLockMany(ctx, db, names)
				if err != nil || len(toks) != 3 || toks[0] == nil || toks[1] != nil || toks[2] == nil {
					t.Fatalf("TryLockMany(%q) with b2 held = %v, %v; want tokens, nil, a token", names, toks, err)
				}
				if ok, err := lock.ReleaseMany(ctx, toks); err != nil || !ok[0] || ok[1] || !ok[2] {
					t.Errorf("ReleaseMany = %v, %v; want [true false true]", ok, err)
				}
				held.Release(ctx)
			})
			t.Run("64 goroutines", func(t *testing.T) {
				if tc.flush {
					flush(t)
				}
				// Their EVALSHAs go out together in the pipeline's batches,
				// and after the flush come back NOSCRIPT together.
				var wg sync.WaitGroup
				for g := range 64 {
					wg.Go(func() { cycle(t, fmt.Sprint("g", g)) })
				}
				wg.Wait()
			})
		})
	}
}

// TestAutoPipelinedReplicas checks that a DB over an AutoPipeliner refuses
// WithReplicas' operations instead of sending them without their WAIT:
// go-redis sends WAIT, a blocking command, on a connection of its own,
// where it would count that connection's writes, not the lock's.
func TestAutoPipelinedReplicas(t *testing.T) {
	srv := redistest.Start(t)
	db, plain := autoPipelined(t, srv, false, lock.WithReplicas(1, 10*time.Millisecond))
	ctx := t.Context()
	l := lock.New[string]("autopipelined", 30*time.Second)
	tok, err := l.TryLock(ctx, db, "replicated")
	if tok != nil || err == nil || errors.Is(err, lock.ErrNotReplicated) {
		t.Errorf("TryLock with WithReplicas over an AutoPipeliner = %v, %v; want an error that is not ErrNotReplicated", tok, err)
	}
	if n, err := plain.Exists(ctx, l.Key("replicated")).Result(); n != 0 || err != nil {
		t.Errorf("EXISTS after the refused acquire = %d, %v; want 0 (nothing sent)", n, err)
	}
	if toks, err := l.TryLockMany(ctx, db, []string{"r1", "r2"}); err == nil || toks[0] != nil {
		t.Errorf("TryLockMany with WithReplicas over an AutoPipeliner = %v, %v; want an error", toks, err)
	}
}

// TestAutoPipelinedCluster runs the lock operations through the
// autopipeliner of a cluster client, on a three-master Redis Cluster: the
// one-key operations go to their slot's master in its node's batches, and
// TryLockMany over names in many slots is refused CROSSSLOT as one call
// and falls back to a call per slot.
func TestAutoPipelinedCluster(t *testing.T) {
	cl := redistest.StartCluster(t, 3)
	c := cl.Client(t)
	ap, err := c.AutoPipeline()
	if err != nil {
		t.Fatalf("AutoPipeline() = %v", err)
	}
	t.Cleanup(func() { _ = ap.Close() })
	db := lock.NewDB(ap)
	ctx := t.Context()
	l := lock.New[int]("autopipelined", 30*time.Second)

	var wg sync.WaitGroup
	for n := range 32 {
		wg.Go(func() {
			tok, err := l.TryLock(ctx, db, n)
			if tok == nil || err != nil {
				t.Errorf("TryLock(%d) = %v, %v; want a token", n, tok, err)
				return
			}
			if again, err := l.TryLock(ctx, db, n); again != nil || err != nil {
				t.Errorf("TryLock(%d) while held = %v, %v; want nil, nil", n, again, err)
			}
			if ok, err := tok.Release(ctx); !ok || err != nil {
				t.Errorf("Release(%d) = %v, %v; want true", n, ok, err)
			}
		})
	}
	wg.Wait()

	names := make([]int, 20)
	for i := range names {
		names[i] = i
	}
	toks, err := l.TryLockMany(ctx, db, names)
	if err != nil {
		t.Fatalf("TryLockMany(%d names) = %v", len(names), err)
	}
	for i, tok := range toks {
		if tok == nil {
			t.Errorf("TryLockMany: name %d busy, want taken", names[i])
		}
	}
	if ok, err := lock.ReleaseMany(ctx, toks); err != nil || len(ok) != len(names) || !ok[0] || !ok[len(ok)-1] {
		t.Errorf("ReleaseMany = %v, %v; want all true", ok, err)
	}
}
