package redistest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func TestSlot(t *testing.T) {
	// Want values are what redis-server 7.0's CLUSTER KEYSLOT answers.
	tests := []struct {
		key  string
		want int
	}{
		{"123456789", 12739},
		{"foo", 12182},
		{"bar", 5061},
		{"", 0},
		{"{user1000}.following", 3443},
		{"{user1000}.followers", 3443},
		{"foo{}{bar}", 8363},    // the first tag is empty: the whole key is hashed
		{"foo{{bar}}zap", 4015}, // the tag is "{bar"
		{"{bar", 4015},          // no closing brace: the whole key
		{"foo{bar}{zap}", 5061}, // only the first tag counts
		{"{}", 15257},
		{"a{b", 13340},
	}
	for _, tt := range tests {
		t.Run(strconv.Quote(tt.key), func(t *testing.T) {
			if got := Slot(tt.key); got != tt.want {
				t.Errorf("Slot(%q) = %d, want %d", tt.key, got, tt.want)
			}
		})
	}
}

func TestServer(t *testing.T) {
	ctx := t.Context()
	s := Start(t)

	t.Run("round trip", func(t *testing.T) {
		c := s.Client(t)
		if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
			t.Fatalf("SET k = %v", err)
		}
		if got, err := c.Get(ctx, "k").Result(); err != nil || got != "v" {
			t.Fatalf("GET k = %q, %v; want %q, nil", got, err, "v")
		}
		if !strings.HasPrefix(s.Addr(), "127.0.0.1:") {
			t.Errorf("Addr() = %q, want a 127.0.0.1 address", s.Addr())
		}
	})

	t.Run("pause and resume", func(t *testing.T) {
		opts := s.Options()
		opts.ReadTimeout = 200 * time.Millisecond
		opts.MaxRetries = -1
		c := redis.NewClient(opts)
		t.Cleanup(func() { _ = c.Close() })
		if err := c.Ping(ctx).Err(); err != nil {
			t.Fatalf("PING before Pause = %v", err)
		}
		s.Pause(t)
		err := c.Ping(ctx).Err()
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("PING while paused = %v, want a timeout", err)
		}
		s.Resume(t)
		if err := c.Ping(ctx).Err(); err != nil {
			t.Errorf("PING after Resume = %v, want nil", err)
		}
	})

	t.Run("kill and restart", func(t *testing.T) {
		c := s.Client(t)
		if err := c.Set(ctx, "before-kill", "1", 0).Err(); err != nil {
			t.Fatalf("SET = %v", err)
		}
		addr, pid := s.Addr(), s.Pid()
		s.Kill(t)
		if conn, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			conn.Close()
			t.Errorf("Dial(%q) after Kill = nil, want connection refused", addr)
		}
		s.Restart(t)
		if s.Addr() != addr {
			t.Errorf("Addr() after Restart = %q, want %q", s.Addr(), addr)
		}
		if s.Pid() == pid {
			t.Errorf("Pid() after Restart = %d, the killed process's", pid)
		}
		if err := c.Get(ctx, "before-kill").Err(); !errors.Is(err, redis.Nil) {
			t.Errorf("GET before-kill after Restart = %v, want redis.Nil", err)
		}
	})

	t.Run("restart while paused", func(t *testing.T) {
		s.Pause(t)
		s.Restart(t)
		if err := s.Client(t).Ping(ctx).Err(); err != nil {
			t.Errorf("PING after Restart = %v", err)
		}
	})
}

func TestStartArgs(t *testing.T) {
	s := Start(t, "--maxmemory", "1mb")
	got, err := s.Client(t).ConfigGet(t.Context(), "maxmemory").Result()
	if err != nil || got["maxmemory"] != "1048576" {
		t.Errorf("CONFIG GET maxmemory = %v, %v; want 1048576", got, err)
	}
}

