package lock_test

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/wakuwaku-go/wakuwaku/internal/redistest"
	"github.com/wakuwaku-go/wakuwaku/lock"
)

var catalog = lock.NewRW[string]("catalog", 10*time.Second)

func TestRWLockOnRedis(t *testing.T) {
	srv := redistest.Start(t)
	raw := srv.Client(t)
	c, cnt := countedClient(t, srv)
	db := lock.NewDB(c)
	ctx := t.Context()
	w, r := catalog.Keys("tokyo")
	if w != "@@wakuwaku-entity:RwLock:{catalog:tokyo}:w" || r != "@@wakuwaku-entity:RwLock:{catalog:tokyo}:r" {
		t.Fatalf("Keys = %q, %q", w, r)
	}
	// Warm the script cache and the connection.
	if tok, _ := catalog.TryWrite(ctx, db, "warm"); tok != nil {
		tok.Release(ctx)
	}
	if tok, _ := catalog.TryRead(ctx, db, "warm"); tok != nil {
		tok.Extend(ctx)
		tok.Release(ctx)
	}

	var r1 *lock.ReadToken
	var err error
	if n := cnt.sent(func() { r1, err = catalog.TryRead(ctx, db, "tokyo") }); n != 1 {
		t.Errorf("TryRead sent %d commands, want 1", n)
	}
	if r1 == nil || err != nil {
		t.Fatalf("TryRead = %v, %v, want a token", r1, err)
	}
	r2, err := catalog.TryRead(ctx, db, "tokyo")
	if r2 == nil || err != nil {
		t.Fatalf("second TryRead = %v, %v, want readers to share", r2, err)
	}
	members, _ := raw.ZRangeWithScores(ctx, r, 0, -1).Result()
	if len(members) != 2 {
		t.Fatalf("readers set has %d members, want 2", len(members))
	}
	serverNow, _ := raw.Time(ctx).Result()
	for _, m := range members {
		if s := m.Member.(string); len(s) != 16 {
			t.Errorf("reader token is %d bytes, want 16", len(s))
		}
		end := time.UnixMilli(int64(m.Score))
		if d := end.Sub(serverNow); d <= 9*time.Second || d > 10*time.Second+time.Millisecond {
			t.Errorf("reader lease ends %v after the server's TIME, want about 10s", d)
		}
	}
	if pttl := raw.PTTL(ctx, r).Val(); pttl <= 9*time.Second {
		t.Errorf("readers set PTTL = %v, want about 10s", pttl)
	}
	if tok, err := catalog.TryWrite(ctx, db, "tokyo"); tok != nil || err != nil {
		t.Errorf("TryWrite with readers = %v, %v, want nil, nil", tok, err)
	}
	var ok bool
	if n := cnt.sent(func() { ok, err = r1.Extend(ctx) }); n != 1 || !ok || err != nil {
		t.Errorf("reader Extend = %v, %v in %d commands, want true in 1", ok, err, n)
	}
	if n := cnt.sent(func() { ok, err = r1.Release(ctx) }); n != 1 || !ok || err != nil {
		t.Errorf("reader Release = %v, %v in %d commands, want true in 1", ok, err, n)
	}
	if ok, _ := r1.Release(ctx); ok {
		t.Errorf("second reader Release = true, want false")
	}
	if ok, _ := r1.Extend(ctx); ok {
		t.Errorf("Extend after Release = true, want false")
	}
	r2.Release(ctx)

	var wt *lock.Token
	if n := cnt.sent(func() { wt, err = catalog.TryWrite(ctx, db, "tokyo") }); n != 1 || wt == nil || err != nil {
		t.Fatalf("TryWrite = %v, %v in %d commands, want a token in 1", wt, err, n)
	}
	if got := raw.Get(ctx, w).Val(); len(got) != 16 || wt.Key() != w {
		t.Errorf("writer key holds %d bytes, token key %q", len(got), wt.Key())
	}
	if tok, err := catalog.TryRead(ctx, db, "tokyo"); tok != nil || err != nil {
		t.Errorf("TryRead with a writer = %v, %v, want nil, nil", tok, err)
	}
	if tok, err := catalog.TryWrite(ctx, db, "tokyo"); tok != nil || err != nil {
		t.Errorf("TryWrite with a writer = %v, %v, want nil, nil", tok, err)
	}
	if ok, err := wt.Extend(ctx); !ok || err != nil {
		t.Errorf("writer Extend = %v, %v, want true", ok, err)
	}
	if ok, err := wt.Release(ctx); !ok || err != nil {
		t.Errorf("writer Release = %v, %v, want true", ok, err)
	}
	if tok, err := catalog.TryRead(ctx, db, "tokyo"); tok == nil || err != nil {
		t.Errorf("TryRead after the writer left = %v, %v, want a token", tok, err)
	}
}

