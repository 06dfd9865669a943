package lock_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/wakuwaku-go/wakuwaku/internal/redistest"
	"github.com/wakuwaku-go/wakuwaku/lock"
)

// memLocks is an in-process stand-in for Redis that answers the acquire's
// SET … NX GET PX and the release script of a Lock on the clock of the
// goroutine that calls it, so that waiting runs on synctest's fake time. It
// counts the attempts.
type memLocks struct {
	mu       sync.Mutex
	held     map[string]memHold
	attempts int
}

type memHold struct {
	value string
	until time.Time
}

func (m *memLocks) Process(_ context.Context, cmd redis.Cmder) error {
	args := cmd.Args()
	acquire := cmd.Name() == "set"
	var key, value string
	if acquire { // set key value nx get px ms
		key, value = *args[1].(*string), *args[2].(*string)
	} else { // evalsha sha 1 key value
		key, value = *args[3].(*string), *args[4].(*string)
	}
	time.Sleep(rtt) // on fake time: the round trip
	m.mu.Lock()
	defer m.mu.Unlock()
	now := time.Now()
	h, ok := m.held[key]
	if ok && !now.Before(h.until) {
		delete(m.held, key)
		ok = false
	}
	if acquire {
		m.attempts++
		reply := "_\r\n"
		if ok {
			reply = fmt.Sprintf("$%d\r\n%s\r\n", len(h.value), h.value)
		} else {
			m.held[key] = memHold{value, now.Add(time.Duration(args[6].(int64)) * time.Millisecond)}
		}
		cmd.(*redis.RawCmd).SetVal([]byte(reply))
		return nil
	}
	var n int64
	if ok && h.value == value {
		delete(m.held, key)
		n = 1
	}
	cmd.(*redis.IntCmd).SetVal(n)
	return nil
}

// rtt is the round trip of memLocks, on fake time.
const rtt = 100 * time.Microsecond

func (m *memLocks) count() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.attempts
}

var jobs = lock.New[string]("job", time.Minute)

func TestLockWaits(t *testing.T) {
	lock.SetJitter(t, 1)
	synctest.Test(t, func(t *testing.T) {
		mem := &memLocks{held: map[string]memHold{}}
		db := lock.NewDB(mem)
		ctx := t.Context()
		holder, _ := jobs.TryLock(ctx, db, "x")
		start := time.Now()
		go func() {
			time.Sleep(10 * time.Second)
			holder.Release(ctx)
		}()
		tok, err := jobs.Lock(ctx, db, "x", lock.Backoff{Min: 10 * time.Millisecond, Max: time.Second})
		if tok == nil || err != nil {
			t.Fatalf("Lock = %v, %v, want a token", tok, err)
		}
		waited := time.Since(start)
		// The release came at 10 s; the waiter sleeps at most Max = 1 s.
		if waited < 10*time.Second || waited > 11*time.Second {
			t.Errorf("Lock returned after %v, want between 10 s and 11 s", waited)
		}
		// The sleeps' caps are 10, 20, …, 640 ms, then 1 s: 7 attempts in the
		// first 1.27 s of caps, then about one per 0.5 s on average.
		n := mem.count() - 1
		t.Logf("attempts while a holder kept the lock 10 s: %d", n)
		if n < 10 || n > 40 {
			t.Errorf("Lock made %d attempts in 10 s, want between 10 and 40", n)
		}
	})
}

func TestLockWaitEnds(t *testing.T) {
	lock.SetJitter(t, 2)
	synctest.Test(t, func(t *testing.T) {
		mem := &memLocks{held: map[string]memHold{}}
		db := lock.NewDB(mem)
		jobs.TryLock(t.Context(), db, "x")

		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		start := time.Now()
		tok, err := jobs.Lock(ctx, db, "x", lock.Backoff{})
		if tok != nil || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Lock on a lock held past ctx's deadline = %v, %v, want nil, DeadlineExceeded", tok, err)
		}
		if d := time.Since(start); d != 5*time.Second {
			t.Errorf("Lock returned after %v, want at ctx's deadline, 5 s", d)
		}
		if n := mem.count() - 1; n > 25 {
			t.Errorf("Lock made %d attempts in 5 s with the default back-off, want at most 25", n)
		}

		for _, b := range []lock.Backoff{{Min: -1}, {Min: time.Second, Max: time.Millisecond}} {
			before := mem.count()
			if _, err := jobs.Lock(t.Context(), db, "y", b); err == nil || mem.count() != before {
				t.Errorf("Lock with %+v = %v, sent %d, want an error and nothing sent", b, err, mem.count()-before)
			}
		}
		if tok, err := jobs.Lock(t.Context(), db, "free", lock.Backoff{Max: time.Millisecond}); tok == nil || err != nil {
			t.Errorf("Lock on a free lock with Backoff{Max: 1ms} = %v, %v", tok, err)
		}
	})
}

