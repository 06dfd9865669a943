package cron_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/wakuwaku-go/wakuwaku/cron"
	"github.com/wakuwaku-go/wakuwaku/interval"
	"github.com/wakuwaku-go/wakuwaku/lock"
)

// fencedSet writes a value to the hash KEYS[1] with its fence, unless the
// hash holds a fence as high or higher: a write of a run that a later run
// overtook is refused.
var fencedSet = redis.NewScript(`
if tonumber(redis.call('HGET', KEYS[1], 'fence') or '0') >= tonumber(ARGV[2]) then
	return 0
end
redis.call('HSET', KEYS[1], 'value', ARGV[1], 'fence', ARGV[2])
return 1`)

// save writes the report with the run's fence, and says whether the store
// took it.
func save(ctx context.Context, rdb redis.Scripter, report string, fence uint64) (bool, error) {
	n, err := fencedSet.Run(ctx, rdb, []string{"report:latest"}, report, fence).Int()
	return n == 1, err
}

// A leased job hands its fence to the store it writes, which refuses a
// write of a run that a later run overtook: here the startup run's write
// arrives again after a run-now's, as a run that stalled past its run
// lease would write.
func ExampleTick_fence() {
	m, err := miniredis.Run() // a real Redis in production
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr()})
	defer rdb.Close()
	ctx := context.Background()
	db := lock.NewDB(rdb)

	fences := make(chan uint64, 2)
	job := cron.Func("report", interval.AtLeast(time.Hour), func(ctx context.Context, tick cron.Tick) error {
		if _, err := save(ctx, rdb, "report of the "+tick.Trigger.String()+" run", tick.Fence); err != nil {
			return err
		}
		fences <- tick.Fence
		return nil
	}, cron.WithLease(cron.LeaseConfig{DB: db}))
	rt, err := cron.Start([]cron.Job{job})
	if err != nil {
		log.Fatal(err)
	}
	first := <-fences // the startup run
	if err := cron.NewAdmin(db).RunNow(ctx, "report"); err != nil {
		log.Fatal(err)
	}
	second := <-fences
	if err := rt.Shutdown(ctx); err != nil {
		log.Fatal(err)
	}

	ok, err := save(ctx, rdb, "report of the startup run, late", first)
	if err != nil {
		log.Fatal(err)
	}
	stored, _ := rdb.HGet(ctx, "report:latest", "value").Result()
	fmt.Println("later run, higher fence:", second > first)
	fmt.Println("late write taken:", ok)
	fmt.Println("stored:", stored)
	// Output:
	// later run, higher fence: true
	// late write taken: false
	// stored: report of the request run
}
