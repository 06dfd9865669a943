package cron

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/wakuwaku-go/wakuwaku/internal/typednil"
	"github.com/wakuwaku-go/wakuwaku/interval"
)

// Job is work that runs on a schedule.
//
// Interval says when the job runs; the runtime calls it once, when the job
// is started or added, so a job's schedule changes only by
// [Runtime.Replace]. Process does one run. Its context is cancelled, with
// cause [ErrShutdown], when [Runtime.Shutdown] gives up waiting, with
// [ErrRemoved] when [Runtime.Remove] does, and with [ErrRunDeadline] at a
// [Deadlined] job's deadline; a job that honours it lets them finish in
// time. Process may be called from several goroutines at once for
// an [interval.AfterStart] job whose runs overlap.
//
// A job's name, which logs, ticks and [WithAdmission] use, is what its
// Name() string method returns when it has one, else its Go type (see
// [JobName]). A [Leased] job must name its lease itself: with a Name method
// or [LeaseConfig.Name].
type Job interface {
	Interval() interval.Interval
	Process(ctx context.Context, tick Tick) error
}

// Tick describes one run of a job. It is handed to [Job.Process], to the
// admission check and to the [Observer].
type Tick struct {
	// Scheduled is when the run was due: the runtime's start for the
	// startup run, and the slot itself for a Cron job's tick, so a job can
	// key its work by it (with interval.Interval.WithSpread, the slot's
	// start plus the job's offset: key it by Slot then). A run that starts
	// late still carries the time it was due (a Cron job that woke up
	// late: the latest slot it missed).
	Scheduled time.Time
	// Slot is the slot the run belongs to, as package interval defines
	// it: for a Cron job, one that every replica names alike
	// ([interval.Slot.Key]), and the one a leased job's lease is taken for.
	Slot interval.Slot
	// Started is when the runtime's scheduler handed the run out, before
	// the admission check, if any. With thousands of runs due at once, a
	// run's Process may begin a few milliseconds after it.
	Started time.Time
	// Job is the job's name.
	Job string
	// Run numbers the job's ticks: 1 for the first (the startup run,
	// unless the job has none), then 2, 3, ... A tick that was skipped
	// uses its number too, so the runs that happened may leave gaps.
	Run uint64
	// Attempt numbers the runs of the slot: 1 for the first, 2 for the
	// first retry of a [Leased] job whose LeaseConfig.Attempts allows one.
	Attempt int
	// Trigger says why the run happens: its schedule, unless a leased job
	// retries a slot, catches one up or runs on request.
	Trigger Trigger
	// Fence is a [Leased] job's fencing number for this run: strictly
	// greater than that of every run of the job claimed before it, on any
	// replica, whatever its slot, attempt or trigger, across restarts of
	// the runtime and a record that expired; 0 for a job without a lease.
	// Hand it to what the run writes, and have the store refuse a number
	// below the highest it accepted: a run that went on after it lost its
	// lease (a long GC pause, a frozen VM, a partition) then cannot
	// overwrite its retry's writes. docs/cron.md shows the pattern.
	//
	// The number is the Redis server's clock in microseconds at the claim,
	// raised past the record's last number when the clock has not moved
	// past it, as [lock.FencedLock]'s is, and it keeps its order where
	// that one does: a record that expired is gone only after the clock
	// passed its last number. It can break when Redis loses the record
	// before it expires (a restart without persistence, a failover to a
	// replica that had not received it, an eviction) and the clock that
	// numbers the next claim reads earlier than the lost number (a clock
	// stepped back, or a promoted replica's clock behind the old master's).
	Fence uint64
}

// Trigger is why a run happens. The zero Trigger is TriggerSchedule.
type Trigger uint8

// The triggers of a run.
const (
	// TriggerSchedule is a tick of the job's schedule, the startup run
	// included.
	TriggerSchedule Trigger = iota
	// TriggerRetry is a further attempt at a [Leased] job's slot whose
	// earlier attempt failed (see [LeaseConfig.Attempts]).
	TriggerRetry
	// TriggerCatchUp is a run, at start, of a slot that every replica
	// missed (see [LeaseConfig.CatchUp]).
	TriggerCatchUp
	// TriggerRequest is a run that an operator asked for (see
	// [Admin.RunNow]).
	TriggerRequest
)

var triggerNames = [...]string{"schedule", "retry", "catch-up", "request"}

// String returns the trigger's name: "schedule", "retry", "catch-up" or
// "request".
func (t Trigger) String() string {
	if int(t) < len(triggerNames) {
		return triggerNames[t]
	}
	return "Trigger(" + strconv.Itoa(int(t)) + ")"
}

// MarshalText returns the trigger's name, so that it marshals to JSON as a
// string.
func (t Trigger) MarshalText() ([]byte, error) { return []byte(t.String()), nil }

// UnmarshalText reads a trigger's name, so that a [JobStatus] read back
// from JSON has its triggers. An unknown name is an error.
func (t *Trigger) UnmarshalText(b []byte) error {
	for i, n := range triggerNames {
		if n == string(b) {
			*t = Trigger(i)
			return nil
		}
	}
	return fmt.Errorf("cron: no trigger %q", b)
}

