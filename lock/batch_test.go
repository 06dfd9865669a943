package lock_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/wakuwaku-go/wakuwaku/internal/redistest"
	"github.com/wakuwaku-go/wakuwaku/lock"
)

func TestSlotOf(t *testing.T) {
	keys := []string{"", "a", "{user1000}.following", "foo{}{bar}", "foo{{bar}}zap", "{}", "}{", invoices.Key(42)}
	w, r := catalog.Keys("tokyo")
	keys = append(keys, w, r)
	for i := range 1000 {
		keys = append(keys, invoices.Key(uint64(i)), "k{"+strconv.Itoa(i)+"}x")
	}
	for _, k := range keys {
		if got, want := lock.SlotOf(k), redistest.Slot(k); got != want {
			t.Errorf("slotOf(%q) = %d, want %d", k, got, want)
		}
	}
}

// names returns n distinct invoice numbers starting at from.
func names(from, n int) []uint64 {
	s := make([]uint64, n)
	for i := range s {
		s[i] = uint64(from + i)
	}
	return s
}

// checkBatch takes 100 names through db, 10 of them held already by someone
// else, then extends and releases the tokens in batches, and checks each
// name's key through raw.
func checkBatch(t *testing.T, db lock.DB, raw redis.Cmdable) {
	t.Helper()
	ctx := t.Context()
	ns := names(1000, 100)
	held := map[int]*lock.Token{}
	for i := 0; i < len(ns); i += 10 {
		tok, err := invoices.TryLock(ctx, db, ns[i])
		if tok == nil || err != nil {
			t.Fatalf("TryLock(%d) = %v, %v", ns[i], tok, err)
		}
		held[i] = tok
	}
	toks, err := invoices.TryLockMany(ctx, db, ns)
	if err != nil || len(toks) != len(ns) {
		t.Fatalf("TryLockMany = %d tokens, %v, want %d", len(toks), err, len(ns))
	}
	for i, tok := range toks {
		if _, busy := held[i]; busy {
			if tok != nil {
				t.Errorf("TryLockMany: name %d held by another = a token, want nil", ns[i])
			}
			continue
		}
		if tok == nil {
			t.Errorf("TryLockMany: free name %d = nil, want a token", ns[i])
			continue
		}
		if tok.Key() != invoices.Key(ns[i]) {
			t.Errorf("token %d key = %q, want %q", i, tok.Key(), invoices.Key(ns[i]))
		}
		if v := raw.Get(ctx, tok.Key()).Val(); len(v) != 16 {
			t.Errorf("GET %s = %d bytes, want 16", tok.Key(), len(v))
		}
		if d := raw.PTTL(ctx, tok.Key()).Val(); d <= 29*time.Second || d > 30*time.Second {
			t.Errorf("PTTL %s = %v, want about 30s", tok.Key(), d)
		}
		if d := time.Until(tok.Deadline()); d <= 29*time.Second || d > 30*time.Second {
			t.Errorf("token %d Deadline in %v, want about 30s", i, d)
		}
	}
	// Shorten a lease by hand, so that ExtendMany's work shows.
	raw.PExpire(ctx, toks[1].Key(), time.Second)
	ok, err := lock.ExtendMany(ctx, toks)
	if err != nil || len(ok) != len(toks) {
		t.Fatalf("ExtendMany = %d results, %v", len(ok), err)
	}
	for i := range toks {
		if ok[i] != (toks[i] != nil) {
			t.Errorf("ExtendMany[%d] = %v, want %v", i, ok[i], toks[i] != nil)
		}
	}
	if d := raw.PTTL(ctx, toks[1].Key()).Val(); d <= 29*time.Second {
		t.Errorf("PTTL after ExtendMany = %v, want about 30s", d)
	}
	// Another holder overtook name 2.
	raw.Set(ctx, toks[2].Key(), "someone-else....", time.Minute)
	ok, err = lock.ReleaseMany(ctx, toks)
	if err != nil {
		t.Fatalf("ReleaseMany: %v", err)
	}
	for i := range toks {
		if want := toks[i] != nil && i != 2; ok[i] != want {
			t.Errorf("ReleaseMany[%d] = %v, want %v", i, ok[i], want)
		}
		if toks[i] != nil && i != 2 && raw.Exists(ctx, toks[i].Key()).Val() != 0 {
			t.Errorf("key %s still exists after ReleaseMany", toks[i].Key())
		}
	}
	if v := raw.Get(ctx, toks[2].Key()).Val(); v != "someone-else...." {
		t.Errorf("the other holder's key = %q after ReleaseMany, want it untouched", v)
	}
	raw.Del(ctx, toks[2].Key())
	if !toks[5].Deadline().IsZero() {
		t.Errorf("Deadline after ReleaseMany = %v, want zero", toks[5].Deadline())
	}
	// The held tokens go in one batch too: ReleaseMany works on any tokens.
	var others []*lock.Token
	for _, tok := range held {
		others = append(others, tok)
	}
	if ok, err := lock.ReleaseMany(ctx, others); err != nil || len(ok) != 10 || !ok[0] || !ok[9] {
		t.Errorf("ReleaseMany(the other holder's tokens) = %v, %v", ok, err)
	}
}

