package crontest

import (
	"context"
	"errors"
	"fmt"
	"runtime"
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

// hourly is in UTC, so that the slots start at the bubble's whole hours
// whatever the machine's zone.
var hourly = interval.MustCron("CRON_TZ=UTC 0 * * * *")

// report is a leased hourly job made from a type: its runs take work.
type report struct {
	db   lock.DB
	work time.Duration
}

func (r *report) Name() string                { return "report" }
func (r *report) Interval() interval.Interval { return hourly }
func (r *report) Lease() cron.LeaseConfig     { return cron.LeaseConfig{DB: r.db} }

func (r *report) Process(ctx context.Context, _ cron.Tick) error { return work(ctx, r.work) }

// unleased is the same job without a lease, from a type: it runs in every
// replica.
type unleased struct{ work time.Duration }

func (u *unleased) Name() string                                   { return "report" }
func (u *unleased) Interval() interval.Interval                    { return hourly }
func (u *unleased) Process(ctx context.Context, _ cron.Tick) error { return work(ctx, u.work) }

// work takes d, or until ctx ends.
func work(ctx context.Context, d time.Duration) error {
	select {
	case <-time.After(d):
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// jobKinds are the two ways to make one job, a type or cron.Func: every
// test that runs jobs runs both.
var jobKinds = []struct {
	name     string
	leased   func(work time.Duration) func(*redis.Client) []cron.Job
	unleased func(work time.Duration) func(*redis.Client) []cron.Job
}{
	{
		name: "type",
		leased: func(d time.Duration) func(*redis.Client) []cron.Job {
			return func(rdb *redis.Client) []cron.Job { return []cron.Job{&report{db: lock.NewDB(rdb), work: d}} }
		},
		unleased: func(d time.Duration) func(*redis.Client) []cron.Job {
			return func(*redis.Client) []cron.Job { return []cron.Job{&unleased{work: d}} }
		},
	},
	{
		name: "func",
		leased: func(d time.Duration) func(*redis.Client) []cron.Job {
			return func(rdb *redis.Client) []cron.Job {
				return []cron.Job{cron.Func("report", hourly, func(ctx context.Context, _ cron.Tick) error { return work(ctx, d) },
					cron.WithLease(cron.LeaseConfig{DB: lock.NewDB(rdb)}))}
			}
		},
		unleased: func(d time.Duration) func(*redis.Client) []cron.Job {
			return func(*redis.Client) []cron.Job {
				return []cron.Job{cron.Func("report", hourly, func(ctx context.Context, _ cron.Tick) error { return work(ctx, d) })}
			}
		},
	},
}

// fakeTB is a testing.TB that records what the assertions report instead
// of failing the test.
type fakeTB struct {
	testing.TB
	mu   sync.Mutex
	errs []string
}

func (f *fakeTB) Helper() {}

func (f *fakeTB) Errorf(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.errs = append(f.errs, fmt.Sprintf(format, args...))
}

// wantReported checks that the assertion reported n faults (n < 0: at
// least one), each containing every one of want.
func wantReported(t *testing.T, f *fakeTB, n int, want ...string) {
	t.Helper()
	if n >= 0 && len(f.errs) != n || n < 0 && len(f.errs) == 0 {
		t.Fatalf("reported %d faults, want %d: %q", len(f.errs), n, f.errs)
	}
	for _, e := range f.errs {
		for _, w := range want {
			if !strings.Contains(e, w) {
				t.Errorf("reported %q, want it to say %q", e, w)
			}
		}
	}
}

// checkAll runs every assertion on job over [from, to) and fails t with
// what they report.
func checkAll(t *testing.T, c *Cluster, job string, from, to time.Time) {
	t.Helper()
	c.OncePerSlot(t, job)
	c.NoSlotMissing(t, job, from, to)
	c.NoOverlap(t, job)
	c.AtMostConcurrent(t, job, 1)
}

// TestLeaseExpiresOnFakeTime checks that a key expires when the bubble's
// clock says so, not a nanosecond before or after.
func TestLeaseExpiresOnFakeTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := New(t, 1, func(*redis.Client) []cron.Job { return nil })
		db := lock.NewDB(c.Client())
		l := lock.New[string]("test", 55*time.Minute)
		ctx := t.Context()
		if tok, err := l.TryLock(ctx, db, "a"); tok == nil || err != nil {
			t.Fatalf("TryLock = %v, %v, want a token", tok, err)
		}
		time.Sleep(55*time.Minute - time.Nanosecond)
		if tok, err := l.TryLock(ctx, db, "a"); tok != nil || err != nil {
			t.Fatalf("TryLock a nanosecond before the lease ends = %v, %v, want nil, nil", tok, err)
		}
		time.Sleep(time.Nanosecond)
		if tok, err := l.TryLock(ctx, db, "a"); tok == nil || err != nil {
			t.Fatalf("TryLock as the lease ends = %v, %v, want a token", tok, err)
		}
	})
}