// TestRWLockEndedReader checks that a reader that never releases stops
// blocking writers when its lease ends, and can't release or extend after.
func TestRWLockEndedReader(t *testing.T) {
	srv := redistest.Start(t)
	raw := srv.Client(t)
	db := lock.NewDB(srv.Client(t))
	ctx := t.Context()
	short := lock.NewRW[string]("short", 100*time.Millisecond)
	long := lock.NewRW[string]("short", 10*time.Second) // same keys, longer leases
	_, r := short.Keys("x")

	ended, _ := short.TryRead(ctx, db, "x")
	stale, _ := short.TryRead(ctx, db, "x")
	keep, _ := long.TryRead(ctx, db, "x") // keeps the set alive
	if ended == nil || stale == nil || keep == nil {
		t.Fatal("TryRead = nil, want tokens")
	}
	time.Sleep(150 * time.Millisecond) // the short leases end
	if n := raw.ZCard(ctx, r).Val(); n != 3 {
		t.Fatalf("readers set has %d members before any script ran, want 3", n)
	}
	if ok, err := ended.Release(ctx); ok || err != nil {
		t.Errorf("Release of an ended reader still in the set = %v, %v, want false", ok, err)
	}
	if n := raw.ZCard(ctx, r).Val(); n != 1 {
		t.Errorf("readers set has %d members after pruning, want 1 (the live reader)", n)
	}
	if ok, err := stale.Extend(ctx); ok || err != nil {
		t.Errorf("Extend of an ended reader = %v, %v, want false", ok, err)
	}
	if tok, _ := long.TryWrite(ctx, db, "x"); tok != nil {
		t.Fatal("TryWrite with a live reader = a token, want nil")
	}
	// A reader that never releases: once its lease ends, writers get in.
	if err := raw.ZAdd(ctx, r, redis.Z{Score: 1, Member: "crashed-reader.."}).Err(); err != nil {
		t.Fatal(err)
	}
	if ok, _ := keep.Release(ctx); !ok {
		t.Fatal("Release of a live reader = false")
	}
	if tok, err := long.TryWrite(ctx, db, "x"); tok == nil || err != nil {
		t.Errorf("TryWrite after readers' leases ended = %v, %v, want a token", tok, err)
	}
	if n := raw.ZCard(ctx, r).Val(); n != 0 {
		t.Errorf("readers set has %d members after TryWrite, want 0", n)
	}
}

// TestRWLockReaderLastsItsDeadline checks that a writer never gets a name
// before a reader's lease is over by the reader's own account (its
// Deadline): the scripts used to drop a reader in the very millisecond its
// score named, up to 1 ms early, which a writer polling at the end of a
// reader's lease hit about every other time.
func TestRWLockReaderLastsItsDeadline(t *testing.T) {
	srv := redistest.Start(t)
	db := lock.NewDB(srv.Client(t))
	ctx := t.Context()
	brief := lock.NewRW[int]("brief", 20*time.Millisecond)
	for i := range 50 {
		r, err := brief.TryRead(ctx, db, i)
		if r == nil || err != nil {
			t.Fatalf("TryRead(%d) = %v, %v", i, r, err)
		}
		for {
			w, err := brief.TryWrite(ctx, db, i)
			if err != nil {
				t.Fatalf("TryWrite(%d) = %v", i, err)
			}
			if w != nil {
				if early := time.Until(r.Deadline()); early > 0 {
					t.Fatalf("TryWrite(%d) got the name %v before the reader's Deadline", i, early)
				}
				break
			}
		}
	}
}
