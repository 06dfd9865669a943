// Package crontest tests cron jobs the way production runs them: several
// replicas over one Redis, with clocks that disagree, replicas that die and
// a Redis that goes away, on fake time, so that a week of hourly slots on three
// replicas runs in a fraction of a second.
//
// A [Cluster] runs inside a testing/synctest bubble: the test calls
// synctest.Test and calls [New] inside it, then moves time with time.Sleep
// and injects faults between sleeps. Each replica is a *cron.Runtime of its
// own, started by cron.Start with its own clock (cron.WithClock: the
// bubble's time plus the replica's offset), its own Redis client and its own
// copies of the jobs, which the test's function builds for it. The replicas
// share one embedded Redis (miniredis) that is served in memory inside the
// bubble, and whose keys expire by the bubble's clock, checked at every
// command: a lease taken for 55 minutes is held 55 minutes of fake time, not
// a nanosecond less or more.
//
//	func TestHourlyReport(t *testing.T) {
//		synctest.Test(t, func(t *testing.T) {
//			start := time.Now()
//			c := crontest.New(t, 3, func(rdb *redis.Client) []cron.Job {
//				return []cron.Job{NewHourlyReport(lock.NewDB(rdb))}
//			})
//			time.Sleep(24 * time.Hour)
//			c.Kill(1)
//			time.Sleep(24 * time.Hour)
//			c.OncePerSlot(t, "hourly-report")
//			c.NoSlotMissing(t, "hourly-report", start, time.Now())
//		})
//	}
//
// # Faults
//
// [Cluster.Kill] stops a replica the way a crash does, without
// cron.Runtime.Shutdown: its runs end there (recorded with [ErrKilled]),
// its Redis client sends nothing more, and its leases stay in Redis until
// they expire. [Cluster.Shutdown] stops one the way a deploy does, with
// cron.Runtime.Shutdown and a context of the test's: its runs go on while
// Shutdown waits, and once it returned the replica's client sends nothing
// more, as an exited process; a command it is asked for then is listed by
// [Cluster.AfterShutdown], which a test expects empty. [Cluster.Restart]
// starts a fresh runtime in the place of either.
// [Cluster.RedisDown] makes every Redis command of every replica fail for a
// while, as an unreachable server does; [Cluster.RedisStall] holds them for
// a while, as a busy server does; [Cluster.RedisRestart] empties Redis, as
// a restart without persistence does; [Cluster.RedisFailover] promotes a
// replica that lacks the last writes that no WAIT acknowledged, as a
// Sentinel does after the master's host crashed. [Cluster.StepClock] steps one
// replica's clock, as an NTP correction or a suspended machine does.
// [WithRedisLatency] gives each replica's commands a latency. The test's
// own client, [Cluster.Client], reads Redis through none of these faults,
// and serves an operator's commands (cron.Admin).
//
// # Jobs that change
//
// [Cluster.Add] adds a job to some replicas or to all, as
// cron.Runtime.Add does in a service that reads its jobs from a database,
// and [Cluster.Remove] removes one: adding a leased job to one replica and
// later to the others is a rolling deploy of it, and the assertions check
// that its slots still run once each. A restarted replica keeps what was
// added to it and removed from it.
//
// # Runs and assertions
//
// The cluster records every run of every replica through cron.Observer:
// which job, which replica, its tick (and so its slot), when it started and
// ended by the bubble's clock, and what it returned ([Cluster.Runs]), and
// every tick a replica reported skipped, with its reason ([Cluster.Skips]). The
// assertions ([Cluster.OncePerSlot], [Cluster.SucceededOncePerSlot] for
// a job that retries, [Cluster.NoSlotMissing], [Cluster.NoOverlap],
// [Cluster.AtMostConcurrent]) read that record and
// report what they find wrong through the testing.TB they are given, one
// Errorf per fault, naming the job, the slot and the replicas. They don't
// stop the test.
//
// Times in the record and in the assertions' arguments are the bubble's:
// time.Now() in the test. The bubble's clock starts at midnight UTC, so the
// replicas start at a slot's start unless the test sleeps first; a replica
// whose clock is behind then runs the previous slot at startup. Slots are the job's own, as each replica's clock
// computed them; only a Cron spec's slots have a key that every replica
// shares (interval.Slot.Key), so the slot assertions take jobs with a
// Cron spec (interval.Cron, interval.MustCron).
package crontest
