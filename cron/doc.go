// Package cron runs jobs on their schedules: once when the runtime starts,
// then as each job's [interval.Interval] says, in every replica that starts
// them.
//
// A job is a value with two methods, [Job]. [Start] checks the jobs, starts
// each one's startup run at once and returns the [Runtime]; the runtime then
// starts every further run on time, each in a goroutine of its own, so one
// job's slow run never delays another job. [Runtime.Shutdown] stops
// scheduling and waits for the runs in progress.
//
// # Schedules
//
// The policies are those of package interval, applied by one replica:
//
//   - interval.AtLeast(d): runs never overlap and start at least d apart;
//   - interval.AfterFinish(d): runs never overlap; each starts d after the
//     previous one finished;
//   - interval.AfterStart(d): each starts d after the previous one was due,
//     finished or not; at most [DefaultMaxOverlap] runs of a job overlap
//     (see [WithMaxOverlap]), and a tick that would start one more is
//     skipped;
//   - interval.Cron(spec): runs start at the spec's slots; a slot that comes
//     while the previous run is still going is skipped, not queued.
//
// A process that wakes up late (a stalled machine, a clock step) does not
// make up the ticks it missed: a job more than one period behind runs once,
// and its schedule goes on from then. A Cron job runs its latest missed
// slot once.
//
// # Failures
//
// A run that returns an error is logged, reported to the [Observer], and the
// job keeps its schedule. A run that panics is recovered: the panic is logged
// with its stack, reported as a failed run with a *[PanicError], and the job
// keeps its schedule.
//
// # Admission
//
// [WithAdmission] puts a check in front of every run of one job, the
// startup run included: a lease that makes a job run once per interval
// across replicas is taken there. A run the check refuses, or that the check
// fails for, is skipped and reported, and counts for the schedule as a run
// that took no time.
//
// # Cost
//
// The runtime has one scheduler goroutine and one timer, whatever the number
// of jobs: due times wait in a min-heap, and a goroutine exists for a job
// only while one of its runs is in progress. An idle job costs a small
// record on the heap.
package cron
