package lock_test

import (
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/wakuwaku-go/wakuwaku/internal/redistest"
	"github.com/wakuwaku-go/wakuwaku/lock"
)

func TestHeld(t *testing.T) {
	srv := redistest.Start(t)
	raw := srv.Client(t)
	c, cnt := countedClient(t, srv)
	db := lock.NewDB(c)
	ro := db.ReadOnly()
	ctx := t.Context()
	invoices.Held(ctx, ro, 0) // the connection's handshake

	var left time.Duration
	var held bool
	var err error
	if n := cnt.sent(func() { left, held, err = invoices.Held(ctx, ro, 7) }); n != 1 {
		t.Errorf("Held sent %d commands, want 1", n)
	}
	if held || left != 0 || err != nil {
		t.Errorf("Held(7) on a free lock = %v, %v, %v, want 0, false, nil", left, held, err)
	}
	tok, err := invoices.TryLock(ctx, db, 7)
	if tok == nil || err != nil {
		t.Fatalf("TryLock(7) = %v, %v", tok, err)
	}
	left, held, err = invoices.Held(ctx, ro, 7)
	if !held || left <= 29*time.Second || left > 30*time.Second || err != nil {
		t.Errorf("Held(7) while held = %v, %v, %v, want about 30s, true, nil", left, held, err)
	}
	if _, err := raw.Get(ctx, tok.Key()).Result(); err != nil {
		t.Errorf("GET after Held = %v: Held must not touch the key", err)
	}
	tok.Release(ctx)
	if _, held, _ := invoices.Held(ctx, ro, 7); held {
		t.Error("Held(7) after Release = true, want false")
	}

	if err := raw.Set(ctx, invoices.Key(8), "forever", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if _, held, err := invoices.Held(ctx, ro, 8); held || err == nil {
		t.Errorf("Held on a key without expiry = %v, %v, want false and an error", held, err)
	}

	var zero lock.Lock[uint64]
	if _, _, err := zero.Held(ctx, ro, 1); !errors.Is(err, lock.ErrZeroLock) {
		t.Errorf("Held on the zero Lock: error = %v, want ErrZeroLock", err)
	}
	if _, _, err := invoices.Held(ctx, lock.ReadOnlyDB{}, 1); !errors.Is(err, lock.ErrNoClient) {
		t.Errorf("Held on the zero ReadOnlyDB: error = %v, want ErrNoClient", err)
	}
}

func TestInspectRW(t *testing.T) {
	srv := redistest.Start(t)
	raw := srv.Client(t)
	c, cnt := countedClient(t, srv)
	db := lock.NewDB(c)
	ro := db.ReadOnly()
	ctx := t.Context()
	short := lock.NewRW[string]("catalog", 2*time.Second) // catalog's keys, a shorter lease
	catalog.Inspect(ctx, ro, "warm")                      // the script's first EVALSHA is answered NOSCRIPT

	check := func(name string, want lock.RWState) {
		t.Helper()
		var got lock.RWState
		var err error
		if n := cnt.sent(func() { got, err = catalog.Inspect(ctx, ro, name) }); n != 1 {
			t.Errorf("Inspect(%q) sent %d commands, want 1", name, n)
		}
		if err != nil {
			t.Fatalf("Inspect(%q) = %v", name, err)
		}
		// Leases are whole ms of the server's clock: allow what a round trip takes.
		within := func(got, want time.Duration) bool { return got <= want && got > want-time.Second }
		if got.Writer != want.Writer || got.Readers != want.Readers ||
			!within(got.WriterLeft, want.WriterLeft) || !within(got.ReaderLeft, want.ReaderLeft) ||
			(want.WriterLeft == 0) != (got.WriterLeft == 0) || (want.ReaderLeft == 0) != (got.ReaderLeft == 0) {
			t.Errorf("Inspect(%q) = %+v, want about %+v", name, got, want)
		}
	}
	check("free", lock.RWState{})

	w, err := catalog.TryWrite(ctx, db, "written")
	if w == nil || err != nil {
		t.Fatalf("TryWrite = %v, %v", w, err)
	}
	check("written", lock.RWState{Writer: true, WriterLeft: 10 * time.Second})

	for _, l := range []lock.RWLock[string]{short, catalog, short} {
		if r, err := l.TryRead(ctx, db, "read"); r == nil || err != nil {
			t.Fatalf("TryRead = %v, %v", r, err)
		}
	}
	_, readers := catalog.Keys("read")
	// A reader whose lease ended long ago and that no script has pruned yet.
	if err := raw.ZAdd(ctx, readers, redis.Z{Score: 1, Member: "ended-reader...."}).Err(); err != nil {
		t.Fatal(err)
	}
	check("read", lock.RWState{Readers: 3, ReaderLeft: 10 * time.Second})
	if n := raw.ZCard(ctx, readers).Val(); n != 4 {
		t.Errorf("readers set has %d members after Inspect, want 4: Inspect must not prune", n)
	}
}

// TestInspectOnReplica checks that Held and Inspect work through a
// ReadOnlyDB on a read-only replica, which refuses every write.
func TestInspectOnReplica(t *testing.T) {
	master := redistest.Start(t, "--repl-diskless-sync-delay", "0")
	port := master.Addr()[len("127.0.0.1:"):]
	replica := redistest.Start(t, "--replicaof", "127.0.0.1", port)
	db := lock.NewDB(master.Client(t))
	rc := replica.Client(t)
	ro := lock.NewReadOnlyDB(rc)
	ctx := t.Context()

	tok, _ := invoices.TryLock(ctx, db, 1)
	wtok, _ := catalog.TryWrite(ctx, db, "w")
	rtok, _ := catalog.TryRead(ctx, db, "r")
	if tok == nil || wtok == nil || rtok == nil {
		t.Fatal("an acquire on the master returned nil")
	}
	// WAIT on the master: the writes above have reached the replica. Its
	// acknowledgement can come before the replica answers reads of them
	// (Valkey 8.0.1 did so once, in the version matrix, just after the
	// replica's first sync), so the test also waits for the keys there.
	if n, err := master.Client(t).Wait(ctx, 1, 10*time.Second).Result(); n != 1 || err != nil {
		t.Fatalf("WAIT 1 = %v, %v", n, err)
	}
	w, _ := catalog.Keys("w")
	_, r := catalog.Keys("r")
	for deadline := time.Now().Add(10 * time.Second); rc.Exists(ctx, tok.Key(), w, r).Val() != 3; {
		if time.Now().After(deadline) {
			t.Fatal("the replica lacks the lock keys 10s after WAIT acknowledged them")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if _, held, err := invoices.Held(ctx, ro, 1); !held || err != nil {
		t.Errorf("Held on the replica = %v, %v, want true", held, err)
	}
	if s, err := catalog.Inspect(ctx, ro, "w"); !s.Writer || s.Readers != 0 || err != nil {
		t.Errorf("Inspect(w) on the replica = %+v, %v, want a writer", s, err)
	}
	if s, err := catalog.Inspect(ctx, ro, "r"); s.Writer || s.Readers != 1 || err != nil {
		t.Errorf("Inspect(r) on the replica = %+v, %v, want one reader", s, err)
	}
	if role := rc.Do(ctx, "ROLE").Val().([]any)[0]; role != "slave" {
		t.Errorf("ROLE = %v, want slave", role)
	}
}

// TestInspectMini runs Held and Inspect on miniredis, the embedded default.
func TestInspectMini(t *testing.T) {
	_, c := redistest.Mini(t)
	db := lock.NewDB(c)
	ctx := t.Context()
	for i := range 2 {
		if r, _ := catalog.TryRead(ctx, db, "m"); r == nil {
			t.Fatal("TryRead = nil")
		}
		if s, err := catalog.Inspect(ctx, db.ReadOnly(), "m"); s.Readers != i+1 || err != nil {
			t.Errorf("Inspect after %d reads = %+v, %v", i+1, s, err)
		}
	}
	tok, _ := invoices.TryLock(ctx, db, 3)
	if _, held, err := invoices.Held(ctx, db.ReadOnly(), 3); !held || err != nil || tok == nil {
		t.Errorf("Held(3) = %v, %v, want true", held, err)
	}
}
