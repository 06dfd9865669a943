package lock_test

import (
	"errors"
	"testing"
	"time"

	"github.com/wakuwaku-go/wakuwaku/internal/redistest"
	"github.com/wakuwaku-go/wakuwaku/lock"
)

func TestWithReplicas(t *testing.T) {
	master := redistest.Start(t, "--repl-diskless-sync-delay", "0")
	replica := redistest.Start(t, "--replicaof", "127.0.0.1", master.Addr()[len("127.0.0.1:"):])
	raw := master.Client(t)
	ctx := t.Context()
	if n, err := raw.Wait(ctx, 1, 10*time.Second).Result(); n != 1 || err != nil {
		t.Fatalf("the replica did not connect: WAIT = %v, %v", n, err)
	}
	c, cnt := countedClient(t, master)
	db := lock.NewDB(c, lock.WithReplicas(1, time.Second))
	invoices.TryLock(ctx, db, 0) // the handshake and the scripts

	tok, err := invoices.TryLock(ctx, db, 1)
	if tok == nil || err != nil {
		t.Fatalf("TryLock with a live replica = %v, %v, want a token", tok, err)
	}
	if v := replica.Client(t).Get(ctx, tok.Key()).Val(); len(v) != 16 {
		t.Errorf("GET on the replica right after TryLock = %d bytes, want 16: WAIT returned before the replica had it", len(v))
	}
	if ok, err := tok.Extend(ctx); !ok || err != nil {
		t.Errorf("Extend with a live replica = %v, %v", ok, err)
	}
	if busy, err := invoices.TryLock(ctx, db, 1); busy != nil || err != nil {
		t.Errorf("TryLock of a held name = %v, %v, want nil, nil", busy, err)
	}
	many, err := invoices.TryLockMany(ctx, db, []uint64{1, 5, 6})
	if err != nil || many[0] != nil || many[1] == nil || many[2] == nil {
		t.Errorf("TryLockMany with a live replica = %v, %v, want tokens for 5 and 6", many, err)
	}
	if v := replica.Client(t).Get(ctx, invoices.Key(6)).Val(); len(v) != 16 {
		t.Errorf("GET on the replica right after TryLockMany = %d bytes, want 16", len(v))
	}
	if ok, err := lock.ExtendMany(ctx, many); err != nil || !ok[1] || !ok[2] {
		t.Errorf("ExtendMany with a live replica = %v, %v", ok, err)
	}
	lock.ReleaseMany(ctx, many)

	// The replica stops answering: acquires fail and leave nothing behind.
	replica.Pause(t)
	short := lock.NewDB(c, lock.WithReplicas(1, 50*time.Millisecond))
	lost, err := invoices.TryLock(ctx, short, 2)
	if lost != nil || !errors.Is(err, lock.ErrNotReplicated) {
		t.Errorf("TryLock with the replica paused = %v, %v, want nil, ErrNotReplicated", lost, err)
	}
	if n := raw.Exists(ctx, invoices.Key(2)).Val(); n != 0 {
		t.Errorf("the unreplicated lock is still on the master (EXISTS = %d), want it released", n)
	}
	if busy, err := invoices.TryLock(ctx, short, 1); busy != nil || err != nil {
		t.Errorf("TryLock of a held name with the replica paused = %v, %v, want nil, nil", busy, err)
	}
	many, err = invoices.TryLockMany(ctx, short, []uint64{1, 7, 8})
	if !errors.Is(err, lock.ErrNotReplicated) || many[0] != nil || many[1] != nil || many[2] != nil {
		t.Errorf("TryLockMany with the replica paused = %v, %v, want no tokens, ErrNotReplicated", many, err)
	}
	if n := raw.Exists(ctx, invoices.Key(7), invoices.Key(8)).Val(); n != 0 {
		t.Errorf("%d unreplicated batch locks still on the master, want them released", n)
	}
	if ok, err := lock.ExtendMany(ctx, []*lock.Token{tok}); !errors.Is(err, lock.ErrNotReplicated) || ok[0] {
		t.Errorf("ExtendMany with the replica paused = %v, %v, want false, ErrNotReplicated", ok, err)
	}
	replica.Resume(t)

	t.Run("extend not replicated", func(t *testing.T) {
		tok, err := invoices.TryLock(ctx, short, 6)
		if tok == nil || err != nil {
			t.Fatalf("TryLock = %v, %v", tok, err)
		}
		d := tok.Deadline()
		replica.Pause(t)
		defer replica.Resume(t)
		if ok, err := tok.Extend(ctx); ok || !errors.Is(err, lock.ErrNotReplicated) {
			t.Errorf("Extend with the replica paused = %v, %v, want false, ErrNotReplicated", ok, err)
		}
		if !tok.Deadline().Equal(d) {
			t.Errorf("Deadline after an unreplicated Extend = %v, want it unchanged at %v", tok.Deadline(), d)
		}
	})
	t.Run("no replica", func(t *testing.T) {
		alone := redistest.Start(t)
		db := lock.NewDB(alone.Client(t), lock.WithReplicas(1, 10*time.Millisecond))
		if tok, err := invoices.TryLock(ctx, db, 1); tok != nil || !errors.Is(err, lock.ErrNotReplicated) {
			t.Errorf("TryLock with no replica = %v, %v, want ErrNotReplicated", tok, err)
		}
	})
	t.Run("unsupported client", func(t *testing.T) {
		db := lock.NewDB(&hookClient{next: c}, lock.WithReplicas(1, time.Second))
		if tok, err := invoices.TryLock(ctx, db, 7); tok != nil || err == nil {
			t.Errorf("TryLock through a wrapper with replicas = %v, %v, want an error", tok, err)
		}
	})
	t.Run("one round trip", func(t *testing.T) {
		// The WAIT goes in the acquire's pipeline: the counter's process hook
		// sees no extra command.
		if n := cnt.sent(func() { tok, _ := invoices.TryLock(ctx, db, 8); tok.Release(ctx) }); n != 1 {
			t.Errorf("TryLock and Release sent %d single commands, want 1 (the release; the acquire is a pipeline)", n)
		}
	})
}

