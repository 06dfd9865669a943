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
// README documents them; so it keeps working when the protocol changes
// inside.
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
// rolling deploy, and a plan for a third of its runs: fail, panic, run
// slow (up to one and a half intervals), or ignore cancellation. Then
// about one event an hour: a replica crash (with a restart at once or up
// to 3 hours later), Redis down (up to 15 minutes), stalled (up to 3
// minutes) or restarted empty, a clock step and its correction, a pause
// and its resume, a run-now request, or a rolling deploy of a job's second
// release. [Simulate] plays it and returns its [History]; the same
// scenario gives the same history to the nanosecond: no two replicas act
// at one instant of the bubble's clock.
package cronsim
