package cron

import (
	"context"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wakuwaku-go/wakuwaku/internal/redisscript"
	"github.com/wakuwaku-go/wakuwaku/internal/redistest"
	"github.com/wakuwaku-go/wakuwaku/interval"
	"github.com/wakuwaku-go/wakuwaku/lock"
)

// counting is a client that counts the commands sent through it, each a
// round trip.
type counting struct {
	redisscript.Client
	n atomic.Int64
}

func (c *counting) Process(ctx context.Context, cmd redis.Cmder) error {
	c.n.Add(1)
	return c.Client.Process(ctx, cmd)
}

// serverCalls returns the commands the server has executed, scripts' own
// calls included, from INFO commandstats.
func serverCalls(tb testing.TB, rdb *redis.Client) int64 {
	tb.Helper()
	n, _ := serverStats(tb, rdb)
	return n
}

// serverStats returns the commands the server has executed and the
// microseconds it spent in scripts (whose time includes their calls'), from
// INFO commandstats, the INFO that reads them left out.
func serverStats(tb testing.TB, rdb *redis.Client) (calls, usec int64) {
	tb.Helper()
	stats, err := redistest.CommandStats(context.Background(), rdb)
	if err != nil {
		tb.Fatal(err)
	}
	for name, s := range stats {
		if name != "info" {
			calls += s.Calls
		}
	}
	return calls, stats["evalsha"].Usec + stats["eval"].Usec
}

// protocol runs the record's protocol for one job straight, without a
// runtime's scheduling: a claim, the run (nothing), a completion.
type protocol struct {
	s     *jobState
	c     *counting
	every interval.Interval
	slot  interval.Slot
}

func newProtocol(tb testing.TB, rdb *redis.Client, name string, every interval.Interval) *protocol {
	tb.Helper()
	s, err := newJobState(every, LeaseConfig{DB: lock.NewDB(rdb), Name: name}, "bench", time.Now)
	if err != nil {
		tb.Fatal(err)
	}
	c := &counting{Client: s.C}
	s.C, s.Batched, s.Completing = c, c, c
	first, _ := every.NextSlot(time.Now())
	return &protocol{s: s, c: c, every: every, slot: first}
}

// run claims and completes one run of the next slot, or, for a duration
// policy, of a fresh slot after expiring the last one's lease.
func (p *protocol) run(tb testing.TB) {
	t := Tick{Slot: p.slot, Attempt: 1}
	if p.s.shared {
		p.slot, _ = p.every.NextSlot(p.slot.Start)
	} else {
		now := time.Now()
		t.Slot = p.every.Plan(now, now).Slot
	}
	c, err := p.s.claim(context.Background(), modeTick, &t, time.Time{}, "")
	if err != nil || c.run == nil {
		tb.Fatalf("claim = %+v, %v; want a run", c, err)
	}
	if _, err := p.s.complete(context.Background(), c.run, c.attempt, time.Time{}, nil, time.Time{}); err != nil {
		tb.Fatal(err)
	}
}

// TestRunProtocolRoundTrips checks what a leased run costs on the happy
// path: one round trip to claim it and one to record its end, each one
// script, and one per heartbeat.
func TestRunProtocolRoundTrips(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	for _, tc := range []struct {
		name  string
		every interval.Interval
	}{
		{"cron", interval.MustCron("* * * * *")},
		{"duration", interval.AtLeast(time.Hour)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newProtocol(t, rdb, "cost-"+tc.name, tc.every)
			// The first run loads the scripts (EVALSHA, NOSCRIPT, EVAL).
			p.run(t)
			lease := p.s.NewRun("none", time.Time{}, time.Now())
			lease.Extend(context.Background())
			p.c.n.Store(0)
			const runs = 20
			before := serverCalls(t, rdb)
			for range runs {
				if !p.s.shared {
					// Each run of a duration policy needs a free seed
					// lease, as the next interval's would be.
					rdb.Del(context.Background(), p.s.Keys[2])
				}
				p.run(t)
			}
			trips := p.c.n.Load()
			if trips != 2*runs {
				t.Errorf("%d runs took %d round trips, want 2 each", runs, trips)
			}
			calls := serverCalls(t, rdb) - before
			if !p.s.shared {
				calls -= runs // the test's own DELs
			}
			t.Logf("%d runs: %d round trips, %.1f server commands per run (INFO commandstats)", runs, trips, float64(calls)/runs)

			p.c.n.Store(0)
			if ok, err := lease.Extend(context.Background()); err != nil || ok || p.c.n.Load() != 1 {
				t.Errorf("a heartbeat of no run = %v, %v in %d round trips; want false in 1", ok, err, p.c.n.Load())
			}
		})
	}
}

