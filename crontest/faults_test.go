package crontest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wakuwaku-go/wakuwaku/cron"
	"github.com/wakuwaku-go/wakuwaku/interval"
	"github.com/wakuwaku-go/wakuwaku/lock"
)

// TestRedisLatency checks that a replica's command takes its latency to
// reach Redis, and a nanosecond per byte, that replicas acting at one
// instant reach Redis in the order of their latencies, and that one
// replica's commands sent at one instant arrive by size.
func TestRedisLatency(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		took := make(map[string]time.Duration)
		started := 0
		jobs := func(rdb *redis.Client) []cron.Job {
			mu.Lock()
			name := fmt.Sprint(started) // New starts replica 0, then 1, then 2
			started++
			mu.Unlock()
			return []cron.Job{cron.Func("push", hourly, func(ctx context.Context, _ cron.Tick) error {
				sent := time.Now()
				err := rdb.RPush(ctx, "order", name).Err()
				mu.Lock()
				took[name] = time.Since(sent)
				mu.Unlock()
				return err
			})}
		}
		c := New(t, 3, jobs, WithRedisLatency(3*time.Millisecond, time.Millisecond, 2*time.Millisecond))
		time.Sleep(time.Minute)
		order, err := c.Client().LRange(t.Context(), "order", 0, -1).Result()
		if got := strings.Join(order, " "); got != "1 2 0" || err != nil {
			t.Errorf("LRANGE order = %q, %v, want replicas 1 2 0 (by latency)", got, err)
		}
		mu.Lock()
		defer mu.Unlock()
		// RPUSH order <i>: 11 bytes, 11 ns.
		for name, want := range map[string]time.Duration{"0": 3 * time.Millisecond, "1": time.Millisecond, "2": 2 * time.Millisecond} {
			if took[name] != want+11 {
				t.Errorf("replica %s's RPUSH took %v, want its latency %v and 11ns", name, took[name], want)
			}
		}
	})
}

// TestRedisLatencyBySize sends two commands of one replica at one instant,
// many times: the shorter one always reaches Redis first.
func TestRedisLatencyBySize(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := New(t, 1, func(rdb *redis.Client) []cron.Job {
			return []cron.Job{cron.Func("push", hourly, func(ctx context.Context, _ cron.Tick) error {
				for range 20 {
					var wg sync.WaitGroup
					for _, v := range []string{"longer", "short"} {
						wg.Go(func() { rdb.RPush(ctx, "order", v) })
					}
					wg.Wait()
				}
				return nil
			})}
		}, WithRedisLatency(time.Millisecond))
		time.Sleep(time.Minute)
		order, err := c.Client().LRange(t.Context(), "order", 0, -1).Result()
		if err != nil || len(order) != 40 {
			t.Fatalf("LRANGE order = %q, %v, want 40 values", order, err)
		}
		for i := 0; i < len(order); i += 2 {
			if order[i] != "short" || order[i+1] != "longer" {
				t.Fatalf("LRANGE order = %q, want short before longer in every pair", order)
			}
		}
	})
}

// TestRedisStall checks that a stall holds a command until it ends, fails
// one whose context ends first, and holds neither Client nor a command
// sent after it.
func TestRedisStall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		t0 := time.Now()
		type result struct {
			at  time.Duration
			err error
		}
		results := make(chan result, 4)
		everyMinute := interval.MustCron("CRON_TZ=UTC * * * * *").WithoutStartupRun()
		c := New(t, 1, func(rdb *redis.Client) []cron.Job {
			return []cron.Job{cron.Func("incr", everyMinute, func(ctx context.Context, _ cron.Tick) error {
				short, cancel := context.WithTimeout(ctx, 10*time.Second)
				defer cancel()
				err := rdb.Incr(short, "n").Err()
				results <- result{time.Since(t0), err}
				err = rdb.Incr(ctx, "n").Err()
				results <- result{time.Since(t0), err}
				return err
			})}
		})
		time.Sleep(30 * time.Second)
		c.RedisStall(time.Minute) // until 00:01:30
		c.RedisStall(time.Second) // shortens nothing
		if err := c.Client().Ping(t.Context()).Err(); err != nil {
			t.Errorf("Client().Ping during the stall = %v, want nil", err)
		}
		time.Sleep(2 * time.Minute)
		want := []result{
			{time.Minute + 10*time.Second, context.DeadlineExceeded}, // the stall outlasted its context
			{90 * time.Second, nil},                                  // held to the stall's end
			{2 * time.Minute, nil},                                   // the next minute's run: no stall
			{2 * time.Minute, nil},
		}
		for i, w := range want {
			got := <-results
			if got.at != w.at || !errors.Is(got.err, w.err) {
				t.Errorf("INCR %d returned at %v with %v, want at %v with %v", i, got.at, got.err, w.at, w.err)
			}
		}
	})
}