// TestLeasedJobRunsOncePerSlot runs a leased job on three replicas whose
// clocks disagree, for a day: every assertion holds.
func TestLeasedJobRunsOncePerSlot(t *testing.T) {
	for _, kind := range jobKinds {
		t.Run(kind.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				// Start mid-slot: a replica whose clock is behind by
				// more than the start's distance from the slot's start
				// would run the previous slot at startup.
				time.Sleep(30 * time.Minute)
				t0 := time.Now()
				c := New(t, 3, kind.leased(time.Minute), WithClockOffsets(0, 2*time.Second, -3*time.Minute))
				time.Sleep(24 * time.Hour)
				checkAll(t, c, "report", t0, time.Now())
				if runs := c.Runs(); len(runs) != 25 {
					t.Errorf("%d runs in a day, want 25 (the startup run, then 24 slots)", len(runs))
				}
			})
		})
	}
}

// TestKill checks that a killed replica's run ends at the kill with
// ErrKilled, that its lease stays until it expires, and that the replica
// runs nothing more.
func TestKill(t *testing.T) {
	for _, kind := range jobKinds {
		t.Run(kind.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				t0 := time.Now()
				c := New(t, 3, kind.leased(10*time.Minute), WithClockOffsets(0, 2*time.Second, 0))
				time.Sleep(time.Hour + time.Minute)
				// Kill the replica that runs slot 01:00 (its owner).
				victim := -1
				for _, r := range c.Runs() {
					if r.Tick.Slot.Start.Equal(t0.Add(time.Hour)) {
						victim = r.Replica
					}
				}
				if victim < 0 {
					t.Fatalf("no replica runs slot 01:00 at 01:01: %v", c.Runs())
				}
				c.Kill(victim)
				killed := time.Now()
				var last Run
				for _, r := range c.Runs() {
					if r.Replica == victim {
						last = r
					}
				}
				if slot := t0.Add(time.Hour); !last.Tick.Slot.Start.Equal(slot) || !errors.Is(last.Err, ErrKilled) || !last.End.Equal(killed) {
					t.Errorf("replica %d's last run = slot %v, %v, ended %v; want slot %v, ErrKilled, ended %v",
						victim, last.Tick.Slot.Start, last.Err, last.End, slot, killed)
				}
				name := fmt.Sprintf("replica-%d", victim)
				// The killed run holds the job under its run lease, which
				// nobody extends any more: the record says so, and then
				// that the run was lost.
				admin := cron.NewAdmin(lock.NewDB(c.Client()))
				st, err := admin.Status(t.Context(), "report")
				if err != nil || st.Running == nil || st.Running.Replica != name {
					t.Errorf("Status(report) after the kill = %+v, %v; want a run in progress on %s", st.Running, err, name)
				}
				time.Sleep(3 * time.Hour)
				for _, r := range c.Runs() {
					if r.Replica == victim && r.Start.After(killed) {
						t.Errorf("killed replica %d ran slot %v", victim, r.Tick.Slot)
					}
				}
				st, err = admin.Status(t.Context(), "report")
				if f := st.LastFailure; err != nil || f == nil || f.Replica != name || f.Outcome != "lost" {
					t.Errorf("Status(report).LastFailure = %+v, %v; want %s's run, lost", f, err, name)
				}
				checkAll(t, c, "report", t0, time.Now())
			})
		})
	}
}

