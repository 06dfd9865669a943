package cron

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wakuwaku-go/wakuwaku/interval"
)

// entry is a job and its scheduling state. It is what an idle job costs,
// with its 16-byte item in the queue (and, once jobs were added or
// removed, its place in Runtime.byName), so it is kept small: jobs that share a policy share one copy of it, the
// due time lives in the queue alone, and the count of active runs shares
// 32 bits with the job's flags.
//
// Replace changes job, every and admit in place, under Runtime.mu: a run
// reads them from its runArgs, which the tick copied.
type entry struct {
	job   Job
	name  string
	every *policy    // never nil; shared
	admit *admission // nil for a job whose runs need nothing but Process

	// state holds the runs in progress that a tick of its schedule
	// started (under stateRuns) and the flags stateQuick and
	// stateRemoved. A run's end lowers it without Runtime.mu.
	state atomic.Int32
	pos   int32  // its item's index in the queue, -1 if not queued; guarded by Runtime.mu
	ticks uint64 // ticks so far, skipped ones included; guarded by Runtime.mu
}

// The parts of entry.state.
const (
	stateRuns    = 1<<29 - 1 // the runs in progress
	stateRemoved = 1 << 29   // Remove took the job out: no tick or run starts any more
	stateQuick   = 1 << 30   // its last run took less than stragglerAfter
)

// runs returns how many of e's scheduled runs are in progress.
func (e *entry) runs() int { return int(e.state.Load() & stateRuns) }

// quick reports whether e's runs go to the workers (see workers.go).
func (e *entry) quick() bool { return e.state.Load()&stateQuick != 0 }

// setQuick sets or clears e's stateQuick.
func (e *entry) setQuick(quick bool) {
	if quick {
		e.state.Or(stateQuick)
	} else {
		e.state.And(^int32(stateQuick))
	}
}

// policy is the interval.Interval that jobs share, and the last plan it
// made: thousands of jobs of one policy due at one instant are planned
// once, not once each.
type policy struct {
	interval.Interval

	// The plan for a tick due at due and handled at now (Unix
	// nanoseconds), if planned, and how many jobs have the policy.
	// Guarded by Runtime.mu.
	due, now int64
	plan     interval.Plan
	planned  bool
	jobs     int
}

// planAt returns the plan of a tick due at due and handled at now, from
// the last one made if it was for the same two instants. Runtime.mu is held.
func (p *policy) planAt(due int64, now time.Time, nowNs int64) interval.Plan {
	if !p.planned || p.due != due || p.now != nowNs {
		p.plan = p.Plan(time.Unix(0, due), now)
		p.due, p.now, p.planned = due, nowNs, true
	}
	return p.plan
}

// admission is what the runtime keeps about a job whose runs need more
// than Process: an admission check, a lease, a run deadline. Only jobs
// with one of them have it, so that an idle job without costs no more
// than its entry.
type admission struct {
	check    Admission     // the caller's own, if any
	state    *jobState     // a Leased job's record
	lease    string        // the name of a Leased job's lease, for its log records
	deadline time.Duration // how long a run may take; 0 for no limit

	// The admission failures in a row, and when the first of them began
	// (Unix nanoseconds), so that an outage is logged once when it begins
	// and once when it ends. Only runs touch them, without Runtime.mu.
	failures    atomic.Uint32
	failedSince atomic.Int64
}

// leased returns a Leased job's record keeper, nil for another job.
func (ad *admission) leased() *jobState {
	if ad == nil {
		return nil
	}
	return ad.state
}

// waits reports whether a run of the job waits for more than its Process:
// an admission check, a lease's claim. A nil admission has neither.
func (ad *admission) waits() bool {
	return ad != nil && (ad.check != nil || ad.state != nil)
}

// due returns when e's tick for the slot of its schedule that starts at
// start is due: start, or later for a job whose interval spreads its
// runs (interval.Interval.WithSpread).
func (e *entry) due(start time.Time) int64 {
	return e.every.Due(e.name, start).UnixNano()
}

// dispatchChunk is how many due ticks dispatch takes from the queue at a
// time, under one reading of the clock, before it hands their runs to the
// workers as one chunk. Thousands of jobs due at once are handed out a
// chunk at a time, and the scheduler yields between chunks so that the
// workers get to run them before it takes more.
const dispatchChunk = 16

// runArgs is a run: what the scheduler decided at its tick, and what a
// worker needs to run it. They are reused (see getRun), so that a tick
// allocates nothing.
type runArgs struct {
	e *entry
	// What the tick read of e, which Replace may change while the run
	// goes on.
	job         Job
	every       *policy
	admit       *admission
	tick        Tick
	atFinish    bool
	next        time.Time // the next tick, if known as the run starts
	mode        claimMode // the event a leased job's claim is for
	slot        string    // the record's id of its slot, for modeRetry and modeFollow
	offSchedule bool      // not a tick of the schedule: E2 to E5 (see offSchedule)
	alone       bool      // run in a goroutine of its own, not in a worker

	// What the scheduler reports about the tick itself.
	skip   string        // the reason, if the tick is skipped
	late   time.Duration // how late the tick was, if it was late
	noMore bool          // the policy has no further tick: the job is done
}

// errGoexit is how a leased job's record reports a run that called
// runtime.Goexit.
var errGoexit = errors.New("cron: the job called runtime.Goexit")

// runs are the arguments of runs, reused: a tick allocates nothing.
var runs = sync.Pool{New: func() any { return new(runArgs) }}

func getRun() *runArgs { return runs.Get().(*runArgs) }

func putRun(a *runArgs) {
	*a = runArgs{}
	runs.Put(a)
}
