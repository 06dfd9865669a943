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
// It runs over two networks: loopback, where a round trip costs less than
// the server's work for a few names, and a client whose every write sleeps
// netDelay first, as a request waits on a network between hosts (a sleep
// lasts longer than asked on a loaded machine: rt/op and ns/op of the
// sequential case give the round trip it came to). With -rounds=n, as
// BenchmarkLock, every case runs n times, one round after the other, the
// two ways of a round next to each other (which goes first alternates), so
// that the ratio of a round compares runs made seconds apart.
func BenchmarkBatch(b *testing.B) {
	e := getEnv(b)
	slow := redis.NewClient(&redis.Options{Addr: e.srv.Addr(), Dialer: delayDial(netDelay, e.counter), PoolSize: 4})
	defer slow.Close()
	l := lock.New[int]("batch", ttl)
	names := make([]int, batchSize)
	for i := range names {
		names[i] = i
	}
	type way struct {
		name string
		run  func(b *testing.B, ctx context.Context, db lock.DB)
	}
	ways := []way{
		{"sequential", func(b *testing.B, ctx context.Context, db lock.DB) {
			toks := make([]*lock.Token, batchSize)
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
		}},
		{"many", func(b *testing.B, ctx context.Context, db lock.DB) {
			for b.Loop() {
				toks, err := l.TryLockMany(ctx, db, names)
				if err != nil || toks[batchSize-1] == nil {
					b.Fatalf("TryLockMany = %v", err)
				}
				if ok, err := lock.ReleaseMany(ctx, toks); err != nil || !ok[batchSize-1] {
					b.Fatalf("ReleaseMany = %v", err)
				}
			}
		}},
	}
	nets := []struct {
		name string
		db   lock.DB
	}{{"loopback", lock.NewDB(e.client)}, {"delayed", lock.NewDB(slow)}}
	ctx := context.Background()
	for _, n := range nets {
		// Warm up the connections and the scripts.
		warm, _ := l.TryLockMany(ctx, n.db, names[:1])
		lock.ReleaseMany(ctx, warm)
		if tok, _ := l.TryLock(ctx, n.db, 0); tok != nil {
			tok.Release(ctx)
		}
	}
	for round := range *rounds {
		for _, n := range nets {
			for i := range ways {
				w := ways[(i+round)%len(ways)]
				b.Run(n.name+"/"+w.name, func(b *testing.B) {
					b.ReportAllocs()
					sent := e.counter.Writes()
					w.run(b, ctx, n.db)
					b.ReportMetric(float64(e.counter.Writes()-sent)/float64(b.N), "rt/op")
				})
			}
		}
	}
}

// netDelay is what BenchmarkBatch's slow client waits before each write.
const netDelay = 200 * time.Microsecond

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