// TestRestart checks that a restarted replica gets a fresh runtime: its
// startup run finds its slot's lease held, and each later slot runs once.
func TestRestart(t *testing.T) {
	for _, kind := range jobKinds {
		t.Run(kind.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				t0 := time.Now()
				c := New(t, 2, kind.leased(time.Minute), WithClockOffsets(0, 2*time.Second))
				time.Sleep(90 * time.Minute)
				c.Kill(1)
				time.Sleep(10 * time.Minute)
				c.Restart(1)
				c.Restart(1) // a restart of a replica that is up kills it first
				time.Sleep(2 * time.Hour)
				var got []string
				for _, r := range c.Runs() {
					got = append(got, r.Tick.Slot.Start.Sub(t0).String())
				}
				// One run a slot, on whichever replica owns it: replica 1's
				// restarts' startup runs found 01:00's lease held.
				if want := "0s 1h0m0s 2h0m0s 3h0m0s"; strings.Join(got, " ") != want {
					t.Errorf("runs of slots %q, want %q", got, want)
				}
				checkAll(t, c, "report", t0, time.Now())
			})
		})
	}
}

// TestStartDelays checks that a delayed replica starts late, and that its
// startup run finds the slot's lease held.
func TestStartDelays(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		t0 := time.Now()
		c := New(t, 2, jobKinds[0].leased(time.Minute), WithStartDelays(0, 90*time.Minute), WithClockOffsets(0, 2*time.Second))
		time.Sleep(3*time.Hour + time.Minute)
		var got []string
		for _, r := range c.Runs() {
			got = append(got, fmt.Sprintf("%d@%s", r.Replica, r.Tick.Slot.Start.Sub(t0)))
		}
		// Replica 0 alone runs 00:00 and 01:00; replica 1's startup run at
		// 01:30 finds 01:00's lease held; from 02:00 each slot runs once,
		// on the replica that owns it (PROTOCOL.md, owners and looks).
		if len(got) != 4 || strings.Join(got[:2], " ") != "0@0s 0@1h0m0s" ||
			!strings.HasSuffix(got[2], "@2h0m0s") || !strings.HasSuffix(got[3], "@3h0m0s") {
			t.Errorf("runs = %q, want 0@0s 0@1h0m0s, then one run of 2h0m0s and one of 3h0m0s", got)
		}
		checkAll(t, c, "report", t0, time.Now())
	})
}

// TestRedisDown checks that a slot whose ticks and the rest of its hour
// fall in an outage is missed, fail closed, that NoSlotMissing says why,
// and that the job runs again once Redis is back: the next slot, whose
// ticks fell in the outage too, runs late (PROTOCOL.md, after the
// transitions).
func TestRedisDown(t *testing.T) {
	for _, kind := range jobKinds {
		t.Run(kind.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				t0 := time.Now()
				c := New(t, 3, kind.leased(time.Minute), WithClockOffsets(0, 2*time.Second, -3*time.Minute))
				time.Sleep(2*time.Hour + 58*time.Minute)
				c.RedisDown(67 * time.Minute) // to 04:05
				if err := c.Client().Ping(t.Context()).Err(); err != nil {
					t.Errorf("a client outside the cluster: Ping = %v, want nil", err)
				}
				time.Sleep(2 * time.Hour)
				end := time.Now()
				// Slot 00:00 is skipped: replica 2, whose clock is 3
				// minutes behind, starts with a run of slot 23:00, which
				// holds the job at the others' ticks of 00:00, and the
				// first of them records the slot skipped (PROTOCOL.md,
				// R20).
				from := t0.Add(time.Minute)
				var f fakeTB
				c.NoSlotMissing(&f, "report", from, end)
				slot := t0.Add(3 * time.Hour).UTC().Format(time.RFC3339)
				wantReported(t, &f, 1, "did not run slot "+slot, "replica 0 skipped it: admission failed", "replica 1 skipped it", "replica 2 skipped it", "redis is unreachable")
				c.OncePerSlot(t, "report")
				c.NoSlotMissing(t, "report", from, t0.Add(3*time.Hour))
				c.NoSlotMissing(t, "report", t0.Add(3*time.Hour+time.Nanosecond), end)
			})
		})
	}
}

