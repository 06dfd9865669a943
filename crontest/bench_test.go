package crontest_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wakuwaku-go/wakuwaku/cron"
	"github.com/wakuwaku-go/wakuwaku/crontest"
	"github.com/wakuwaku-go/wakuwaku/interval"
	"github.com/wakuwaku-go/wakuwaku/lock"
)

// BenchmarkSimulatedDay runs tests as a user writes them with crontest, each
// a simulated span of fake time on three replicas, one span an operation:
//
//   - every-5s: a leased job due every 5 seconds that does nothing, for a
//     day (17,280 slots);
//   - two-jobs: that job, but its first attempt at each slot fails and the
//     second succeeds, beside a leased AtLeast(3s) job, with a replica
//     killed and restarted and a Redis outage, for a day;
//   - idle-week: a leased job due once a year, for a week: no slot, only
//     what the replicas do between slots (a beat a minute each);
//   - hourly-week: a leased hourly job that runs for two minutes, for a
//     week (168 slots);
//   - every-1s-hour: a leased job due every second that does nothing, for
//     an hour (3,600 slots).
//
// Its figures are in BENCHMARKS.md, and the cost of a slot in
// docs/testing.md.
func BenchmarkSimulatedDay(b *testing.B) {
	const day = 24 * time.Hour
	b.Run("every-5s", func(b *testing.B) {
		for b.Loop() {
			simulate(b, func(t *testing.T) {
				start := time.Now()
				c := crontest.New(t, 3, func(rdb *redis.Client) []cron.Job {
					return []cron.Job{cron.Func("beat", interval.MustCron("CRON_TZ=UTC */5 * * * * *"),
						func(context.Context, cron.Tick) error { return nil },
						cron.WithLease(cron.LeaseConfig{DB: lock.NewDB(rdb)}))}
				})
				time.Sleep(day)
				c.OncePerSlot(t, "beat")
				c.NoSlotMissing(t, "beat", start, time.Now())
			})
		}
	})
	b.Run("two-jobs", func(b *testing.B) {
		for b.Loop() {
			simulate(b, func(t *testing.T) {
				var mu sync.Mutex
				attempts := map[time.Time]int{} // by slot, across the replicas
				flaky := func(ctx context.Context, tick cron.Tick) error {
					mu.Lock()
					defer mu.Unlock()
					if attempts[tick.Slot.Start]++; attempts[tick.Slot.Start] == 1 {
						return errors.New("upstream not ready")
					}
					return nil
				}
				c := crontest.New(t, 3, func(rdb *redis.Client) []cron.Job {
					db := lock.NewDB(rdb)
					return []cron.Job{
						cron.Func("flaky", interval.MustCron("CRON_TZ=UTC */5 * * * * *"), flaky,
							cron.WithLease(cron.LeaseConfig{DB: db, Attempts: 2, Backoff: time.Second})),
						cron.Func("sweep", interval.AtLeast(3*time.Second), func(context.Context, cron.Tick) error { return nil },
							cron.WithLease(cron.LeaseConfig{DB: db})),
					}
				})
				time.Sleep(6 * time.Hour)
				c.Kill(1)
				time.Sleep(2 * time.Hour)
				c.Restart(1)
				time.Sleep(4 * time.Hour)
				c.RedisDown(10 * time.Minute)
				time.Sleep(12 * time.Hour)
				c.NoOverlap(t, "flaky")
				c.NoOverlap(t, "sweep")
			})
		}
	})
	b.Run("every-1s-hour", func(b *testing.B) {
		for b.Loop() {
			simulate(b, func(t *testing.T) {
				start := time.Now()
				c := crontest.New(t, 3, func(rdb *redis.Client) []cron.Job {
					return []cron.Job{cron.Func("tick", interval.MustCron("CRON_TZ=UTC * * * * * *"),
						func(context.Context, cron.Tick) error { return nil },
						cron.WithLease(cron.LeaseConfig{DB: lock.NewDB(rdb)}))}
				})
				time.Sleep(time.Hour)
				c.OncePerSlot(t, "tick")
				c.NoSlotMissing(t, "tick", start, time.Now())
			})
		}
	})
	b.Run("idle-week", func(b *testing.B) {
		for b.Loop() {
			simulate(b, func(t *testing.T) {
				crontest.New(t, 3, func(rdb *redis.Client) []cron.Job {
					return []cron.Job{cron.Func("new-year", interval.MustCron("CRON_TZ=UTC 0 0 1 1 *").WithoutStartupRun(),
						func(context.Context, cron.Tick) error { return nil },
						cron.WithLease(cron.LeaseConfig{DB: lock.NewDB(rdb)}))}
				})
				time.Sleep(7 * day)
			})
		}
	})
	b.Run("hourly-week", func(b *testing.B) {
		for b.Loop() {
			simulate(b, func(t *testing.T) {
				start := time.Now()
				c := crontest.New(t, 3, hourlyReport)
				time.Sleep(7 * day)
				c.OncePerSlot(t, "hourly-report")
				c.NoSlotMissing(t, "hourly-report", start, time.Now())
			})
		}
	})
}

// simulate runs test in a synctest bubble of a test of its own, since a
// benchmark's *testing.B can't enter one, and fails b if the test fails.
func simulate(b *testing.B, test func(t *testing.T)) {
	b.Helper()
	var once sync.Once // RunTests runs it -count times
	ok := testing.RunTests(func(string, string) (bool, error) { return true, nil },
		[]testing.InternalTest{{Name: b.Name(), F: func(t *testing.T) { once.Do(func() { synctest.Test(t, test) }) }}})
	if !ok {
		b.Fatal("the simulated test failed")
	}
}
