package bench_test

import (
	"context"
	"testing"

	"github.com/wakuwaku-go/wakuwaku/lock"
)

// batchSize is how many names a batch case takes at once.
const batchSize = 100

// BenchmarkBatch compares taking and releasing batchSize free names with
// lock.Lock.TryLockMany and lock.ReleaseMany (one round trip each on one
// server) against the same names taken and released by batchSize sequential
// TryLock and Release calls, in the same run on the same server and client.
// One op is the whole batch: batchSize names taken, then released.
func BenchmarkBatch(b *testing.B) {
	e := getEnv(b)
	l := lock.New[int]("batch", ttl)
	db := lock.NewDb(e.client)
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
