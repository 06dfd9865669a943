package lock_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/wakuwaku-go/wakuwaku/lock"
)

// answering is an in-process client that answers every acquire as a free
// lock and every script with 1, so that a benchmark on it measures what the
// library itself costs around the round trip.
type answering struct{}

func (answering) Process(_ context.Context, cmd redis.Cmder) error {
	switch c := cmd.(type) {
	case *redis.IntCmd:
		c.SetVal(1)
	case *redis.RawCmd:
		c.SetVal(freeReply)
	}
	return nil
}

// freeReply is the RESP3 nil with which SET … NX GET answers a free key.
var freeReply = []byte("_\r\n")

// BenchmarkTryLockLocal measures TryLock and Release without a network, with
// no observer (the hot path every DB without one takes) and with one.
func BenchmarkTryLockLocal(b *testing.B) {
	l := lock.New[int]("bench", 30*time.Second)
	ctx := context.Background()
	for _, bc := range []struct {
		name string
		db   lock.DB
	}{
		{"unset", lock.NewDB(answering{})},
		{"observed", observedDB()},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				tok, err := l.TryLock(ctx, bc.db, i)
				i++
				if tok == nil || err != nil {
					b.Fatalf("TryLock = %v, %v", tok, err)
				}
				tok.Release(ctx)
			}
		})
	}
}