// TestRedisRestart checks that a restart loses every key and cached
// script, that the leased job's record and runs carry on once Redis is
// back, and that Redis is down for as long as it says.
func TestRedisRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		t0 := time.Now()
		c := New(t, 2, jobKinds[1].leased(time.Minute), WithClockOffsets(0, 2*time.Second))
		rdb := c.Client()
		if c.Client() != rdb {
			t.Error("Client() returned two clients")
		}
		ctx := t.Context()
		sha, err := rdb.ScriptLoad(ctx, "return 1").Result()
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(30 * time.Minute)
		record := "@@wakuwaku-cron:{@@wakuwaku-entity:Lock:cron:report}"
		if n, err := rdb.Exists(ctx, record).Result(); n != 1 || err != nil {
			t.Fatalf("EXISTS the record = %d, %v, want 1", n, err)
		}
		c.RedisRestart(0)
		if n, err := rdb.DBSize(ctx).Result(); n != 0 || err != nil {
			t.Errorf("DBSIZE after RedisRestart = %d, %v, want 0", n, err)
		}
		if ok, err := rdb.ScriptExists(ctx, sha).Result(); err != nil || len(ok) != 1 || ok[0] {
			t.Errorf("SCRIPT EXISTS after RedisRestart = %v, %v, want [false]", ok, err)
		}
		time.Sleep(88 * time.Minute) // 01:58
		c.RedisRestart(5 * time.Minute)
		time.Sleep(time.Hour + 30*time.Minute)
		var got []string
		for _, r := range c.Runs() {
			got = append(got, r.Tick.Slot.Start.Sub(t0).String())
		}
		// 01:00 ran with the scripts sent again; 02:00's ticks came while
		// Redis was down, and it ran once Redis was back, late.
		if want := "0s 1h0m0s 2h0m0s 3h0m0s"; strings.Join(got, " ") != want {
			t.Errorf("runs of the slots %q, want %q", got, want)
		} else if late := c.Runs()[2].Tick.Started.Sub(t0); late < 2*time.Hour+3*time.Minute {
			t.Errorf("02:00 ran %v after the start, before Redis was back", late)
		}
		c.OncePerSlot(t, "report")
	})
}

// TestRedisFailover checks what a failover keeps: every write made before
// RedisFailover, and of those made during its lag, the ones a WAIT
// acknowledged (with what came before them); that WAITs are answered as
// replicas that keep up answer them; and that cached scripts are lost
// and TTLs kept.
// TestRedisFailoverOverlapping is two failovers, the second announced
// before the first came: each keeps what its replica had, and neither
// loses a write that a WAIT acknowledged. The long run of the simulator
// found the second failover emptying Redis, which its checker had counted
// as an outage only.
func TestRedisFailoverOverlapping(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := New(t, 1, func(*redis.Client) []cron.Job { return nil })
		rdb := c.Client()
		ctx := t.Context()
		set := func(key string, acked bool) {
			t.Helper()
			p := rdb.Pipeline()
			p.Set(ctx, key, "1", 0)
			w := redis.NewIntCmd(ctx, "wait", 1, 100)
			if acked {
				_ = p.Process(ctx, w)
			}
			if _, err := p.Exec(ctx); err != nil || acked && w.Val() != 1 {
				t.Fatalf("SET %s = %v (WAIT %d)", key, err, w.Val())
			}
		}
		set("before", false)
		c.RedisFailover(10*time.Millisecond, time.Millisecond) // comes at 10 ms
		set("acked-1", true)
		set("lost-1", false)
		time.Sleep(2 * time.Millisecond)
		c.RedisFailover(20*time.Millisecond, time.Millisecond) // comes at 22 ms
		time.Sleep(10 * time.Millisecond)                      // 12 ms: the first came, Redis is back
		set("acked-2", true)
		set("lost-2", false)
		time.Sleep(time.Minute)
		for key, want := range map[string]int64{"before": 1, "acked-1": 1, "lost-1": 0, "acked-2": 1, "lost-2": 0} {
			if n, err := rdb.Exists(ctx, key).Result(); n != want || err != nil {
				t.Errorf("EXISTS %s after both failovers = %d, %v, want %d", key, n, err, want)
			}
		}
	})
}

