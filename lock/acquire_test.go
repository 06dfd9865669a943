package lock_test

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wakuwaku-go/wakuwaku/internal/redistest"
	"github.com/wakuwaku-go/wakuwaku/lock"
)

// oldServer is a Client in front of a real server that answers the
// acquire's SET … NX GET as a server older than Redis 7 does, with a syntax
// error, without sending it, and counts what it sends and what it refuses.
type oldServer struct {
	c       lock.Client
	refused atomic.Int64
	sent    atomic.Int64
}

func (o *oldServer) Process(ctx context.Context, cmd redis.Cmder) error {
	if raw, ok := cmd.(*redis.RawCmd); ok && cmd.Name() == "set" {
		o.refused.Add(1)
		raw.SetVal([]byte("-ERR syntax error\r\n"))
		return nil
	}
	o.sent.Add(1)
	return o.c.Process(ctx, cmd)
}

// takesNXGet reports whether the server c talks to takes SET … NX GET
// (Redis 7.0 and later); Redis 6.2 answers it with a syntax error, and an
// acquire then goes by the script.
func takesNXGet(t *testing.T, c redis.Cmdable) bool {
	t.Helper()
	err := c.SetArgs(t.Context(), "takes-nx-get", "v", redis.SetArgs{Mode: "NX", Get: true}).Err()
	if err != nil && err != redis.Nil {
		if !strings.Contains(err.Error(), "syntax error") {
			t.Fatalf("SET … NX GET = %v; want a reply or a syntax error", err)
		}
		return false
	}
	return true
}

// TestAcquire checks the acquire's plain SET … NX GET on a real
// redis-server, and its fallback to the script: a free lock is taken, a
// busy one is not, a key holding the token already (a retry after a lost
// reply) counts as taken; a server that refuses the command is sent the
// script, once per acquire until the DB remembers; a key of another type
// is an error, not a busy lock.
func TestAcquire(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client(t)
	ctx := t.Context()
	l := lock.New[string]("acquire", 30*time.Second)

	t.Run("free, busy, own token", func(t *testing.T) {
		db := lock.NewDB(c)
		tok, err := l.TryLock(ctx, db, "a")
		if tok == nil || err != nil {
			t.Fatalf("TryLock on a free name = %v, %v; want a token", tok, err)
		}
		if ttl := c.PTTL(ctx, tok.Key()).Val(); ttl <= 0 || ttl > 30*time.Second {
			t.Errorf("PTTL after the acquire = %v; want a lease of at most 30s", ttl)
		}
		if other, err := l.TryLock(ctx, db, "a"); other != nil || err != nil {
			t.Errorf("TryLock on a held name = %v, %v; want nil, nil", other, err)
		}
		if v := c.Get(ctx, tok.Key()).Val(); v == "" {
			t.Fatal("the key is gone after a busy acquire")
		}
		tok.Release(ctx)
	})

	t.Run("a retry finds its own token", func(t *testing.T) {
		// The wrapper sends each acquire twice, as a client does that
		// lost the first reply and retried: the second attempt finds the
		// key holding its own token.
		db := lock.NewDB(twice{c})
		tok, err := l.TryLock(ctx, db, "retried")
		if tok == nil || err != nil {
			t.Fatalf("TryLock sent twice = %v, %v; want a token", tok, err)
		}
		if ok, err := tok.Release(ctx); !ok || err != nil {
			t.Errorf("Release = %v, %v; want true", ok, err)
		}
	})

	t.Run("old server", func(t *testing.T) {
		old := &oldServer{c: c}
		db := lock.NewDB(old)
		narrowed := db.Only(l)
		tok, err := l.TryLock(ctx, narrowed, "old")
		if tok == nil || err != nil {
			t.Fatalf("TryLock over an old server = %v, %v; want a token", tok, err)
		}
		if again, err := l.TryLock(ctx, db, "old"); again != nil || err != nil {
			t.Errorf("second TryLock over an old server = %v, %v; want nil, nil", again, err)
		}
		// The first acquire met the refusal; the DB and the one narrowed
		// from it remember, so the second went straight to the script.
		if n := old.refused.Load(); n != 1 {
			t.Errorf("SET … NX GET refused %d times; want 1", n)
		}
		if ok, err := tok.Release(ctx); !ok || err != nil {
			t.Errorf("Release = %v, %v; want true", ok, err)
		}
		// A DB of its own over the same client learns it again.
		if tok, err := l.TryLock(ctx, lock.NewDB(old), "old"); tok == nil || err != nil {
			t.Errorf("TryLock through a new DB = %v, %v; want a token", tok, err)
		}
		if n := old.refused.Load(); n != 2 {
			t.Errorf("SET … NX GET refused %d times after a new DB; want 2", n)
		}
	})

	t.Run("key of another type", func(t *testing.T) {
		db := lock.NewDB(c)
		key := l.Key("wrongtype")
		if err := c.RPush(ctx, key, "x").Err(); err != nil {
			t.Fatal(err)
		}
		tok, err := l.TryLock(ctx, db, "wrongtype")
		if tok != nil || err == nil || !strings.Contains(err.Error(), "WRONGTYPE") {
			t.Errorf("TryLock on a list = %v, %v; want a WRONGTYPE error", tok, err)
		}
		// That error is not the old server's: the next acquire is still
		// the plain SET.
		cnt := &cmdNames{}
		c2 := srv.Client(t)
		c2.AddHook(cnt)
		db2 := lock.NewDB(c2)
		l.TryLock(ctx, db2, "wrongtype")
		tok, err = l.TryLock(ctx, db2, "free")
		if tok == nil || err != nil {
			t.Fatalf("TryLock(free) = %v, %v", tok, err)
		}
		// On Redis 6.2 the DB learned from its first acquire that the
		// server refuses SET … NX GET, and acquires by the script since.
		want := "set"
		if !takesNXGet(t, c) {
			want = "evalsha"
		}
		if got := cnt.names(); got[len(got)-1] != want {
			t.Errorf("commands after a WRONGTYPE = %q; want the last to be %s", got, want)
		}
	})
}