// fatalRecorder stands in for a test whose failure we want to inspect rather than suffer.
type fatalRecorder struct {
	testing.TB
	msg string
}

func (r *fatalRecorder) Fatalf(format string, args ...any) {
	r.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// fatalOf runs f with a recorder and returns the message f failed with, if any.
func fatalOf(t *testing.T, f func(tb testing.TB)) string {
	r := &fatalRecorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(r)
	}()
	<-done
	return r.msg
}

func TestStartFailures(t *testing.T) {
	t.Run("bad argument", func(t *testing.T) {
		msg := fatalOf(t, func(tb testing.TB) { Start(tb, "--no-such-directive", "x") })
		if !strings.Contains(msg, "no-such-directive") {
			t.Errorf("Start with a bad argument failed with %q, want the server's log", msg)
		}
	})
	t.Run("no redis-server", func(t *testing.T) {
		t.Setenv("PATH", t.TempDir())
		for name, start := range map[string]func(testing.TB){
			"Start":        func(tb testing.TB) { Start(tb) },
			"StartCluster": func(tb testing.TB) { StartCluster(tb, 3) },
		} {
			msg := fatalOf(t, start)
			if !strings.Contains(msg, "apt-get update && apt-get install -y redis-server") {
				t.Errorf("%s without redis-server failed with %q, want how to install it", name, msg)
			}
		}
	})
}