func TestManyOnRedis(t *testing.T) {
	srv := redistest.Start(t)
	raw := srv.Client(t)
	c, cnt := countedClient(t, srv)
	db := lock.NewDB(c)
	ctx := t.Context()
	// Warm up the connection and the scripts.
	warm, _ := invoices.TryLockMany(ctx, db, []uint64{1})
	lock.ExtendMany(ctx, warm)
	lock.ReleaseMany(ctx, warm)

	checkBatch(t, db, raw)

	ns := names(5000, 100)
	var toks []*lock.Token
	if n := cnt.sent(func() { toks, _ = invoices.TryLockMany(ctx, db, ns) }); n != 1 {
		t.Errorf("TryLockMany of %d names sent %d commands, want 1", len(ns), n)
	}
	if n := cnt.sent(func() { lock.ExtendMany(ctx, toks) }); n != 1 {
		t.Errorf("ExtendMany sent %d commands, want 1", n)
	}
	if n := cnt.sent(func() { lock.ReleaseMany(ctx, toks) }); n != 1 {
		t.Errorf("ReleaseMany sent %d commands, want 1", n)
	}

	t.Run("duplicate names", func(t *testing.T) {
		toks, err := invoices.TryLockMany(ctx, db, []uint64{7, 7})
		if err != nil || toks[0] == nil || toks[1] != nil {
			t.Errorf("TryLockMany(7, 7) = %v, %v, want a token, then nil", toks, err)
		}
		lock.ReleaseMany(ctx, toks)
	})
	t.Run("empty", func(t *testing.T) {
		var toks []*lock.Token
		var err error
		if n := cnt.sent(func() { toks, err = invoices.TryLockMany(ctx, db, nil) }); n != 0 || toks != nil || err != nil {
			t.Errorf("TryLockMany(nil) = %v, %v, sent %d, want nothing", toks, err, n)
		}
		if n := cnt.sent(func() { lock.ReleaseMany(ctx, []*lock.Token{nil}) }); n != 0 {
			t.Errorf("ReleaseMany(nil token) sent %d, want 0", n)
		}
	})
	t.Run("script cache lost", func(t *testing.T) {
		raw.ScriptFlush(ctx)
		toks, err := invoices.TryLockMany(ctx, db, names(9000, 3))
		if err != nil || toks[2] == nil {
			t.Fatalf("TryLockMany after SCRIPT FLUSH = %v, %v", toks, err)
		}
		raw.ScriptFlush(ctx)
		if ok, err := lock.ReleaseMany(ctx, toks); err != nil || !ok[2] {
			t.Errorf("ReleaseMany after SCRIPT FLUSH = %v, %v", ok, err)
		}
	})
	t.Run("not permitted", func(t *testing.T) {
		if _, err := invoices.TryLockMany(ctx, lock.NewDB(refusing{t}).Only(), ns); !errors.Is(err, lock.ErrNotPermitted) {
			t.Errorf("error = %v, want ErrNotPermitted", err)
		}
	})
	t.Run("observed", func(t *testing.T) {
		rec := &recorder{}
		odb := lock.NewDB(c, lock.WithObserver(rec.observe))
		toks, _ := invoices.TryLockMany(ctx, odb, []uint64{11, 11, 12})
		lock.ReleaseMany(ctx, toks)
		var got []string
		for _, e := range rec.take() {
			got = append(got, e.Op+":"+e.Result)
		}
		want := "[lock:acquired lock:busy lock:acquired release:released release:released]"
		if s := "[" + join(got) + "]"; s != want {
			t.Errorf("events = %s, want %s", s, want)
		}
	})
}

