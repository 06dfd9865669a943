package cron_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wakuwaku-go/wakuwaku/cron"
	"github.com/wakuwaku-go/wakuwaku/internal/redistest"
	"github.com/wakuwaku-go/wakuwaku/interval"
	"github.com/wakuwaku-go/wakuwaku/lock"
)

// processOnly is a lock.Client with nothing but Process, as a user's
// metrics or tracing wrapper is: the runtime's batches can't pipeline
// through it and send their commands one by one.
type processOnly struct{ c *redis.Client }

func (p processOnly) Process(ctx context.Context, cmd redis.Cmder) error {
	return p.c.Process(ctx, cmd)
}

// TestBatchOverProcessOnlyClient starts many leased AtLeast jobs at once
// over a client without Pipelined, on a Redis whose script cache is empty
// (a restart): every claim's EVALSHA answers NOSCRIPT, and each must fall
// back to the script's source, so every job runs its startup run. A batch
// used to stop at its first failing command, and its other callers got a
// nil reply and no error: their startup runs were skipped, "admission
// failed".
func TestBatchOverProcessOnlyClient(t *testing.T) {
	const jobs = 40
	srv := redistest.Start(t)
	raw := srv.Client(t)
	if err := raw.ScriptFlush(t.Context()).Err(); err != nil {
		t.Fatal(err)
	}
	db := lock.NewDB(processOnly{srv.Client(t)})
	var ev events
	ran := make(chan string, jobs)
	var list []cron.Job
	for i := range jobs {
		name := fmt.Sprintf("job-%02d", i)
		list = append(list, &leasedJob{
			testJob: testJob{name: name, every: interval.AtLeast(time.Hour), process: func(context.Context, cron.Tick) error {
				ran <- name
				return nil
			}},
			lease: cron.LeaseConfig{DB: db},
		})
	}
	start(t, list, cron.WithObserver(ev.observer()))
	// Each job runs or skips its startup run; the test ends when all did.
	seen := make(map[string]bool)
	deadline := time.After(10 * time.Second)
	for len(seen)+len(ev.of("skipped")) < jobs {
		select {
		case name := <-ran:
			seen[name] = true
		case <-time.After(10 * time.Millisecond):
		case <-deadline:
			t.Fatalf("%d of %d jobs ran their startup run within 10s, %d skipped it; want every one to run", len(seen), jobs, len(ev.of("skipped")))
		}
	}
	if skipped := ev.of("skipped"); len(skipped) != 0 {
		t.Errorf("%d of %d startup runs skipped (the first: %s: %s, %v), want none", len(skipped), jobs, skipped[0].tick.Job, skipped[0].reason, skipped[0].err)
	}
}
