// Package cronsim is a deterministic, seeded simulator of the leased-job
// record protocol (see cron.Leased): it runs three replicas of real
// cron.Runtimes, the record's real scripts and a shared miniredis, on the
// fake time of a testing/synctest bubble through package crontest, drives
// them through faults and operators' commands that a seed draws, and
// checks the protocol's invariants on what happened.
//
// It is black-box: it sees only what package cron shows any user, the
// runs (crontest's record of cron.Observer), the runtime's Warn and Error
// log records, cron.Admin, and the record's Redis key and fields as the
// README documents them, which it reads with the runtime's own reading of
// the stored format (internal/recordfmt); so it keeps working when the
// protocol changes inside.
//
// # A scenario
//
// [Generate] draws a [Scenario] from a seed: the replicas' clock offsets
// (within 3 s) and Redis latencies (1 to 4 ms, all distinct), two to four
// leased jobs (a Cron spec, hourly, every 15 minutes, business hours
// "*/15 9-17 * * 1-5" or every two hours; or an AtLeast or AfterFinish
// policy of 30 minutes to 2 hours), each with 1 to 3 attempts per slot,
// sometimes no startup run and a catch-up window, a run lease and a
// back-off, a second release (another schedule or other attempts) for a
// rolling deploy, and plans for the first run of a third of its slots,
// some of their retries and some requested runs: fail, panic, run slow
// (up to one and a half intervals), or ignore cancellation. Then
// about one event an hour: a replica crash (with a restart at once or up
// to 3 hours later), Redis down (up to 15 minutes), stalled (up to 3
// minutes) or restarted empty, a clock step and its correction, a pause
// and its resume, a run-now request, or a rolling deploy of a job's second
// release. Half the seeds run with a DB that waits for a replica
// (lock.WithReplicas), and about one in eight simulated hours, from a
// stream of its own, Redis fails over to its replica (crontest's
// RedisFailover: the writes of the last 1 to 20 ms that no WAIT
// acknowledged are lost, and Redis is down for 1 to 30 s), three times
// in four just as a replica's claim of a Cron slot reaches it. From a
// third stream, the knobs and faults that came later: each release of a
// job may have a spread (a Cron spec's WithSpread), a slot TTL, a
// history length and a run deadline (which slow runs overrun); a third
// release that Replace puts in place on one running replica or on each
// in turn; a job that Remove takes out of a replica and Add puts back;
// clients with only Process (no Pipelined) on some replicas, beside
// ordinary ones; SCRIPT FLUSH, and replies lost after Redis executed the
// command (crontest's LoseReplies: the client sends it again), mostly as
// a Cron slot's claims reach Redis; and a replica's process frozen for up
// to 45 s (crontest's Freeze). A third of the seeds also kill a replica
// in the run of a Cron slot it claimed at its tick, while a stall longer
// than the run lease holds the other replicas' looks at the slot (they
// then find its lease expired, and only they can retry it). A third of
// the seeds with a duration policy of two or more attempts replace that
// job on every replica while a run of it that will fail goes on. One
// seed in 40 adds a crowd: 20 to 100 leased jobs of one daily Cron
// spec due once, whose runs end among the looks (E13) two seconds after
// the tick, with the batching client's batches bounded at 2 to 8
// commands (a test hook, internal/cronhook), so that batches fill and its
// bound on completions queued behind claims and looks decides; half of
// those flush the scripts just before the tick beside a client with only
// Process, and two in three of their other replicas' clients are
// go-redis's AutoPipeliner, blocking or asynchronous. The simulation
// does not read a crowd's records every five minutes (I7). From a fourth
// stream (left out with -sim.noops), the everyday operations at their
// awkward moments, about one every two hours: a rolling deploy (each
// replica in turn shut down gracefully with crontest's Shutdown, a
// deadline short, long or none, then started again) or a recreate (every
// replica shut down at once), aimed at a Cron slot's looks, at its run's
// end with a blip of Redis that fails the completion on whichever replica
// ran it (so that Shutdown comes while its resend waits out a back-off),
// or at the back-off after a failed first attempt; a Replace of a spread
// job on every replica inside its slot's spread window; Redis restarted
// empty in the middle of a slot's long first run, with attempts to spare;
// and a start shut down at once, as its announcement goes. [Simulate] plays it and returns its
// [History]; the same scenario gives the same history to the nanosecond:
// no two replicas act at one instant of the bubble's clock. A crowd's
// seed is the exception: one replica's record commands of one instant
// reach its batching client, and the AutoPipeliner's flushers, in the
// order the Go scheduler runs their goroutines, so it may replay a few
// milliseconds apart.
//
// # The invariants
//
// [Check] reports a [Violation] of:
//
//   - I1: never two runs of a job at once while its record survives. A run
//     lasts until it returned or its context ended (a job that ignores its
//     context is on its own). Redis losing every key excuses an overlap
//     for a run lease after it, not longer: the run from before it loses
//     its lease at its next heartbeat.
//   - I2: a slot's runs that no operator requested are at most its
//     attempts (the most that any release of the job gives). A duration
//     policy's slots are each replica's own, so its runs are grouped into
//     slots by trigger: a run of the schedule or a catch-up opens one, a
//     retry belongs to the last one; and a slot must not open before the
//     lease of the last one ran out (11/12 of the interval from the tick
//     that opened it, read on that replica's clock); and a failed attempt
//     whose completion Redis recorded leaves its slot waiting for the
//     back-off.
//   - I3: no such run of a slot after a run closed it, done or failed
//     after its last attempt, and Redis recorded that.
//   - I4: a Cron slot at whose tick a replica was up, Redis well and the
//     job not paused, ends in an outcome a user can see: it runs, or a
//     replica's claim records it skipped (R20, which that replica says at
//     Warn), or its claim is not acknowledged by the replicas (R17: C1
//     records the attempt lost); a Cron slot whose last run failed with attempts left runs
//     again once Redis is well long enough within the slot, if a replica
//     stayed up and Redis kept the record, and no replica up meanwhile ran
//     a release that gives the slot no more attempts than it had (a
//     rolling deploy that lowers Attempts closes the slot as failed at
//     that replica's claim), and a replica's release still lets it claim
//     the slot when the retry is due (a deploy that shortens the interval
//     shortens the slot's claim window); a duration policy's job is never idle for more than two
//     intervals and a run lease while a replica is up, Redis well and the
//     job not paused, unless a replica warns; and a duration policy's slot
//     whose last run failed with attempts left runs again within its
//     lease, once the back-off passed, if the replica that ran it kept
//     the job (a Replace that keeps the record keeps the retry), Redis
//     well and the job not paused, unless that replica warns; and no
//     replica skips a tick as "admission failed" while Redis was well for
//     it (its process running, its replies coming back) for 10 s before,
//     but for a command that timed out (miniredis over net.Pipe makes a
//     long pipeline wait out the write timeout).
//   - I5: no run of the schedule, retry or catch-up while the job is paused.
//   - I6: one run per run-now request: no requested run without a request
//     waiting (several requests before a run make one), and a request runs
//     within 5 s, or 5 s after the runs in progress return.
//   - I7: the record outlives every claimable slot it names: read every
//     five minutes, its TTL reaches past the end of the named slot's lease.
//   - I8: a catch-up never runs a slot from before the job first started.
//   - I9: a run that the record no longer names (Redis lost every key by a
//     restart) or whose lease its replica could not extend (Redis down or
//     stalled, or the replica's process frozen, for longer than a run
//     lease) is cancelled within a run lease.
//   - I10: a Cron slot recorded skipped (R20) has no run but requested
//     ones, while Redis keeps the record.
//   - I11: a replica's batching client sends a batch of completions that
//     waits at the head of its queue after at most 4 batches of claims and
//     looks went first (its hooks in internal/cronhook tell the queues).
//   - I12: no command from a replica after its Shutdown returned
//     (crontest's AfterShutdown).
//   - I13: a run that returned, with its lease surely held and Redis
//     well long enough for a resend (R13) before its run lease and its
//     Shutdown's context ended, has its own outcome in the history (read
//     every five minutes, and before each restart or failover), never
//     lost; so has a run that returned before a Shutdown that returned
//     nil.
//   - I14: one outcome per slot, said once: each skip the history holds
//     is reported (Observer.RunSkipped, with its reason) by the replica
//     whose claim recorded it, once; no replica reports a skip with a
//     recorded skip's reason (still running, paused) that the history
//     lacks, but a duration policy's tick while that replica's own run
//     goes on (a Warn-only ending); and Admin.Status lists each run once.
//   - I15: a Cron slot whose run a Redis restarted empty cut short, with
//     attempts to spare in every release, runs again, if its replica
//     stayed up with Redis well and the job not paused or replaced until
//     well within the slot's claim window.
//   - I16: every run has a fence (F1), above that of a run that returned
//     before it began, and a fenced store that each run writes as it
//     returns never takes a run's write after the write of a run begun
//     later (a run whose replica froze between its claim and its start
//     aside).
//
// And I4 checks the skips of R2 (ReasonStillRunning) that a claim
// recorded: a run held the job when the tick was due (or Redis recorded
// so).
//
// They are weakened only where the protocol promises less: Redis losing
// every key forgets pauses, requests and slots (I1, I2, I3, I5, I6), and
// so does a failover without WithReplicas (with it, a failover is only
// an outage); a
// replica whose clock is more than 10 s off, or was stepped, lets slots go
// (I4, and I2's lease spacing); a killed replica holds the job for its run
// lease; and nothing is owed while Redis is down or stalled. A slot that
// only one replica's start claimed is owed its retry like any other: the
// start's follow notice (E14) tells the other replicas (seeds 2005375 and
// 4001036 once found it lost).
//
// # Running it
//
// TestSimulate runs a handful of seeds by default, and:
//
//	go test -run 'TestSimulate$' ./proof/internal/cronsim/ -sim.seeds=500      # seeds 0 to 499
//	go test -run 'TestSimulate$' ./proof/internal/cronsim/ -sim.from=500 -sim.seeds=500
//	go test -run 'TestSimulate$' ./proof/internal/cronsim/ -sim.long           # 100,000 seeds
//	go test -run 'TestSimulate$' ./proof/internal/cronsim/ -sim.seed=17 -v     # replay one, with its trace
//	go test -run 'TestSimulate$' ./proof/internal/cronsim/ -sim.seeds=500 -sim.all -sim.cover -v   # and the seeds that reached each path
//
// Beside its range, TestSimulate runs the seeds that cron/PROTOCOL.md,
// RELIABILITY.md and this package cite (but under -race). The summary line
// says how many of [Paths] (the knobs, faults and protocol paths) the
// seeds reached; -sim.cover lists how many seeds reached each; and with
// -sim.all on 500 seeds or more, CI's configuration, a path that no seed
// reached fails the run.
//
// Each seed simulates 8 hours unless -sim.span says otherwise. A range
// stops at its first failing seed (-sim.all goes on, lists every failing
// seed, and reports the first failing seed of each invariant). A failure
// names the seed, how many seeds of the range it took to find it, the
// command that replays it, and the scenario shrunk by delta debugging to
// the events and run plans that it still needs, with the trace of its job.
// -sim.ignore=I4,I8 leaves invariants out. With -v, a range of more than
// 1,000 seeds prints a progress line every 1,000.
//
// A change that must not change behaviour (a refactoring) is proven by
// the traces: -sim.digests=FILE writes a digest of each seed's trace, as
// -sim.seed -v prints it, and -sim.against=FILE, on the changed build,
// fails each seed whose trace differs. A seed that drew a crowd is marked
// and not failed: its replays may differ by milliseconds.
//
//	go test -run 'TestSimulate$' ./proof/internal/cronsim/ -sim.seeds=20000 -sim.all -sim.digests=/tmp/before.txt
//	go test -run 'TestSimulate$' ./proof/internal/cronsim/ -sim.seeds=20000 -sim.all -sim.against=/tmp/before.txt
//
// The long mode's 100,000 seeds take about 6 hours of CPU: 0.21 s a seed
// on one worker, with the everyday operations and the histories' reads
// (0.17 s before them). Split them into ranges (-sim.from=0 -sim.seeds=5000,
// -sim.from=5000 -sim.seeds=5000, ...) so that each reports as it ends,
// and give each core a process of its own with GOMAXPROCS=1: one process
// whose workers share two cores spends about a third more CPU a seed, its
// seeds' goroutines waking each other across the cores. On a machine of
// two cores the long run takes about 3 hours that way.
package cronsim
