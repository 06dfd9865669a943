package cron

import (
	"context"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/wakuwaku-go/wakuwaku/interval"
)

// TestQueueOrder checks that the queue gives its items back by due time,
// and those due at one instant in the order of their jobs.
func TestQueueOrder(t *testing.T) {
	const n = 1000
	entries := make([]entry, n)
	rng := rand.New(rand.NewPCG(1, 2))
	dues := make([]int64, n)
	for i := range dues {
		dues[i] = rng.Int64N(20) // many ties
	}
	var q queue
	for _, i := range rng.Perm(n) { // pushed in no particular order
		q.push(dues[i], &entries[i])
	}
	want := make([]int, n)
	for i := range want {
		want[i] = i
	}
	slices.SortStableFunc(want, func(a, b int) int { return int(dues[a] - dues[b]) })
	for k, i := range want {
		if len(q) == 0 {
			t.Fatalf("queue empty after %d pops, want %d", k, n)
		}
		it := q.pop()
		if it.e != &entries[i] || it.due != dues[i] {
			got := -1
			for j := range entries {
				if &entries[j] == it.e {
					got = j
				}
			}
			t.Fatalf("pop %d = job %d due %d, want job %d due %d", k, got, it.due, i, dues[i])
		}
	}
	if len(q) != 0 {
		t.Errorf("%d items left after %d pops, want 0", len(q), n)
	}
}

// TestSharedPolicies runs jobs that share a policy (one Interval value per
// group): each policy is planned for them all, and each job still ticks as
// its own runs say, for the AtLeast jobs whose runs take different times.
func TestSharedPolicies(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		t0 := time.Now()
		const perGroup = 20
		var mu sync.Mutex
		starts := make(map[string][]time.Duration)
		slots := make(map[string][]time.Duration)
		job := func(name string, every interval.Interval, took time.Duration) Job {
			return Func(name, every, func(_ context.Context, tick Tick) error {
				mu.Lock()
				starts[name] = append(starts[name], time.Since(t0))
				slots[name] = append(slots[name], tick.Scheduled.Sub(t0))
				mu.Unlock()
				time.Sleep(took)
				return nil
			})
		}
		cronEvery := interval.MustCron("*/10 * * * * *")
		atLeast := interval.AtLeast(10 * time.Second)
		var jobs []Job
		for i := range perGroup {
			jobs = append(jobs,
				job("cron-"+strconv.Itoa(i), cronEvery, time.Second),
				job("atleast-"+strconv.Itoa(i), atLeast, time.Duration(i)*time.Second))
		}
		r, err := Start(jobs)
		if err != nil {
			t.Fatalf("Start = %v", err)
		}
		t.Cleanup(func() {
			if err := r.Shutdown(context.Background()); err != nil {
				t.Errorf("Shutdown = %v", err)
			}
		})

		synctest.Wait() // the startup runs that take no time queued their jobs again
		r.mu.Lock()
		policies := make(map[*policy]int)
		for _, it := range r.queue {
			policies[it.e.every]++
		}
		r.mu.Unlock()
		if len(policies) != 2 {
			t.Errorf("the queue's %d jobs have %d policies, want 2", len(jobs), len(policies))
		}

		time.Sleep(35 * time.Second)
		mu.Lock()
		defer mu.Unlock()
		// The bubble's clock starts on a whole second, 2000-01-01 00:00:00
		// UTC: the spec's slots are 10, 20 and 30 s after it.
		sec := func(s ...int) []time.Duration {
			out := make([]time.Duration, len(s))
			for i, v := range s {
				out[i] = time.Duration(v) * time.Second
			}
			return out
		}
		for i := range perGroup {
			name := "cron-" + strconv.Itoa(i)
			if want := sec(0, 10, 20, 30); !slices.Equal(starts[name], want) || !slices.Equal(slots[name], want) {
				t.Errorf("%s started at %v for slots %v, want %v for both", name, starts[name], slots[name], want)
			}
			// AtLeast(10s): the next run starts at max(start + 10 s,
			// finish), and job i's runs take i seconds.
			name = "atleast-" + strconv.Itoa(i)
			var want []time.Duration
			for at := time.Duration(0); at < 35*time.Second; at += max(10*time.Second, time.Duration(i)*time.Second) {
				want = append(want, at)
			}
			if !slices.Equal(starts[name], want) || !slices.Equal(slots[name], want) {
				t.Errorf("%s started at %v for ticks due at %v, want %v for both", name, starts[name], slots[name], want)
			}
		}
	})
}