func TestRedisFailover(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := New(t, 1, func(*redis.Client) []cron.Job { return nil })
		rdb := c.Client()
		ctx := t.Context()
		wait := func(p redis.Pipeliner) *redis.IntCmd {
			w := redis.NewIntCmd(ctx, "wait", 1, 100)
			_ = p.Process(ctx, w)
			return w
		}
		p := rdb.Pipeline()
		p.HSet(ctx, "before", "f", "v")
		p.PExpire(ctx, "before", time.Hour)
		p.ZAdd(ctx, "zset", redis.Z{Score: 1.5, Member: "m"})
		p.RPush(ctx, "list", "a", "b")
		w := wait(p)
		if _, err := p.Exec(ctx); err != nil || w.Val() != 1 {
			t.Fatalf("WAIT outside a failover = %d, %v, want 1", w.Val(), err)
		}
		sha, err := rdb.ScriptLoad(ctx, "return 1").Result()
		if err != nil {
			t.Fatal(err)
		}
		c.RedisFailover(10*time.Millisecond, time.Second)
		rdb.Set(ctx, "before-acked", "1", 0)
		p = rdb.Pipeline()
		p.Set(ctx, "acked", "1", 0)
		w = wait(p)
		if _, err := p.Exec(ctx); err != nil || w.Val() != 1 {
			t.Fatalf("WAIT in the failover's lag = %d, %v, want 1", w.Val(), err)
		}
		rdb.Set(ctx, "lost-after", "1", 0)
		time.Sleep(30 * time.Minute)
		for key, want := range map[string]int64{"before": 1, "zset": 1, "list": 1, "before-acked": 1, "acked": 1, "lost-after": 0} {
			if n, err := rdb.Exists(ctx, key).Result(); n != want || err != nil {
				t.Errorf("EXISTS %s after the failover = %d, %v, want %d", key, n, err, want)
			}
		}
		if ttl := rdb.PTTL(ctx, "before").Val(); ttl <= 29*time.Minute || ttl > 30*time.Minute {
			t.Errorf("PTTL before = %v, want half an hour (an hour set 30 minutes ago)", ttl)
		}
		if z := rdb.ZScore(ctx, "zset", "m").Val(); z != 1.5 {
			t.Errorf("ZSCORE = %v, want 1.5", z)
		}
		if l := rdb.LRange(ctx, "list", 0, -1).Val(); strings.Join(l, " ") != "a b" {
			t.Errorf("LRANGE = %q, want a b", l)
		}
		if ok, err := rdb.ScriptExists(ctx, sha).Result(); err != nil || len(ok) != 1 || ok[0] {
			t.Errorf("SCRIPT EXISTS after the failover = %v, %v, want [false]", ok, err)
		}
	})
}

// TestShutdown shuts a replica down gracefully while its run goes on:
// Shutdown waits for the run, which the cluster records as returned, and a
// command that the replica's client is asked for afterwards fails with
// ErrShutDown and is listed by AfterShutdown. A Restart brings the
// replica back.
func TestShutdown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var clients []*redis.Client
		jobs := func(rdb *redis.Client) []cron.Job {
			mu.Lock()
			clients = append(clients, rdb)
			mu.Unlock()
			return []cron.Job{cron.Func("report", hourly, func(ctx context.Context, _ cron.Tick) error {
				time.Sleep(10 * time.Second)
				return nil
			})}
		}
		c := New(t, 1, jobs)
		time.Sleep(time.Second) // the startup run goes on
		if err := c.Shutdown(t.Context(), 0); err != nil {
			t.Fatalf("Shutdown = %v, want nil", err)
		}
		if runs := c.Runs(); len(runs) != 1 || runs[0].End.IsZero() || runs[0].Err != nil {
			t.Fatalf("runs %+v; want the startup run, returned well before Shutdown did", runs)
		}
		if got := c.AfterShutdown(); len(got) != 0 {
			t.Errorf("AfterShutdown = %v before any command after Shutdown", got)
		}
		mu.Lock()
		rdb := clients[0]
		mu.Unlock()
		if err := rdb.Ping(t.Context()).Err(); !errors.Is(err, ErrShutDown) {
			t.Errorf("PING after Shutdown = %v, want ErrShutDown", err)
		}
		if got := c.AfterShutdown(); len(got) != 1 || got[0].Replica != 0 || got[0].Command != "ping" {
			t.Errorf("AfterShutdown = %+v, want the PING of replica 0", got)
		}
		c.Restart(0)
		time.Sleep(2 * time.Hour)
		if runs := c.Runs(); len(runs) < 3 {
			t.Errorf("%d runs after the Restart, want the hourly runs again", len(runs)-1)
		}
	})
}

// TestSkips pauses a leased job: the replica that records each slot
// skipped reports it, and Skips lists it with its reason.
func TestSkips(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := New(t, 2, func(rdb *redis.Client) []cron.Job {
			return []cron.Job{cron.Func("invoice", hourly, func(context.Context, cron.Tick) error { return nil },
				cron.WithLease(cron.LeaseConfig{DB: lock.NewDB(rdb)}))}
		})
		time.Sleep(time.Minute)
		if err := cron.NewAdmin(lock.NewDB(c.Client())).Pause(t.Context(), "invoice"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Hour)
		var paused []Skip
		for _, s := range c.Skips() {
			if s.Reason == cron.ReasonPaused {
				paused = append(paused, s)
			}
		}
		if len(paused) != 1 || paused[0].Job != "invoice" || !paused[0].Tick.Slot.Start.Equal(time.Date(2000, 1, 1, 1, 0, 0, 0, time.UTC)) {
			t.Errorf("paused skips %+v; want one, of the 01:00 slot", paused)
		}
	})
}