// contention is what N waiters looping on one lock did.
type contention struct {
	acquired []int           // per waiter
	attempts int             // acquires sent, all waiters
	waits    []time.Duration // from a Lock call to its token, every acquisition
}

func (c contention) String() string {
	total := 0
	for _, n := range c.acquired {
		total += n
	}
	s := slices.Clone(c.waits)
	slices.Sort(s)
	pct := func(p float64) time.Duration { return s[int(p*float64(len(s)-1))] }
	sum, sq := 0.0, 0.0
	for _, n := range c.acquired {
		sum += float64(n)
		sq += float64(n) * float64(n)
	}
	jain := sum * sum / (float64(len(c.acquired)) * sq)
	return fmt.Sprintf("%d acquisitions (per waiter min %d, max %d, Jain %.2f), %.1f attempts each; wait p50 %v, p90 %v, p99 %v, max %v",
		total, slices.Min(c.acquired), slices.Max(c.acquired), jain, float64(c.attempts)/float64(total),
		pct(0.5).Round(time.Millisecond), pct(0.9).Round(time.Millisecond), pct(0.99).Round(time.Millisecond), s[len(s)-1].Round(time.Millisecond))
}

// contendWait runs waiters goroutines that, for run, each take the lock with
// Lock and b, hold it for hold, release it and work as long again before
// they want it again, over db; count says how many acquires were sent so
// far. With more than two waiters the lock is wanted more than it can give.
func contendWait(t *testing.T, db lock.DB, count func() int, waiters int, run, hold time.Duration, b lock.Backoff) contention {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), run)
	defer cancel()
	before := count()
	res := contention{acquired: make([]int, waiters)}
	var mu sync.Mutex
	var inside atomic.Int32
	var wg sync.WaitGroup
	for w := range waiters {
		wg.Go(func() {
			for {
				start := time.Now()
				tok, err := jobs.Lock(ctx, db, "contended", b)
				if err != nil {
					return
				}
				if n := inside.Add(1); n != 1 {
					t.Errorf("%d holders at once", n)
				}
				mu.Lock()
				res.acquired[w]++
				res.waits = append(res.waits, time.Since(start))
				mu.Unlock()
				time.Sleep(hold)
				inside.Add(-1)
				tok.Release(context.WithoutCancel(ctx))
				time.Sleep(hold) // its own work before it wants the lock again
			}
		})
	}
	wg.Wait()
	res.attempts = count() - before
	return res
}

// TestLockContention runs 8 waiters on one lock for 10 minutes of fake time,
// each holding it 20 ms per acquisition and then working 20 ms without it,
// with round trips of 100 µs, and reports the attempts per
// acquisition and the fairness: how evenly the acquisitions spread and how
// long a waiter waited.
func TestLockContention(t *testing.T) {
	for _, tc := range []struct {
		name string
		b    lock.Backoff
	}{
		{"default 10ms-1s", lock.Backoff{}},
		{"5ms-100ms", lock.Backoff{Min: 5 * time.Millisecond, Max: 100 * time.Millisecond}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lock.SetJitter(t, 3)
			synctest.Test(t, func(t *testing.T) {
				mem := &memLocks{held: map[string]memHold{}}
				res := contendWait(t, lock.NewDB(mem), mem.count, 8, 10*time.Minute, 20*time.Millisecond, tc.b)
				t.Logf("8 waiters, hold 20 ms, work 20 ms, 10 min: %v", res)
				total := len(res.waits)
				// Busy all the time, the lock would give about 30000 acquisitions.
				if total < 1000 {
					t.Errorf("%d acquisitions in 10 min, want at least 1000", total)
				}
				if per := float64(res.attempts) / float64(total); per > 20 || math.IsNaN(per) {
					t.Errorf("%.1f attempts per acquisition, want at most 20", per)
				}
			})
		})
	}
}

