package lock_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wakuwaku-go/wakuwaku/internal/redistest"
	"github.com/wakuwaku-go/wakuwaku/lock"
)

// serverUsec returns the server's CPU time spent in commands so far, in µs:
// the sum of usec over INFO commandstats, the INFO that reads it left out.
func serverUsec(b *testing.B, c *redis.Client) float64 {
	b.Helper()
	stats, err := redistest.CommandStats(context.Background(), c)
	if err != nil {
		b.Fatal(err)
	}
	var sum int64
	for name, s := range stats {
		if name != "info" {
			sum += s.Usec
		}
	}
	return float64(sum)
}

// BenchmarkAcquireWays compares the ways to acquire on one real
// redis-server, in one run: the acquire's SET … NX GET PX, the script it
// falls back to, and raw go-redis's SET NX PX. "free" is a cycle on a free
// lock (acquire, then release by the same compare-and-delete script for
// all three); "busy" is an acquire of a lock someone else holds, the whole
// of a contended try-lock loop. Besides time and allocations it reports the
// server's CPU per operation (server-µs/op, from INFO commandstats), the
// cost that decides throughput when the server is the bottleneck.
func BenchmarkAcquireWays(b *testing.B) {
	srv := redistest.Start(b)
	c := srv.Client(b)
	ctx := context.Background()
	l := lock.New[int]("ways", 30*time.Second)
	rawRelease.Load(ctx, c)
	const value = "0123456789abcdef"

	ours := map[string]lock.DB{"set-nx-get": lock.NewDB(c), "script": lock.ScriptAcquires(lock.NewDB(c))}
	measure := func(b *testing.B, op func(i int)) {
		op(-1) // the connection and the scripts' cache, before the clock
		before := serverUsec(b, c)
		b.ReportAllocs()
		b.ResetTimer()
		i := 0
		for b.Loop() {
			op(i % 1024)
			i++
		}
		b.StopTimer()
		b.ReportMetric((serverUsec(b, c)-before)/float64(b.N), "server-µs/op")
	}
	for _, way := range []string{"set-nx-get", "script", "raw"} {
		b.Run("free/"+way, func(b *testing.B) {
			measure(b, func(i int) {
				if db, ok := ours[way]; ok {
					tok, err := l.TryLock(ctx, db, i)
					if tok == nil || err != nil {
						b.Fatalf("TryLock = %v, %v", tok, err)
					}
					if ok, err := tok.Release(ctx); !ok || err != nil {
						b.Fatalf("Release = %v, %v", ok, err)
					}
					return
				}
				key := l.Key(i)
				if ok, err := c.SetNX(ctx, key, value, 30*time.Second).Result(); !ok || err != nil {
					b.Fatalf("SetNX = %v, %v", ok, err)
				}
				if n, err := rawRelease.Run(ctx, c, []string{key}, value).Int(); n != 1 || err != nil {
					b.Fatalf("release = %v, %v", n, err)
				}
			})
		})
		b.Run("busy/"+way, func(b *testing.B) {
			held, err := l.TryLock(ctx, lock.NewDB(c), 1<<20)
			if held == nil || err != nil {
				b.Fatalf("TryLock = %v, %v", held, err)
			}
			defer held.Release(ctx)
			key := held.Key()
			measure(b, func(int) {
				if db, ok := ours[way]; ok {
					if tok, err := l.TryLock(ctx, db, 1<<20); tok != nil || err != nil {
						b.Fatalf("TryLock on a held lock = %v, %v", tok, err)
					}
					return
				}
				if ok, err := c.SetNX(ctx, key, value, 30*time.Second).Result(); ok || err != nil {
					b.Fatalf("SetNX on a held key = %v, %v", ok, err)
				}
			})
		})
	}
}
