// Package cron runs jobs on their schedules: once when the runtime starts,
// then as each job's [interval.Interval] says, in every replica that starts
// them.
//
// A job is a value with two methods, [Job], or a function that [Func] makes
// one of. [Start] checks the jobs, starts each one's startup run at once and
// returns the [Runtime]; the runtime then starts every further run on time,
// and one job's slow run does not hold up another job's (see Cost).
// [Runtime.Shutdown] stops scheduling and waits for the runs in progress.
// While it runs, jobs are added ([Runtime.Add]), removed
// ([Runtime.Remove]), given a new interval or lease ([Runtime.Replace])
// and listed with their next tick ([Runtime.Jobs]), each in O(log n).
// Package crontest runs jobs on several replicas on fake time, for
// their tests.
//
// # Schedules
//
// When each run is due is the business of package interval, whose
// documentation states every policy's rules once: the startup run (and
// interval.Interval.WithoutStartupRun), late wake-ups, slots, daylight
// saving and "@every". At each tick the runtime asks the job's Interval for
// a plan (the slot the run belongs to, when the next tick is due) and
// queues what it answers. What the runtime adds: a tick that comes while
// the job's previous run is still going is skipped with
// [ReasonStillRunning], except under interval.AfterStart, whose runs may
// overlap up to [WithMaxOverlap] ([DefaultMaxOverlap]) and whose further
// ticks are skipped with [ReasonTooManyRuns].
//
// # Failures
//
// A run that returns an error is logged, reported to the [Observer], and the
// job keeps its schedule. A run that panics is recovered: the panic is logged
// with its stack, reported as a failed run with a *[PanicError], and the job
// keeps its schedule.
//
// # Deadlines, spread starts, traces
//
// A [Deadlined] job's run ends its context at its deadline, and is then a
// timeout. An interval.Interval.WithSpread spreads the runs of the jobs
// that share a schedule over each slot, each at an offset of its own. An
// [Observer] with RunContext hands Process a context of its own, such as
// one that carries the run's trace span.
//
// # Admission
//
// [WithAdmission] puts a check in front of every run of one job, the
// startup run included, before a [Leased] job's claim. A run the check
// refuses, or that the check fails for, is skipped and reported, and counts
// for the schedule as a run that took no time.
//
// # Cost
//
// The runtime has one scheduler goroutine and one timer, whatever the number
// of jobs: due times wait in a min-heap, and an idle job costs a small
// record on the heap (80 bytes, beside the job itself). The runs of quick
// jobs, whose last run took less than a millisecond, go to a pool of
// max(2, GOMAXPROCS) workers, in chunks when thousands are due at once;
// every other run (a job's first, a slow job's, one with an admission or a
// lease) gets a goroutine of its own for as long as it lasts. A quick job
// that turns slow delays the runs queued behind it in its worker by a
// millisecond at most: then another goroutine takes them, and the worker's
// place. A [Leased] job also has a record in Redis, and the
// runtime keeps one Pub/Sub subscription per Redis client of its leased
// jobs, on which run-now requests come ([Admin.RunNow]).
//
// # The record protocol
//
// How the replicas of a [Leased] job agree on who runs each slot, and what
// a retry, a catch-up, a pause or a run-now does to it, is stated once, as
// a table of a slot's states and the events that move it, in PROTOCOL.md
// beside this package's source. The scripts and the runtime cite its rows.
package cron