// TestStepClock checks that a replica whose clock is stepped ticks by its
// new reading, and that a lease keeps a stepped replica from running a
// slot twice.
func TestStepClock(t *testing.T) {
	t.Run("ticks by the new reading", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			t0 := time.Now()
			c := New(t, 1, jobKinds[1].unleased(0))
			time.Sleep(10 * time.Minute)
			c.StepClock(0, 30*time.Minute) // the clock reads 00:40
			time.Sleep(90 * time.Minute)
			// The runtime's timer waits on the monotonic clock: the
			// tick it set for 01:00 comes at 01:00 by the bubble, which
			// the replica reads as 01:30, and the next one is set by the
			// new reading: 02:00, at 01:30 by the bubble.
			var got []string
			for _, r := range c.Runs() {
				got = append(got, fmt.Sprintf("slot %s at %s", r.Tick.Slot.Start.Sub(t0), r.Start.Sub(t0)))
			}
			if want := "slot 0s at 0s|slot 1h0m0s at 1h0m0s|slot 2h0m0s at 1h30m0s"; strings.Join(got, "|") != want {
				t.Errorf("runs = %q, want %q", got, want)
			}
		})
	})
	for _, kind := range jobKinds {
		t.Run("leased "+kind.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				t0 := time.Now()
				c := New(t, 3, kind.leased(time.Minute))
				time.Sleep(90 * time.Minute)
				c.StepClock(2, -45*time.Minute) // reads 00:45: slot 01:00 again at 01:45
				time.Sleep(3 * time.Hour)
				checkAll(t, c, "report", t0, time.Now())
			})
		})
	}
}