// parseTrigger reads a trigger's name as the job record stores it.
func parseTrigger(s string) Trigger {
	for i, n := range triggerNames {
		if n == s {
			return Trigger(i)
		}
	}
	return TriggerSchedule
}

// JobName returns the name the runtime knows a job by: the result of the
// job's Name() string method when it has one, else the name of its Go type
// without pointer stars, such as "reports.HourlyReport". It returns "" for
// a nil job, a nil pointer, func, map, slice or channel of a job type
// included, without calling its Name method.
//
// Two jobs of one runtime must have different names. Jobs of one type need
// a Name method that tells them apart, and so does a [Leased] job whose
// [LeaseConfig] has no Name: its lease is named after it.
func JobName(j Job) string {
	if typednil.Is(j) {
		return ""
	}
	if named, ok := j.(interface{ Name() string }); ok {
		return named.Name()
	}
	return strings.TrimLeft(reflect.TypeOf(j).String(), "*")
}

// describe checks the job j, which errors call where (jobs[i] in Start),
// and returns its name and interval, or an error naming it. A panic in its
// methods is a broken job, refused like one.
func describe(where func() string, j Job) (name string, every interval.Interval, err error) {
	// A nil of a kind that can be nil (a pointer, map, slice, func or
	// channel) has no job behind it to run, however well its Name and
	// Interval methods work.
	if typednil.Is(j) {
		if j == nil {
			return "", every, fmt.Errorf("%w: %s is nil", ErrInvalidJob, where())
		}
		return "", every, fmt.Errorf("%w: %s is a nil %T", ErrInvalidJob, where(), j)
	}
	who := func() string { return fmt.Sprintf("%s (%T)", where(), j) }
	if err := guard(who, "Name", func() { name = JobName(j) }); err != nil {
		return "", every, err
	}
	if name == "" {
		return "", every, fmt.Errorf("%w: %s has an empty name", ErrInvalidJob, who())
	}
	if err := guard(jobCalled(name), "Interval", func() { every = j.Interval() }); err != nil {
		return "", every, err
	}
	if every.IsZero() {
		return "", every, fmt.Errorf("%w: job %q has no interval (its Interval is the zero interval.Interval)", ErrInvalidJob, name)
	}
	return name, every, nil
}

// jobCalled returns who for guard: the job of that name.
func jobCalled(name string) func() string {
	return func() string { return fmt.Sprintf("job %q", name) }
}

// guard calls f, turning a panic into an error that names the job (who,
// called only then: Start describes every job, and may have 100,000) and
// the method that panicked.
func guard(who func() string, method string, f func()) (err error) {
	defer func() {
		v := recover()
		if cause, ok := v.(error); ok {
			// errors.As sees through to it: a *interval.SpecError from
			// MustCron on a spec read from configuration.
			err = fmt.Errorf("%w: %s: its %s method panicked: %w", ErrInvalidJob, who(), method, cause)
		} else if v != nil {
			err = fmt.Errorf("%w: %s: its %s method panicked: %v", ErrInvalidJob, who(), method, v)
		}
	}()
	f()
	return nil
}

// PanicError is the error a run that panicked is reported with: it is the
// err of [Observer.RunFinished] for that run. Use errors.As to get it.
type PanicError struct {
	// Value is what the job passed to panic.
	Value any
	// Stack is the stack of the goroutine that panicked, as
	// runtime/debug.Stack formats it.
	Stack []byte
}

// Error describes the panic, without its stack.
func (e *PanicError) Error() string {
	return fmt.Sprintf("cron: job panicked: %v", e.Value)
}

// Unwrap returns the panic's value if it is an error, so that errors.Is
// sees through a panic(err).
func (e *PanicError) Unwrap() error {
	err, _ := e.Value.(error)
	return err
}

// ErrInvalidJob is the error [Start], [Runtime.Add] and [Runtime.Replace]
// return, wrapped with the job's index or name, for a job they cannot run:
// a nil job, a job whose Interval is the zero interval.Interval, a job with
// an empty name, two jobs with one name, two [Leased] jobs with one lease
// name, a Leased job whose lease has no name or can't work, or a negative
// run deadline.
var ErrInvalidJob = errors.New("cron: invalid job")

// InvalidJobError is the error [Start] returns for a job it refuses: a
// caller that made its jobs from a list (a builder, a configuration file)
// learns which one from Index. Err wraps [ErrInvalidJob] and says what is
// wrong; errors.Is(err, ErrInvalidJob) works through the InvalidJobError.
type InvalidJobError struct {
	Index int // the job's index in Start's jobs; of two jobs with one name, the second's
	Err   error
}

// Error is Err's message.
func (e *InvalidJobError) Error() string { return e.Err.Error() }

// Unwrap returns Err.
func (e *InvalidJobError) Unwrap() error { return e.Err }
