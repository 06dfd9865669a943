package bench_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wakuwaku-go/wakuwaku/lock"
)

// waiters is how many goroutines contend for the one name of
// BenchmarkWait.
const waiters = 8

// BenchmarkWait has waiters goroutines take one name in turn, each holding
// it for 1 ms, and compares lock.Lock.Lock (back-off with full jitter,
// 1 ms to 20 ms) with a loop that calls TryLock again at once, in the same
// run. One op is one acquisition and its release; rt/op counts every
// command sent for it, the busy attempts included, which is what a waiting
// strategy costs Redis.
func BenchmarkWait(b *testing.B) {
	e := getEnv(b)
	l := lock.New[int]("wait", ttl)
	db := lock.NewDB(e.client)
	ctx := context.Background()
	if tok, _ := l.TryLock(ctx, db, 0); tok != nil {
		tok.Release(ctx)
	}
	backoff := lock.Backoff{Min: time.Millisecond, Max: 20 * time.Millisecond}
	for _, bc := range []struct {
		name string
		take func(ctx context.Context) (*lock.Token, error)
	}{
		{"backoff", func(ctx context.Context) (*lock.Token, error) { return l.Lock(ctx, db, 1, backoff) }},
		{"spin", func(ctx context.Context) (*lock.Token, error) {
			for {
				tok, err := l.TryLock(ctx, db, 1)
				if tok != nil || err != nil {
					return tok, err
				}
			}
		}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			var left atomic.Int64
			left.Store(int64(b.N))
			sent := e.counter.Writes()
			b.ResetTimer()
			var wg sync.WaitGroup
			for range waiters {
				wg.Go(func() {
					for left.Add(-1) >= 0 {
						tok, err := bc.take(ctx)
						if tok == nil || err != nil {
							b.Errorf("take = %v, %v", tok, err)
							return
						}
						time.Sleep(time.Millisecond)
						tok.Release(ctx)
					}
				})
			}
			wg.Wait()
			b.StopTimer()
			b.ReportMetric(float64(e.counter.Writes()-sent)/float64(b.N), "rt/op")
		})
	}
}