// TestWithReplicasOnCluster checks that the WAIT goes to the master of the
// lock's slot: the rig's masters have no replica, so every acquire fails and
// is released there.
func TestWithReplicasOnCluster(t *testing.T) {
	cl := redistest.StartCluster(t, 3)
	raw := cl.Client(t)
	ctx := t.Context()
	db := lock.NewDB(cl.Client(t), lock.WithReplicas(1, 10*time.Millisecond))
	for i := range uint64(5) {
		tok, err := invoices.TryLock(ctx, db, i)
		if tok != nil || !errors.Is(err, lock.ErrNotReplicated) {
			t.Errorf("TryLock(%d) on a cluster without replicas = %v, %v, want ErrNotReplicated", i, tok, err)
		}
		if n := raw.Exists(ctx, invoices.Key(i)).Val(); n != 0 {
			t.Errorf("key of %d left on its master after ErrNotReplicated", i)
		}
	}
	toks, err := invoices.TryLockMany(ctx, db, names(10, 30))
	if !errors.Is(err, lock.ErrNotReplicated) {
		t.Errorf("TryLockMany on a cluster without replicas: error = %v, want ErrNotReplicated", err)
	}
	for i, tok := range toks {
		if tok != nil {
			t.Errorf("TryLockMany on a cluster without replicas: token %d = %v, want nil", i, tok)
		}
		if n := raw.Exists(ctx, invoices.Key(uint64(10+i))).Val(); n != 0 {
			t.Errorf("key of %d left on its master after ErrNotReplicated", 10+i)
		}
	}
	if tok, err := invoices.TryLock(ctx, lock.NewDB(cl.Client(t), lock.WithReplicas(0, time.Second)), 1); tok == nil || err != nil {
		t.Errorf("TryLock with WithReplicas(0) = %v, %v, want a token: 0 replicas means no waiting", tok, err)
	}
}