func join(s []string) string {
	out := ""
	for i, x := range s {
		if i > 0 {
			out += " "
		}
		out += x
	}
	return out
}

// nodeCounter counts, per node of a cluster client, the round trips its
// connections make: single commands and pipelines.
type nodeCounter struct {
	mu    sync.Mutex
	trips map[string]int
	cmds  int
}

func (n *nodeCounter) hook(addr string) redis.Hook { return nodeHook{n, addr} }

func (n *nodeCounter) take() (trips map[string]int, cmds int) {
	n.mu.Lock()
	defer n.mu.Unlock()
	trips, cmds = n.trips, n.cmds
	n.trips, n.cmds = map[string]int{}, 0
	return trips, cmds
}

type nodeHook struct {
	n    *nodeCounter
	addr string
}

func (h nodeHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h nodeHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.n.mu.Lock()
		h.n.trips[h.addr]++
		h.n.cmds++
		h.n.mu.Unlock()
		return next(ctx, cmd)
	}
}
func (h nodeHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.n.mu.Lock()
		h.n.trips[h.addr]++
		h.n.cmds += len(cmds)
		h.n.mu.Unlock()
		return next(ctx, cmds)
	}
}

func TestManyOnCluster(t *testing.T) {
	cl := redistest.StartCluster(t, 3)
	raw := cl.Client(t)
	nc := &nodeCounter{trips: map[string]int{}}
	opts := cl.Options()
	opts.ContextTimeoutEnabled = true
	cc := redis.NewClusterClient(opts)
	t.Cleanup(func() { cc.Close() })
	cc.OnNewNode(func(node *redis.Client) { node.AddHook(nc.hook(node.Options().Addr)) })
	db := lock.NewDB(cc)
	ctx := t.Context()
	// Warm up: the slot map, a connection to each node, the scripts' caches.
	warm, _ := invoices.TryLockMany(ctx, db, names(100000, 100))
	lock.ExtendMany(ctx, warm)
	lock.ReleaseMany(ctx, warm)

	t.Run("semantics", func(t *testing.T) { checkBatch(t, db, raw) })

	ns := names(2000, 100)
	slots := map[int]bool{}
	for _, n := range ns {
		slots[redistest.Slot(invoices.Key(n))] = true
	}
	nc.take()
	toks, err := invoices.TryLockMany(ctx, db, ns)
	if err != nil {
		t.Fatalf("TryLockMany: %v", err)
	}
	trips, cmds := nc.take()
	for addr, n := range trips {
		if n != 1 {
			t.Errorf("TryLockMany made %d round trips to %s, want 1", n, addr)
		}
	}
	if len(trips) != 3 || cmds != len(slots) {
		t.Errorf("TryLockMany reached %d nodes with %d script calls, want 3 nodes, %d calls (one per slot)", len(trips), cmds, len(slots))
	}
	for i, tok := range toks {
		if tok == nil {
			t.Fatalf("TryLockMany on free names: token %d = nil", i)
		}
	}
	if ok, err := lock.ReleaseMany(ctx, toks); err != nil || !ok[99] {
		t.Fatalf("ReleaseMany = %v, %v", ok, err)
	}
	if trips, _ := nc.take(); len(trips) != 3 || trips[cl.Addrs()[0]] != 1 {
		t.Errorf("ReleaseMany round trips per node = %v, want 1 to each of 3", trips)
	}

	t.Run("script cache lost", func(t *testing.T) {
		raw.ForEachShard(ctx, func(ctx context.Context, c *redis.Client) error { return c.ScriptFlush(ctx).Err() })
		toks, err := invoices.TryLockMany(ctx, db, names(3000, 50))
		if err != nil || toks[49] == nil {
			t.Fatalf("TryLockMany after SCRIPT FLUSH = %v", err)
		}
		lock.ReleaseMany(ctx, toks)
	})
	t.Run("wrapped client falls back to a call per slot", func(t *testing.T) {
		h := &hookClient{next: cc}
		wdb := lock.NewDB(h)
		checkBatch(t, wdb, raw)
	})
	t.Run("slot moved", func(t *testing.T) {
		// db's client still maps the slot to its old owner: that node
		// answers MOVED and the call goes again through the cluster client.
		ns := names(6000, 20)
		slot := redistest.Slot(invoices.Key(ns[0]))
		cl.MigrateSlot(t, slot, (cl.SlotOwner(t, slot)+1)%3)
		toks, err := invoices.TryLockMany(ctx, db, ns)
		if err != nil {
			t.Fatalf("TryLockMany after a migration: %v", err)
		}
		for i, tok := range toks {
			if tok == nil {
				t.Fatalf("TryLockMany after a migration: token %d = nil", i)
			}
		}
		if v := raw.Get(ctx, toks[0].Key()).Val(); len(v) != 16 {
			t.Errorf("GET of the moved slot's key = %d bytes, want 16", len(v))
		}
		if ok, err := lock.ReleaseMany(ctx, toks); err != nil || !ok[0] {
			t.Errorf("ReleaseMany = %v, %v", ok, err)
		}
	})
	t.Run("a node down", func(t *testing.T) {
		// Names on every node, then one node paused: the names of the others
		// are taken and returned with the error.
		short, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		defer cancel()
		cl.Nodes()[2].Pause(t)
		toks, err := invoices.TryLockMany(short, db, names(4000, 60))
		cl.Nodes()[2].Resume(t)
		if err == nil {
			t.Fatal("TryLockMany with a node paused: no error")
		}
		got := 0
		for i, tok := range toks {
			if tok != nil {
				got++
				if owner := cl.SlotOwner(t, redistest.Slot(invoices.Key(uint64(4000+i)))); owner == 2 {
					t.Errorf("a token for name %d, whose node was paused", 4000+i)
				}
			}
		}
		if got == 0 || got == 60 {
			t.Errorf("TryLockMany with one node of three paused took %d of 60 names, want some", got)
		}
		t.Logf("one node paused: %d of 60 taken; error: %v", got, err)
		lock.ReleaseMany(ctx, toks)
	})
}