// TestAssertionsFail checks that each assertion reports a job that breaks
// it, naming the slot and the replicas, to a TB that records it.
func TestAssertionsFail(t *testing.T) {
	for _, kind := range jobKinds {
		t.Run("no lease "+kind.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				t0 := time.Now()
				c := New(t, 3, kind.unleased(10*time.Minute))
				time.Sleep(3*time.Hour - time.Minute)

				var once fakeTB
				c.OncePerSlot(&once, "report")
				wantReported(t, &once, 3, "OncePerSlot", "3 times", "replica 0's run", "replica 1's run", "replica 2's run")
				if !strings.Contains(once.errs[1], "ran slot "+t0.Add(time.Hour).UTC().Format(time.RFC3339)) {
					t.Errorf("OncePerSlot's second report = %q, want it to name slot 01:00", once.errs[1])
				}
				var overlap fakeTB
				c.NoOverlap(&overlap, "report")
				wantReported(t, &overlap, 6, "NoOverlap", "ran twice at once")
				var concurrent fakeTB
				c.AtMostConcurrent(&concurrent, "report", 2)
				wantReported(t, &concurrent, 1, "3 runs at once", "want at most 2")
				var all fakeTB
				c.AtMostConcurrent(&all, "", 3)
				wantReported(t, &all, 0)
				// Without a lease, nothing is missing.
				c.NoSlotMissing(t, "report", t0, time.Now())
			})
		})
	}
	t.Run("lease longer than the interval", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			t0 := time.Now()
			// An admission shared by the replicas that takes a lease of
			// 61 minutes for the job, whatever the slot: the next slot's
			// ticks find it held, so every other slot is missed.
			var mu sync.Mutex
			var heldUntil time.Time
			admit := func(context.Context, cron.Tick) (bool, string, error) {
				mu.Lock()
				defer mu.Unlock()
				if time.Now().Before(heldUntil) {
					return false, "held", nil
				}
				heldUntil = time.Now().Add(61 * time.Minute)
				return true, "", nil
			}
			c := New(t, 3, jobKinds[1].unleased(time.Minute), WithCronOptions(cron.WithAdmission("report", admit)))
			time.Sleep(4*time.Hour + time.Minute)
			var f fakeTB
			c.NoSlotMissing(&f, "report", t0, time.Now())
			wantReported(t, &f, 2, "NoSlotMissing", "did not run slot", "replica 0 skipped it: held", "replica 2 skipped it: held")
			for i, hour := range []int{1, 3} {
				if slot := t0.Add(time.Duration(hour) * time.Hour).UTC().Format(time.RFC3339); !strings.Contains(f.errs[i], slot) {
					t.Errorf("NoSlotMissing's report %d = %q, want slot %s", i, f.errs[i], slot)
				}
			}
			c.OncePerSlot(t, "report")
		})
	})
	t.Run("misuse", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			c := New(t, 1, func(*redis.Client) []cron.Job {
				return []cron.Job{cron.Func("every", interval.AtLeast(time.Hour), func(context.Context, cron.Tick) error { return nil })}
			})
			time.Sleep(time.Minute)
			var unknown fakeTB
			c.NoOverlap(&unknown, "typo")
			wantReported(t, &unknown, 1, `no job named "typo"`, `["every"]`)
			var keyless fakeTB
			c.OncePerSlot(&keyless, "every")
			wantReported(t, &keyless, 1, "needs a Cron spec")
			var noSlots fakeTB
			c.NoSlotMissing(&noSlots, "every", time.Now().Add(-time.Hour), time.Now())
			wantReported(t, &noSlots, 1, "needs a Cron spec")
			var empty fakeTB
			c.OncePerSlot(&empty, "")
			wantReported(t, &empty, 1, `OncePerSlot: the cluster runs no job named ""`)
		})
	})
}

// TestRedisDownFailsJobsCommands checks that an outage fails the jobs' own
// Redis commands too, and only while it lasts.
func TestRedisDownFailsJobsCommands(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		t0 := time.Now()
		c := New(t, 1, func(rdb *redis.Client) []cron.Job {
			return []cron.Job{cron.Func("count", interval.MustCron("CRON_TZ=UTC * * * * *"), func(ctx context.Context, _ cron.Tick) error {
				return rdb.Incr(ctx, "count").Err()
			})}
		})
		time.Sleep(30 * time.Second)
		c.RedisDown(2 * time.Minute) // until 00:02:30
		time.Sleep(3 * time.Minute)
		var got []string
		for _, r := range c.Runs() {
			got = append(got, fmt.Sprintf("%s %v", r.Tick.Slot.Start.Sub(t0), r.Err))
		}
		want := "0s <nil>|1m0s crontest: redis is unreachable|2m0s crontest: redis is unreachable|3m0s <nil>"
		if strings.Join(got, "|") != want {
			t.Errorf("runs = %q, want %q", got, want)
		}
		if n, err := c.Client().Get(t.Context(), "count").Int(); n != 2 || err != nil {
			t.Errorf("GET count = %d, %v, want 2", n, err)
		}
	})
}

// TestKilledReplicaSendsNothing checks that a killed replica's run has its
// context cancelled and that its client sends nothing to Redis afterwards.
func TestKilledReplicaSendsNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		after := make(chan error, 1)
		c := New(t, 1, func(rdb *redis.Client) []cron.Job {
			return []cron.Job{cron.Func("long", hourly, func(ctx context.Context, _ cron.Tick) error {
				<-ctx.Done()
				after <- rdb.Set(context.Background(), "after", 1, 0).Err()
				return context.Cause(ctx)
			})}
		})
		time.Sleep(30 * time.Second)
		c.Kill(0)
		if err := <-after; !errors.Is(err, ErrKilled) {
			t.Errorf("SET after the kill = %v, want ErrKilled", err)
		}
		if n, err := c.Client().Exists(t.Context(), "after").Result(); n != 0 || err != nil {
			t.Errorf("EXISTS after = %d, %v, want 0", n, err)
		}
		runs := c.Runs()
		if len(runs) != 1 || !errors.Is(runs[0].Err, ErrKilled) || runs[0].End.Sub(runs[0].Start) != 30*time.Second {
			t.Errorf("runs = %+v, want one killed after 30s", runs)
		}
	})
}