// BenchmarkRunProtocol measures a leased run's claim and completion, a
// losing replica's claim of a slot already done, and a run's heartbeat,
// beside the bare lease that leased jobs took before they had records (one
// TryLock of a key per slot), on a real redis-server: time, round trips
// and server commands per run.
func BenchmarkRunProtocol(b *testing.B) {
	srv := redistest.Start(b)
	rdb := srv.Client(b)
	b.Run("record", func(b *testing.B) {
		p := newProtocol(b, rdb, "bench-record-"+strconv.FormatInt(time.Now().UnixNano(), 36), interval.MustCron("* * * * * *"))
		p.run(b) // loads the scripts
		p.c.n.Store(0)
		before, beforeUS := serverStats(b, rdb)
		for b.Loop() {
			p.run(b)
		}
		after, afterUS := serverStats(b, rdb)
		b.ReportMetric(float64(p.c.n.Load())/float64(b.N), "rt/run")
		b.ReportMetric(float64(after-before-1)/float64(b.N), "srv/run")
		b.ReportMetric(float64(afterUS-beforeUS)/float64(b.N), "script-µs/run")
	})
	b.Run("losing-claim", func(b *testing.B) {
		// A replica's tick of a slot that another replica's run already
		// recorded as done: what each losing replica costs the server.
		p := newProtocol(b, rdb, "bench-lose-"+strconv.FormatInt(time.Now().UnixNano(), 36), interval.MustCron("* * * * * *"))
		done := Tick{Slot: p.slot, Attempt: 1}
		p.run(b)
		p.c.n.Store(0)
		before, beforeUS := serverStats(b, rdb)
		for b.Loop() {
			t := done
			c, err := p.s.claim(context.Background(), modeTick, &t, time.Time{}, "")
			if err != nil || c.run != nil {
				b.Fatalf("claim of a done slot = %+v, %v; want no run", c, err)
			}
		}
		after, afterUS := serverStats(b, rdb)
		b.ReportMetric(float64(p.c.n.Load())/float64(b.N), "rt/run")
		b.ReportMetric(float64(after-before-1)/float64(b.N), "srv/run")
		b.ReportMetric(float64(afterUS-beforeUS)/float64(b.N), "script-µs/run")
	})
	b.Run("heartbeat", func(b *testing.B) {
		// A run's heartbeat (E7, R11), every third of its run lease while
		// it runs.
		p := newProtocol(b, rdb, "bench-beat-"+strconv.FormatInt(time.Now().UnixNano(), 36), interval.MustCron("* * * * * *"))
		t := Tick{Slot: p.slot, Attempt: 1}
		c, err := p.s.claim(context.Background(), modeTick, &t, time.Time{}, "")
		if err != nil || c.run == nil {
			b.Fatalf("claim = %+v, %v; want a run", c, err)
		}
		c.run.Extend(context.Background()) // loads the script
		p.c.n.Store(0)
		before, beforeUS := serverStats(b, rdb)
		for b.Loop() {
			if held, err := c.run.Extend(context.Background()); err != nil || !held {
				b.Fatalf("heartbeat = %v, %v; want the run lease extended", held, err)
			}
		}
		after, afterUS := serverStats(b, rdb)
		b.ReportMetric(float64(after-before-1)/float64(b.N), "srv/beat")
		b.ReportMetric(float64(afterUS-beforeUS)/float64(b.N), "script-µs/beat")
	})
	b.Run("bare-lease", func(b *testing.B) {
		slots := interval.MustCron("* * * * * *")
		slot, _ := slots.NextSlot(time.Now().Add(-time.Second))
		c := &counting{Client: rdb}
		name := "bench-bare-" + strconv.FormatInt(time.Now().UnixNano(), 36) + "@"
		db := lock.NewDB(c)
		before, beforeUS := serverStats(b, rdb)
		for b.Loop() {
			key, _ := slot.Key()
			tok, err := lock.New[string](LeaseNamespace, time.Hour).TryLock(context.Background(), db, name+key)
			if err != nil || tok == nil {
				b.Fatalf("TryLock = %v, %v", tok, err)
			}
			slot, _ = slots.NextSlot(slot.Start)
		}
		after, afterUS := serverStats(b, rdb)
		b.ReportMetric(float64(c.n.Load())/float64(b.N), "rt/run")
		b.ReportMetric(float64(after-before-1)/float64(b.N), "srv/run")
		b.ReportMetric(float64(afterUS-beforeUS)/float64(b.N), "script-µs/run")
	})
}

// BenchmarkRunReplicas measures what lock.WithReplicas adds to a leased
// run: its claim and its completion each send WAIT in their own round
// trip, and the replica acknowledges them. A master and a replica, both
// loopback redis-servers; an op is one run's claim and completion.
func BenchmarkRunReplicas(b *testing.B) {
	master := redistest.Start(b, "--repl-diskless-sync-delay", "0")
	_, port, _ := strings.Cut(master.Addr(), ":")
	redistest.Start(b, "--replicaof", "127.0.0.1", port)
	redistest.WaitReplicas(b, master, 1)
	for _, tc := range []struct {
		name string
		opts []lock.DBOption
	}{{"no-wait", nil}, {"WithReplicas", []lock.DBOption{lock.WithReplicas(1, time.Second)}}} {
		b.Run(tc.name, func(b *testing.B) {
			every := interval.MustCron("* * * * * *")
			name := "bench-repl-" + strconv.FormatInt(time.Now().UnixNano(), 36)
			s, err := newJobState(every, LeaseConfig{DB: lock.NewDB(master.Client(b), tc.opts...), Name: name}, "bench", time.Now)
			if err != nil {
				b.Fatal(err)
			}
			first, _ := every.NextSlot(time.Now())
			p := &protocol{s: s, every: every, slot: first}
			p.run(b) // loads the scripts
			for b.Loop() {
				p.run(b)
			}
		})
	}
}