// TestManyMini runs the batch scripts on miniredis, which takes the path for
// servers older than Redis 7.
func TestManyMini(t *testing.T) {
	_, c := redistest.Mini(t)
	db := lock.NewDB(c)
	ctx := t.Context()
	first, _ := invoices.TryLock(ctx, db, 2)
	toks, err := invoices.TryLockMany(ctx, db, []uint64{1, 2, 3})
	if err != nil || toks[0] == nil || toks[1] != nil || toks[2] == nil || first == nil {
		t.Fatalf("TryLockMany = %v, %v, want tokens for 1 and 3", toks, err)
	}
	if ok, err := lock.ExtendMany(ctx, toks); err != nil || !ok[0] || ok[1] || !ok[2] {
		t.Errorf("ExtendMany = %v, %v", ok, err)
	}
	if ok, err := lock.ReleaseMany(ctx, append(toks, first)); err != nil || !ok[0] || ok[1] || !ok[2] || !ok[3] {
		t.Errorf("ReleaseMany = %v, %v", ok, err)
	}
}

// tagged is a client whose type can be compared but whose values can't: it
// holds a slice in an interface field. Comparing two of them panics.
type tagged struct {
	lock.Client
	tags any
}

// TestManyClientNotComparable checks that tokens of a client whose values
// can't be compared are released and extended, each apart, without a panic.
func TestManyClientNotComparable(t *testing.T) {
	srv := redistest.Start(t)
	db := lock.NewDB(tagged{Client: srv.Client(t), tags: []string{"a"}})
	ctx := t.Context()
	toks, err := invoices.TryLockMany(ctx, db, []uint64{1, 2})
	if err != nil || toks[0] == nil || toks[1] == nil {
		t.Fatalf("TryLockMany(1, 2) = %v, %v; want two tokens", toks, err)
	}
	if held, err := lock.ExtendMany(ctx, toks); err != nil || !held[0] || !held[1] {
		t.Errorf("ExtendMany = %v, %v; want both held", held, err)
	}
	if held, err := lock.ReleaseMany(ctx, toks); err != nil || !held[0] || !held[1] {
		t.Errorf("ReleaseMany = %v, %v; want both released", held, err)
	}
}
