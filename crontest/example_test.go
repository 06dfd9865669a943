package crontest_test

import (
	"context"
	"fmt"
	"os"
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

// hourlyReport is the job under test: leased, so that it runs once an hour
// across the replicas. Its spec is in UTC so that the example's output does
// not depend on the machine's zone.
func hourlyReport(rdb *redis.Client) []cron.Job {
	build := func(ctx context.Context, tick cron.Tick) error {
		select { // building the report takes two minutes
		case <-time.After(2 * time.Minute):
			return nil
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
	return []cron.Job{cron.Func("hourly-report", interval.MustCron("CRON_TZ=UTC 0 * * * *"), build,
		cron.WithLease(cron.LeaseConfig{DB: lock.NewDB(rdb)}))}
}

// This example tests a leased hourly job on three replicas for a week of
// fake time: replica 2, whose clock is a minute ahead and so runs every
// slot, is killed mid-run on day 2 and restarted that evening, and Redis is
// down for ten minutes on day 4. A test does the same inside
// synctest.Test(t, func(t *testing.T) { ... }); an example has no
// *testing.T, so inBubble makes one.
//
// The slot whose ticks all fell in the outage runs late: every replica's
// claim failed, and a run is never risked without one, so each replica
// looks at the slot again once Redis answers, and one runs it within its
// hour. So the test asserts at most once per slot everywhere, and no slot
// missing outside the outage; a longer outage would miss the slot, which
// the assertions allow too.
func Example() {
	inBubble(func(t *testing.T) {
		const job, day = "hourly-report", 24 * time.Hour
		start := time.Now()
		c := crontest.New(t, 3, hourlyReport, crontest.WithClockOffsets(0, 2*time.Second, time.Minute))

		time.Sleep(day + 10*time.Hour + 30*time.Second) // day 2, 10:00:30
		c.Kill(2)
		time.Sleep(8 * time.Hour) // 18:00:30
		c.Restart(2)

		time.Sleep(time.Until(start.Add(3*day + 12*time.Hour + 58*time.Minute))) // day 4, 12:58
		outage := time.Now()
		c.RedisDown(10 * time.Minute)

		time.Sleep(time.Until(start.Add(7 * day)))
		end := time.Now()
		c.OncePerSlot(t, job)
		c.NoSlotMissing(t, job, start, outage)
		c.NoSlotMissing(t, job, outage.Add(10*time.Minute), end)
		c.NoOverlap(t, job)

		slots := make(map[time.Time]bool) // the week's slots that ran
		for _, r := range c.Runs() {
			if r.Tick.Slot.Start.Before(end) { // not replica 2's run for the next, a minute early
				slots[r.Tick.Slot.Start] = true
			}
			if r.Err != nil {
				fmt.Printf("slot %s: replica %d: %v\n", r.Tick.Slot.Start.UTC().Format(time.DateTime), r.Replica, r.Err)
			}
		}
		fmt.Println("slots run:", len(slots), "of", 7*24)
	})
	// Output:
	// slot 2000-01-02 10:00:00: replica 2: crontest: replica killed
	// slots run: 168 of 168
}

// This example tests a leased hourly job whose first attempt at each slot
// fails and which has two attempts a slot: for a day on three replicas,
// each slot succeeds exactly once, on its retry. OncePerSlot would report
// every slot, since it counts the failed attempt too; SucceededOncePerSlot
// asserts what such a job promises.
func ExampleCluster_SucceededOncePerSlot() {
	inBubble(func(t *testing.T) {
		var mu sync.Mutex
		attempts := map[time.Time]int{} // by slot, across the replicas
		flaky := func(ctx context.Context, tick cron.Tick) error {
			mu.Lock()
			defer mu.Unlock()
			if attempts[tick.Slot.Start]++; attempts[tick.Slot.Start] == 1 {
				return fmt.Errorf("upstream not ready for %s", tick.Slot)
			}
			return nil
		}
		c := crontest.New(t, 3, func(rdb *redis.Client) []cron.Job {
			return []cron.Job{cron.Func("sync", interval.MustCron("CRON_TZ=UTC 0 * * * *"), flaky,
				cron.WithLease(cron.LeaseConfig{DB: lock.NewDB(rdb), Attempts: 2, Backoff: time.Minute}))}
		})
		time.Sleep(24*time.Hour - time.Second)
		c.SucceededOncePerSlot(t, "sync")
		c.NoOverlap(t, "sync")

		failed, succeeded := 0, 0
		for _, r := range c.Runs() {
			if r.Err != nil {
				failed++
			} else {
				succeeded++
			}
		}
		fmt.Println("slots:", len(attempts), "failed attempts:", failed, "successes:", succeeded)
	})
	// Output:
	// slots: 24 failed attempts: 24 successes: 24
}

// inBubble runs test as a test in a synctest bubble, for an example, which
// has no *testing.T. What the test logs and how it fails go to stderr, not
// into the example's output; a failure prints FAIL there too.
func inBubble(test func(t *testing.T)) {
	stdout := os.Stdout
	os.Stdout = os.Stderr // where testing.RunTests makes the test report
	var once sync.Once    // RunTests runs it -count times
	ok := testing.RunTests(func(string, string) (bool, error) { return true, nil },
		[]testing.InternalTest{{Name: "Example", F: func(t *testing.T) {
			os.Stdout = stdout // the test has its writer: the example's output is stdout again
			once.Do(func() { synctest.Test(t, test) })
		}}})
	if !ok {
		fmt.Println("FAIL")
	}
}