// twice sends every SET two times, and keeps the second reply.
type twice struct{ c lock.Client }

func (w twice) Process(ctx context.Context, cmd redis.Cmder) error {
	if cmd.Name() != "set" {
		return w.c.Process(ctx, cmd)
	}
	first := redis.NewRawCmd(ctx, cmd.Args()...)
	if err := w.c.Process(ctx, first); err != nil {
		return err
	}
	return w.c.Process(ctx, cmd)
}

// TestAcquireAfterMigration takes a lock on a real three-master Redis
// Cluster through a client whose map of the slots is stale: the slot moved
// to another master after the client last looked. The SET meets MOVED as
// its reply, which go-redis does not follow for a raw command; the acquire
// falls back to the script, which go-redis redirects.
func TestAcquireAfterMigration(t *testing.T) {
	cl := redistest.StartCluster(t, 3)
	c := cl.Client(t)
	cnt := &cmdNames{}
	c.AddHook(cnt)
	ctx := t.Context()
	db := lock.NewDB(c)
	l := lock.New[string]("migrated", 30*time.Second)

	tok, err := l.TryLock(ctx, db, "before")
	if tok == nil || err != nil {
		t.Fatalf("TryLock before the migration = %v, %v", tok, err)
	}
	tok.Release(ctx)
	slot := redistest.Slot(l.Key("after"))
	to := (cl.SlotOwner(t, slot) + 1) % 3
	cl.MigrateSlot(t, slot, to)

	before := len(cnt.names())
	tok, err = l.TryLock(ctx, db, "after")
	if tok == nil || err != nil {
		t.Fatalf("TryLock after the slot moved = %v, %v; want a token", tok, err)
	}
	sent := cnt.names()[before:]
	// The script goes by SHA first; the new master may not have it cached
	// yet and answer NOSCRIPT, and then it goes in full. On Redis 6.2 the
	// DB learned before the migration that the server refuses SET … NX
	// GET, and sends only the script.
	if !takesNXGet(t, c) {
		if len(sent) < 1 || sent[0] != "evalsha" {
			t.Errorf("commands of the acquire after the migration on a server without SET … NX GET = %q; want the script", sent)
		}
	} else if len(sent) < 2 || sent[0] != "set" || sent[1] != "evalsha" {
		t.Errorf("commands of the acquire after the migration = %q; want set, then the script", sent)
	}
	owner := cl.Nodes()[to].Client(t)
	if v, err := owner.Get(ctx, tok.Key()).Result(); err != nil || v == "" {
		t.Errorf("GET %s on the slot's new master = %q, %v; want the token", tok.Key(), v, err)
	}
	if ok, err := tok.Release(ctx); !ok || err != nil {
		t.Errorf("Release = %v, %v; want true", ok, err)
	}
}

// cmdNames is a go-redis hook that records the name of every command a
// client processes, redirected ones once per attempt as go-redis sees them.
type cmdNames struct {
	mu   sync.Mutex
	seen []string
}

func (r *cmdNames) names() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.seen...)
}

func (r *cmdNames) DialHook(next redis.DialHook) redis.DialHook { return next }
func (r *cmdNames) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		r.mu.Lock()
		r.seen = append(r.seen, cmd.Name())
		r.mu.Unlock()
		return next(ctx, cmd)
	}
}
func (r *cmdNames) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
