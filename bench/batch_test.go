package bench_test

import (
	"context"
	"errors"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wakuwaku-go/wakuwaku/bench"
	"github.com/wakuwaku-go/wakuwaku/lock"
)

// batchSize is how many names a batch case takes at once.
const batchSize = 100

// BenchmarkBatch compares taking and releasing batchSize free names with
// lock.Lock.TryLockMany and lock.ReleaseMany (one round trip each on one
// server) against the same names taken and released by batchSize sequential
// TryLock and Release calls, in the same run on the same server. One op is
// the whole batch: batchSize names taken, then released.
//
// It runs twice: over loopback, where a round trip costs less than the
// server's work for a few names, and over a client whose every write sleeps
// netDelay first, as a request waits on a network between hosts (a sleep
// lasts longer than asked on a loaded machine: rt/op and ns/op of the
// sequential case give the round trip it came to).
func BenchmarkBatch(b *testing.B) {
	e := getEnv(b)
	slow := redis.NewClient(&redis.Options{Addr: e.srv.Addr(), Dialer: delayDial(netDelay, e.counter), PoolSize: 4})
	defer slow.Close()
	for _, net := range []struct {
		name string
		c    *redis.Client
	}{{"loopback", e.client}, {"delayed", slow}} {
		b.Run(net.name, func(b *testing.B) { benchBatch(b, e, net.c) })
	}
}

// netDelay is what BenchmarkBatch's slow client waits before each write.
const netDelay = 200 * time.Microsecond

func benchBatch(b *testing.B, e *env, c *redis.Client) {
	l := lock.New[int]("batch", ttl)
	db := lock.NewDb(c)
	ctx := context.Background()
	names := make([]int, batchSize)
	for i := range names {
		names[i] = i
	}
	// Warm up the connection and the scripts.
	warm, _ := l.TryLockMany(ctx, db, names[:1])
	lock.ReleaseMany(ctx, warm)
	if tok, _ := l.TryLock(ctx, db, 0); tok != nil {
		tok.Release(ctx)
	}
	b.Run("sequential", func(b *testing.B) {
		toks := make([]*lock.Token, batchSize)
		b.ReportAllocs()
		sent := e.counter.Writes()
		for b.Loop() {
			for i, n := range names {
				tok, err := l.TryLock(ctx, db, n)
				if tok == nil || err != nil {
					b.Fatalf("TryLock(%d) = %v, %v", n, tok, err)
				}
				toks[i] = tok
			}
			for _, tok := range toks {
				if ok, err := tok.Release(ctx); !ok || err != nil {
					b.Fatalf("Release = %v, %v", ok, err)
				}
			}
		}
		b.ReportMetric(float64(e.counter.Writes()-sent)/float64(b.N), "rt/op")
	})
	b.Run("many", func(b *testing.B) {
		b.ReportAllocs()
		sent := e.counter.Writes()
		for b.Loop() {
			toks, err := l.TryLockMany(ctx, db, names)
			if err != nil || toks[batchSize-1] == nil {
				b.Fatalf("TryLockMany = %v", err)
			}
			if ok, err := lock.ReleaseMany(ctx, toks); err != nil || !ok[batchSize-1] {
				b.Fatalf("ReleaseMany = %v", err)
			}
		}
		b.ReportMetric(float64(e.counter.Writes()-sent)/float64(b.N), "rt/op")
	})
}

// delayDial returns a go-redis dialer whose connections wait d before each
// write, and count their writes in cnt.
func delayDial(d time.Duration, cnt *bench.Counter) func(context.Context, string, string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := cnt.Dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &delayConn{Conn: conn, d: d}, nil
	}
}

type delayConn struct {
	net.Conn
	d time.Duration
}

func (c *delayConn) Write(p []byte) (int, error) {
	time.Sleep(c.d)
	return c.Conn.Write(p)
}

// SyscallConn passes the raw connection through, as bench.Counter's does.
func (c *delayConn) SyscallConn() (syscall.RawConn, error) {
	sc, ok := c.Conn.(syscall.Conn)
	if !ok {
		return nil, errors.ErrUnsupported
	}
	return sc.SyscallConn()
}
