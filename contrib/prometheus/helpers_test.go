package prometheus_test

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/wakuwaku-go/wakuwaku/cron"
	"github.com/wakuwaku-go/wakuwaku/interval"
	"github.com/wakuwaku-go/wakuwaku/lock"
)

// leasedJob is a job that runs once an hour, once across the replicas that
// run it, doing process; a slot gets attempts runs until one succeeds.
type leasedJob struct {
	name     string
	db       lock.DB
	attempts int
	process  func(ctx context.Context, t cron.Tick) error
}

func (j *leasedJob) Name() string                { return j.name }
func (j *leasedJob) Interval() interval.Interval { return interval.AtLeast(time.Hour) }
func (j *leasedJob) Lease() cron.LeaseConfig {
	return cron.LeaseConfig{DB: j.db, Attempts: j.attempts, Backoff: 50 * time.Millisecond}
}

func (j *leasedJob) Process(ctx context.Context, t cron.Tick) error { return j.process(ctx, t) }

// succeeds, fails and panics are the three jobs of the tests, over db.
func threeJobs(db lock.DB) []cron.Job {
	return []cron.Job{
		&leasedJob{name: "succeeds", db: db, process: func(context.Context, cron.Tick) error { return nil }},
		&leasedJob{name: "fails", db: db, process: func(context.Context, cron.Tick) error { return errors.New("failed") }},
		&leasedJob{name: "panics", db: db, process: func(context.Context, cron.Tick) error { panic("broken") }},
	}
}

// flaky returns a job over db whose slots get two attempts, and whose
// first run fails.
func flaky(db lock.DB) *leasedJob {
	var runs atomic.Int32
	return &leasedJob{name: "flaky", db: db, attempts: 2, process: func(context.Context, cron.Tick) error {
		if runs.Add(1) == 1 {
			return errors.New("first run fails")
		}
		return nil
	}}
}

// events is an observer of the test's own, chained after the metrics', so
// that the test waits for what it then reads back.
type events struct {
	finished, skipped chan string
	skew              chan time.Duration
}

func newEvents() *events {
	return &events{finished: make(chan string, 100), skipped: make(chan string, 100), skew: make(chan time.Duration, 100)}
}

func (e *events) observer() cron.Observer {
	return cron.Observer{
		RunFinished: func(t cron.Tick, _ error, _ time.Duration) { e.finished <- t.Job },
		RunSkipped:  func(t cron.Tick, reason string, _ error) { e.skipped <- t.Job + ": " + reason },
		ClockSkew:   func(skew time.Duration) { e.skew <- skew },
	}
}

// wait receives n values from ch, failing the test after 10s.
func wait[T any](t *testing.T, ch <-chan T, n int, what string) []T {
	t.Helper()
	var got []T
	for len(got) < n {
		select {
		case v := <-ch:
			got = append(got, v)
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: %d of %d within 10s: %v", what, len(got), n, got)
		}
	}
	return got
}

// start starts a runtime of jobs with observer o, shut down at cleanup.
func start(t *testing.T, jobs []cron.Job, o cron.Observer) *cron.Runtime {
	t.Helper()
	rt, err := cron.Start(jobs, cron.WithObserver(o))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Shutdown(context.Background()) })
	return rt
}

// quiet drops go-redis's own log lines: the dead client's failed dials
// are the point of the tests that use it, not news.
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

func init() { redis.SetLogger(quiet{}) }

// deadClient returns a client of an address where nothing listens, which
// fails every command at once.
func deadClient(t *testing.T) *redis.Client {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: time.Second})
	t.Cleanup(func() { c.Close() })
	return c
}
