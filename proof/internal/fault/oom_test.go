package fault_test

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/wakuwaku-go/wakuwaku/internal/redistest"
	"github.com/wakuwaku-go/wakuwaku/lock"
	"github.com/wakuwaku-go/wakuwaku/proof/internal/fault"
)

// isOOM reports whether err is the server's OOM error reply. The first word
// of a Redis error reply is its code, which the protocol defines.
func isOOM(err error) bool {
	var re redis.Error
	return errors.As(err, &re) && strings.HasPrefix(re.Error(), "OOM ")
}

// TestOutOfMemory fills a server that has a tiny maxmemory and the
// noeviction policy, while locks are held, until writes fail with OOM.
// Pass: TryLock on a free lock returns the OOM error, not a nil token (busy);
// no held lock is handed out again; and the holders can still release (and
// a Lock's holder extend), since DEL, ZREM and PEXPIRE need no memory.
func TestOutOfMemory(t *testing.T) {
	srv := redistest.Start(t, "--maxmemory", "2mb", "--maxmemory-policy", "noeviction")
	raw := srv.Client(t)
	db := lock.NewDB(srv.Client(t))
	ctx := t.Context()
	l := lock.New[string]("oom", time.Minute)
	rw := lock.NewRW[string]("oom", time.Minute)

	held, err := l.TryLock(ctx, db, "held")
	if held == nil || err != nil {
		t.Fatalf("TryLock(held) = %v, %v", held, err)
	}
	writer, err := rw.TryWrite(ctx, db, "written")
	if writer == nil || err != nil {
		t.Fatalf("TryWrite(written) = %v, %v", writer, err)
	}
	reader, err := rw.TryRead(ctx, db, "read")
	if reader == nil || err != nil {
		t.Fatalf("TryRead(read) = %v, %v", reader, err)
	}

	value := strings.Repeat("x", 1024)
	fills := 0
	for ; ; fills++ {
		err := raw.Set(ctx, fmt.Sprint("fill:", fills), value, 0).Err()
		if isOOM(err) {
			break
		}
		if err != nil || fills > 100_000 {
			t.Fatalf("filling the server: %d keys, %v", fills, err)
		}
	}
	// Used memory hovers at the limit (a client's buffers come and go), so
	// that a small command may pass again: set the limit well below it.
	used, err := usedMemory(t, raw)
	if err != nil {
		t.Fatal(err)
	}
	limit := used - 256<<10
	if err := raw.ConfigSet(ctx, "maxmemory", fmt.Sprint(limit)).Err(); err != nil {
		t.Fatalf("CONFIG SET maxmemory: %v", err)
	}
	if err := raw.Set(ctx, "probe", "x", 0).Err(); !isOOM(err) {
		t.Fatalf("SET with used memory %d over maxmemory %d = %v, want OOM", used, limit, err)
	}

	// Acquiring needs memory: an error, distinct from busy.
	tok, err := l.TryLock(ctx, db, "free")
	if tok != nil || !isOOM(err) {
		t.Errorf("TryLock(free) out of memory = %v, %v, want nil and the OOM error", tok, err)
	}
	var notes []string
	notes = append(notes, fmt.Sprintf("TryLock(free lock) = %v", err))
	// An RWLock's scripts prune ended readers (a write command) before they
	// add anything, and Redis checks memory only before a script's first
	// write: its acquires go through. What must hold is that a held name
	// stays held; that they go through is what RELIABILITY.md publishes
	// (maxmemory, noeviction), checked so that the page stays true.
	wtok, werr := rw.TryWrite(ctx, db, "free")
	rtok, rerr := rw.TryRead(ctx, db, "free-for-readers")
	notes = append(notes, fmt.Sprintf("TryWrite(free) = token %v, %v; TryRead(free) = token %v, %v", wtok != nil, werr, rtok != nil, rerr))
	if wtok == nil || werr != nil || rtok == nil || rerr != nil {
		t.Errorf("out of memory, TryWrite(free) = token %v, %v; TryRead(free) = token %v, %v; RELIABILITY.md says both succeed", wtok != nil, werr, rtok != nil, rerr)
	}
	if tok, _ := rw.TryWrite(ctx, db, "written"); tok != nil {
		t.Errorf("TryWrite(written) out of memory returned a token: two writers")
	}
	if tok, _ := rw.TryRead(ctx, db, "written"); tok != nil {
		t.Errorf("TryRead(written) out of memory returned a token: a reader with a writer")
	}
	busy, err := l.TryLock(ctx, db, "held")
	if busy != nil {
		t.Errorf("TryLock(held) out of memory returned a token: two holders")
	} else if !isOOM(err) {
		t.Errorf("TryLock(held) out of memory = %v; RELIABILITY.md says a busy lock reports the OOM error, not busy", err)
	}
	notes = append(notes, fmt.Sprintf("TryLock(held lock) = %v, %v", busy, err))

	// Holding needs none: extend and release go through.
	if ok, err := held.Extend(ctx); !ok || err != nil {
		t.Errorf("Extend out of memory = %v, %v, want true", ok, err)
	}
	if ok, err := writer.Extend(ctx); !ok || err != nil {
		t.Errorf("writer's Extend out of memory = %v, %v, want true", ok, err)
	}
	ok, err := reader.Extend(ctx)
	notes = append(notes, fmt.Sprintf("reader's Extend = %v, %v (its ZADD comes after the prune, a write)", ok, err))
	if !ok || err != nil {
		t.Errorf("reader's Extend out of memory = %v, %v; RELIABILITY.md says it works", ok, err)
	}
	for what, rel := range map[string]func() (bool, error){
		"Release":          func() (bool, error) { return held.Release(ctx) },
		"writer's Release": func() (bool, error) { return writer.Release(ctx) },
		"reader's Release": func() (bool, error) { return reader.Release(ctx) },
	} {
		if ok, err := rel(); !ok || err != nil {
			t.Errorf("%s out of memory = %v, %v, want true", what, ok, err)
		}
	}

	// Memory back: locks work again.
	if err := raw.FlushDB(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if tok, err := l.TryLock(ctx, db, "free"); tok == nil || err != nil {
		t.Errorf("TryLock(free) with memory back = %v, %v, want a token", tok, err)
	}
	fault.Publish(t, fault.Figures{
		Scenario: "maxmemory 2mb, noeviction",
		Acquired: 4,
		Faults:   fmt.Sprintf("server filled with %d keys of 1 KiB until OOM, then maxmemory set 256 KiB below the memory used", fills),
		Notes:    notes,
	})
}

// usedMemory returns the server's used_memory, from INFO memory.
func usedMemory(t *testing.T, c *redis.Client) (int64, error) {
	t.Helper()
	info, err := c.Info(t.Context(), "memory").Result()
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "used_memory:"); ok {
			return strconv.ParseInt(v, 10, 64)
		}
	}
	return 0, errors.New("INFO memory has no used_memory")
}