// fatalTB is a testing.TB whose Fatal records the message and ends the
// goroutine, as testing.T's does.
type fatalTB struct {
	fakeTB
}

func (f *fatalTB) Fatal(args ...any) {
	f.errs = append(f.errs, fmt.Sprint(args...))
	runtime.Goexit()
}

func (f *fatalTB) Fatalf(format string, args ...any) {
	f.errs = append(f.errs, fmt.Sprintf(format, args...))
	runtime.Goexit()
}

// TestNewRefuses checks that New fails the test, before it starts
// anything, on invalid arguments.
func TestNewRefuses(t *testing.T) {
	none := func(*redis.Client) []cron.Job { return nil }
	tests := []struct {
		name     string
		replicas int
		opts     []Option
		want     string
	}{
		{"no replicas", 0, nil, "want at least 1"},
		{"negative delay", 2, []Option{WithStartDelays(0, -time.Second)}, "replica 1's delay -1s is negative"},
		{"negative latency", 2, []Option{WithRedisLatency(-time.Millisecond)}, "replica 0's latency -1ms is negative"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var f fatalTB
			done := make(chan struct{})
			go func() {
				defer close(done)
				New(&f, tc.replicas, none, tc.opts...)
			}()
			<-done
			if len(f.errs) != 1 || !strings.Contains(f.errs[0], tc.want) {
				t.Errorf("New failed with %q, want one failure saying %q", f.errs, tc.want)
			}
		})
	}
}

// TestSucceededOncePerSlot runs an hourly job whose first attempt at each
// slot fails: leased with two attempts, each slot succeeds once and the
// assertion is quiet where OncePerSlot reports every slot; without a
// lease, every replica succeeds at every slot; with one attempt, no slot
// succeeds.
func TestSucceededOncePerSlot(t *testing.T) {
	// flaky fails the first attempt at each slot, counted across replicas.
	flaky := func(attempts int, leased bool) func(*redis.Client) []cron.Job {
		var mu sync.Mutex
		tries := map[time.Time]int{}
		return func(rdb *redis.Client) []cron.Job {
			run := func(_ context.Context, tick cron.Tick) error {
				mu.Lock()
				defer mu.Unlock()
				if tries[tick.Slot.Start]++; tries[tick.Slot.Start] == 1 {
					return errors.New("first attempt fails")
				}
				return nil
			}
			var opts []cron.FuncOption
			if leased {
				opts = append(opts, cron.WithLease(cron.LeaseConfig{DB: lock.NewDB(rdb), Attempts: attempts, Backoff: time.Minute}))
			}
			return []cron.Job{cron.Func("report", hourly, run, opts...)}
		}
	}
	for _, tc := range []struct {
		name     string
		attempts int
		leased   bool
		faults   int
		want     string
	}{
		{"leased, two attempts", 2, true, 0, ""},
		{"leased, one attempt", 1, true, 5, "did not succeed at slot"},
		{"not leased", 1, false, 5, "succeeded 2 times at slot"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c := New(t, 3, flaky(tc.attempts, tc.leased))
				time.Sleep(5*time.Hour - time.Second) // the slots of 01:00 to 04:00, and the startup run's
				var f fakeTB
				c.SucceededOncePerSlot(&f, "report")
				wantReported(t, &f, tc.faults, tc.want)
				if tc.attempts == 2 {
					var once fakeTB
					c.OncePerSlot(&once, "report")
					wantReported(t, &once, 5, "ran slot")
				}
			})
		})
	}
}