func TestCluster(t *testing.T) {
	ctx := t.Context()
	began := time.Now()
	c := StartCluster(t, 3)
	t.Logf("StartCluster(3) took %v", time.Since(began))
	cc := c.Client(t)

	t.Run("slot agrees with server", func(t *testing.T) {
		node := c.Nodes()[0].Client(t)
		rnd := rand.New(rand.NewPCG(1, 2))
		const alphabet = "ab{}x:é\x00"
		keys := make([]string, 500)
		for i := range keys {
			b := make([]byte, rnd.IntN(12))
			for j := range b {
				b[j] = alphabet[rnd.IntN(len(alphabet))]
			}
			keys[i] = string(b)
		}
		cmds, err := node.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, k := range keys {
				p.ClusterKeySlot(ctx, k)
			}
			return nil
		})
		if err != nil {
			t.Fatalf("CLUSTER KEYSLOT pipeline = %v", err)
		}
		for i, cmd := range cmds {
			if got, want := Slot(keys[i]), int(cmd.(*redis.IntCmd).Val()); got != want {
				t.Errorf("Slot(%q) = %d, want %d (CLUSTER KEYSLOT)", keys[i], got, want)
			}
		}
	})

	t.Run("every master serves", func(t *testing.T) {
		for i, node := range c.Nodes() {
			key := keyOwnedBy(t, c, i)
			if err := cc.Set(ctx, key, i, 0).Err(); err != nil {
				t.Fatalf("SET %q = %v", key, err)
			}
			if got, err := cc.Get(ctx, key).Int(); err != nil || got != i {
				t.Errorf("GET %q = %d, %v; want %d", key, got, err, i)
			}
			// The key lives on node i itself, which answers without redirecting.
			if got, err := node.Client(t).Get(ctx, key).Int(); err != nil || got != i {
				t.Errorf("GET %q on node %d = %d, %v; want %d", key, i, got, err, i)
			}
		}
	})

	t.Run("migrate slot", func(t *testing.T) {
		const n = 250 // more than one MIGRATE batch
		slot := Slot("{migrate}")
		from := c.SlotOwner(t, slot)
		to := (from + 1) % 3
		for i := range n {
			if err := cc.Set(ctx, fmt.Sprintf("{migrate}:%d", i), i, 0).Err(); err != nil {
				t.Fatalf("SET = %v", err)
			}
		}
		c.MigrateSlot(t, slot, to)
		if got := c.SlotOwner(t, slot); got != to {
			t.Fatalf("SlotOwner(%d) after MigrateSlot = %d, want %d", slot, got, to)
		}
		for i := range n {
			key := fmt.Sprintf("{migrate}:%d", i)
			if got, err := cc.Get(ctx, key).Int(); err != nil || got != i {
				t.Fatalf("GET %q after MigrateSlot = %d, %v; want %d", key, got, err, i)
			}
		}
		nodes := c.Nodes()
		if got, err := nodes[to].Client(t).ClusterCountKeysInSlot(ctx, slot).Result(); err != nil || got != n {
			t.Errorf("COUNTKEYSINSLOT on the target = %d, %v; want %d", got, err, n)
		}
		if got, err := nodes[from].Client(t).ClusterCountKeysInSlot(ctx, slot).Result(); err != nil || got != 0 {
			t.Errorf("COUNTKEYSINSLOT on the source = %d, %v; want 0", got, err)
		}
		if c.LongestMigrate() <= 0 {
			t.Errorf("LongestMigrate() = %v after a migration, want the time its MIGRATE took", c.LongestMigrate())
		}
	})

	t.Run("migrate slot under load", func(t *testing.T) {
		slot := Slot("{busy}")
		var (
			wg    sync.WaitGroup
			mu    sync.Mutex
			incrs = map[string]int64{}
			errs  []error
		)
		// Filler keys make the move take several MIGRATE batches, a window the workers hit.
		for i := range 300 {
			if err := cc.Set(ctx, fmt.Sprintf("{busy}:filler:%d", i), i, 0).Err(); err != nil {
				t.Fatalf("SET = %v", err)
			}
		}
		stop := make(chan struct{})
		for w := range 4 {
			wg.Go(func() {
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					key := fmt.Sprintf("{busy}:%d:%d", w, i%20)
					err := cc.Incr(ctx, key).Err()
					mu.Lock()
					if err != nil {
						errs = append(errs, fmt.Errorf("INCR %q: %w", key, err))
					} else {
						incrs[key]++
					}
					mu.Unlock()
				}
			})
		}
		time.Sleep(50 * time.Millisecond) // let the workers create keys before the first move
		for range 2 {
			c.MigrateSlot(t, slot, (c.SlotOwner(t, slot)+1)%3)
		}
		close(stop)
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatalf("commands during MigrateSlot failed: %v", err)
		}
		if len(incrs) == 0 {
			t.Fatal("the workers ran no command")
		}
		for key, want := range incrs {
			if got, err := cc.Get(ctx, key).Int64(); err != nil || got != want {
				t.Errorf("GET %q = %d, %v; want %d", key, got, err, want)
			}
		}
	})

	// Moves in quick succession to different targets. Each target raises its config epoch,
	// and one that did not know its predecessor's new epoch yet used to take the same one;
	// and a slot moved again before every node had heard from its new owner could be lost
	// by its next owner to a stale claim. Either left the nodes disagreeing on the owner for
	// good; the rotation found both within seconds. It is probabilistic, not a proof.
	t.Run("back-to-back migrations", func(t *testing.T) {
		slots := []int{Slot("{a}"), Slot("{b}"), Slot("{c}")}
		moves := 0
		for end := time.Now().Add(3 * time.Second); time.Now().Before(end); {
			for _, slot := range slots {
				to := (c.SlotOwner(t, slot) + 1) % 3
				c.MigrateSlot(t, slot, to)
				if got := c.SlotOwner(t, slot); got != to {
					t.Fatalf("SlotOwner(%d) after move %d = %d, want %d", slot, moves, got, to)
				}
				moves++
			}
		}
		t.Logf("%d moves", moves)
	})

	t.Run("node restart", func(t *testing.T) {
		node := c.Nodes()[2]
		key := keyOwnedBy(t, c, 2)
		if err := cc.Set(ctx, key, "v", 0).Err(); err != nil {
			t.Fatalf("SET %q = %v", key, err)
		}
		began := time.Now()
		node.Restart(t)
		c.WaitHealthy(t)
		t.Logf("Restart and WaitHealthy took %v", time.Since(began))
		if err := cc.Get(ctx, key).Err(); !errors.Is(err, redis.Nil) {
			t.Errorf("GET %q after its node restarted = %v, want redis.Nil", key, err)
		}
		if err := cc.Set(ctx, key, "w", 0).Err(); err != nil {
			t.Errorf("SET %q after its node restarted = %v", key, err)
		}
	})
}