// notifying is a client that closes a channel once it has sent a given
// number of commands.
type notifying struct {
	next lock.Client
	mu   sync.Mutex
	n    int
	at   int
	ch   chan struct{}
}

func (c *notifying) Process(ctx context.Context, cmd redis.Cmder) error {
	c.mu.Lock()
	c.n++
	if c.ch != nil && c.n == c.at {
		close(c.ch)
		c.ch = nil
	}
	c.mu.Unlock()
	return c.next.Process(ctx, cmd)
}

// after returns a channel closed once k more commands have been sent.
func (c *notifying) after(k int) <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan struct{})
	c.at, c.ch = c.n+k, ch
	return ch
}

// TestLockWaitOnRedis waits for a lock on a real server: the waiter gets it
// once the holder releases, and returns ctx's error when ctx ends first.
func TestLockWaitOnRedis(t *testing.T) {
	srv := redistest.Start(t)
	nc := &notifying{next: srv.Client(t)}
	db := lock.NewDB(nc)
	ctx := t.Context()
	holder, err := jobs.TryLock(ctx, db, "r")
	if holder == nil || err != nil {
		t.Fatalf("TryLock = %v, %v", holder, err)
	}
	busy := nc.after(3)
	got := make(chan *lock.Token)
	go func() {
		tok, err := jobs.Lock(ctx, db, "r", lock.Backoff{Min: time.Millisecond, Max: 20 * time.Millisecond})
		if err != nil {
			t.Errorf("Lock = %v", err)
		}
		got <- tok
	}()
	<-busy // the waiter has found the lock busy three times
	if ok, _ := holder.Release(ctx); !ok {
		t.Fatal("holder's Release = false")
	}
	tok := <-got
	if tok == nil {
		t.Fatal("Lock = nil after the holder released")
	}
	if v := srv.Client(t).Get(ctx, tok.Key()).Val(); len(v) != 16 {
		t.Errorf("GET %s = %d bytes, want 16", tok.Key(), len(v))
	}
	tok.Release(ctx)

	holder, _ = jobs.TryLock(ctx, db, "r")
	cctx, cancel := context.WithCancel(ctx)
	attempts := nc.after(5)
	go func() { <-attempts; cancel() }()
	if tok, err := jobs.Lock(cctx, db, "r", lock.Backoff{Min: time.Millisecond, Max: 5 * time.Millisecond}); tok != nil || !errors.Is(err, context.Canceled) {
		t.Errorf("Lock cancelled while held = %v, %v, want nil, Canceled", tok, err)
	}
	holder.Release(ctx)
}

// TestLockContentionOnRedis runs 4 waiters on one lock of a real server for
// 3 s, each holding it 2 ms per acquisition, and checks that they take turns
// without an attempt storm; it logs the figures.
func TestLockContentionOnRedis(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client(t)
	rec := &recorder{}
	db := lock.NewDB(c, lock.WithObserver(rec.observe))
	res := contendWait(t, db, func() int { rec.mu.Lock(); defer rec.mu.Unlock(); return len(rec.events) }, 4, 3*time.Second, 2*time.Millisecond,
		lock.Backoff{Min: time.Millisecond, Max: 50 * time.Millisecond})
	acquires := 0
	for _, e := range rec.take() {
		if e.Op == "lock" {
			acquires++
		}
	}
	res.attempts = acquires
	t.Logf("real redis-server, 4 waiters, hold 2 ms, work 2 ms, 3 s: %v", res)
	if len(res.waits) == 0 {
		t.Fatal("no acquisition in 3 s")
	}
	// A waiter retrying without sleeping would send hundreds of attempts
	// per acquisition here (a round trip is about 50 µs).
	if per := float64(res.attempts) / float64(len(res.waits)); per > 30 {
		t.Errorf("%.1f attempts per acquisition, want at most 30", per)
	}
}
