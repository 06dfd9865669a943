package lock_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/wakuwaku-go/wakuwaku/internal/redistest"
	"github.com/wakuwaku-go/wakuwaku/lock"
)

// rawRelease is the usual compare-and-delete, for the raw baseline.
var rawRelease = redis.NewScript(`if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`)

// BenchmarkCycle compares an uncontended TryLock+Release with the same two
// round trips sent by hand through go-redis: SET NX PX, then a release script
// by SHA. Both run on one real redis-server in the same run.
func BenchmarkCycle(b *testing.B) {
	srv := redistest.Start(b)
	c := srv.Client(b)
	ctx := context.Background()

	b.Run("raw", func(b *testing.B) {
		keys := make([]string, 1024)
		for i := range keys {
			keys[i] = "raw:" + strconv.Itoa(i)
		}
		rawRelease.Load(ctx, c)
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			key := keys[i%len(keys)]
			i++
			ok, err := c.SetNX(ctx, key, "0123456789abcdef", 30*time.Second).Result()
			if !ok || err != nil {
				b.Fatalf("SetNX = %v, %v", ok, err)
			}
			if n, err := rawRelease.Run(ctx, c, []string{key}, "0123456789abcdef").Int(); n != 1 || err != nil {
				b.Fatalf("release = %v, %v", n, err)
			}
		}
	})
	b.Run("wakuwaku", func(b *testing.B) {
		l := lock.New[int]("bench", 30*time.Second)
		db := lock.NewDB(c)
		warm, _ := l.TryLock(ctx, db, -1)
		warm.Release(ctx)
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			tok, err := l.TryLock(ctx, db, i%1024)
			i++
			if tok == nil || err != nil {
				b.Fatalf("TryLock = %v, %v", tok, err)
			}
			if ok, err := tok.Release(ctx); !ok || err != nil {
				b.Fatalf("Release = %v, %v", ok, err)
			}
		}
	})
	b.Run("wakuwaku-rw-read", func(b *testing.B) {
		l := lock.NewRW[int]("bench", 30*time.Second)
		db := lock.NewDB(c)
		warm, _ := l.TryRead(ctx, db, -1)
		warm.Release(ctx)
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			tok, err := l.TryRead(ctx, db, i%1024)
			i++
			if tok == nil || err != nil {
				b.Fatalf("TryRead = %v, %v", tok, err)
			}
			if ok, err := tok.Release(ctx); !ok || err != nil {
				b.Fatalf("Release = %v, %v", ok, err)
			}
		}
	})
}

// BenchmarkKey measures building a key, the only work a TryLock does besides
// the round trip and the token.
func BenchmarkKey(b *testing.B) {
	l := lock.New[uint64]("invoice", time.Second)
	b.ReportAllocs()
	for b.Loop() {
		_ = l.Key(1234567)
	}
}