// keyOwnedBy finds a key whose slot node i owns.
func keyOwnedBy(t *testing.T, c *Cluster, i int) string {
	t.Helper()
	for n := 0; ; n++ {
		key := fmt.Sprintf("key-%d", n)
		if slot := Slot(key); slot*len(c.Nodes())/SlotCount == i && c.SlotOwner(t, slot) == i {
			return key
		}
	}
}

func TestMini(t *testing.T) {
	ctx := context.Background()
	m, c := Mini(t)
	if err := c.Set(ctx, "k", "v", time.Minute).Err(); err != nil {
		t.Fatalf("SET = %v", err)
	}
	m.FastForward(2 * time.Minute)
	if err := c.Get(ctx, "k").Err(); !errors.Is(err, redis.Nil) {
		t.Errorf("GET after FastForward = %v, want redis.Nil", err)
	}
}

// TestCommandStats checks the parsing of INFO commandstats against
// commands whose counts the test knows.
func TestCommandStats(t *testing.T) {
	srv := Start(t)
	c := srv.Client(t)
	ctx := t.Context()
	before, err := CommandStats(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		c.Set(ctx, "k", "v", 0)
	}
	c.Eval(ctx, "return redis.call('GET', KEYS[1])", []string{"k"})
	after, err := CommandStats(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if n := after["set"].Calls - before["set"].Calls; n != 3 {
		t.Errorf("set calls went up by %d; want 3", n)
	}
	if n := after["get"].Calls - before["get"].Calls; n != 1 {
		t.Errorf("get calls (from the script) went up by %d; want 1", n)
	}
	if n := after["eval"].Calls - before["eval"].Calls; n != 1 {
		t.Errorf("eval calls went up by %d; want 1", n)
	}
	if after["set"].Usec < before["set"].Usec {
		t.Errorf("set usec went down: %d → %d", before["set"].Usec, after["set"].Usec)
	}
}

// TestMigrateStretchesTTL shows what Cluster.LongestMigrate is for, on two
// real redis-servers: a MIGRATE sends the milliseconds its key has left, and
// the target sets them from its own clock when it runs the RESTORE, so a
// target that runs it late (stopped here for 100 ms, as a busy machine's
// scheduler may) keeps the key that much longer than its TTL.
func TestMigrateStretchesTTL(t *testing.T) {
	ctx := context.Background()
	src, dst := Start(t), Start(t)
	a, b := src.Client(t), dst.Client(t)
	host, port, _ := strings.Cut(dst.Addr(), ":")
	const ttl, stall = 2 * time.Second, 100 * time.Millisecond
	if err := a.Set(ctx, "k", "v", ttl).Err(); err != nil {
		t.Fatal(err)
	}
	set := time.Now()
	dst.Pause(t)
	time.AfterFunc(stall, func() { dst.Resume(t) })
	if err := a.Migrate(ctx, host, port, "k", 0, 5*time.Second).Err(); err != nil {
		t.Fatal(err)
	}
	pttl, err := b.PTTL(ctx, "k").Result()
	if err != nil {
		t.Fatal(err)
	}
	left := ttl - time.Since(set)
	if stretch := pttl - left; stretch < stall/2 {
		t.Errorf("after a MIGRATE to a target stopped for %v, the key has %v left where its TTL leaves %v: stretched by %v, want about %v", stall, pttl, left, stretch, stall)
	} else {
		t.Logf("the key outlives its TTL by %v", stretch)
	}
}
