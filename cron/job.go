package cron

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/wakuwaku-go/wakuwaku/interval"
)

// Job is work that runs on a schedule.
//
// Interval says when the job runs; the runtime calls it once, in [Start], so
// a job's schedule cannot change while it runs. Process does one run. Its
// context is cancelled, with cause [ErrShutdown], only when
// [Runtime.Shutdown] gives up waiting; a job that honours it lets shutdown
// finish in time. Process may be called from several goroutines at once for
// an [interval.AfterStart] job whose runs overlap.
//
// A job's name, which logs, ticks and [WithAdmission] use, is what its
// Name() string method returns when it has one, else its Go type (see
// [JobName]).
type Job interface {
	Interval() interval.Interval
	Process(ctx context.Context, tick Tick) error
}

// Tick describes one run of a job. It is handed to [Job.Process], to the
// admission check and to the [Observer].
type Tick struct {
	// Scheduled is when the run was due: the runtime's start for the
	// startup run, and the slot itself for a Cron job, so a job can key its
	// work by it. A run that starts late still carries the time it was due
	// (a Cron job that woke up late: the latest slot it missed).
	Scheduled time.Time
	// Started is when the runtime started the run (before the admission
	// check, if any).
	Started time.Time
	// Job is the job's name.
	Job string
	// Run numbers the job's ticks: 1 for the startup run, then 2, 3, ...
	// A tick that was skipped uses its number too, so the runs that
	// happened may leave gaps.
	Run uint64
}

// JobName returns the name the runtime knows a job by: the result of the
// job's Name() string method when it has one, else the name of its Go type
// without pointer stars, such as "reports.HourlyReport". It returns "" for
// a nil job.
//
// Two jobs of one runtime must have different names. Jobs of one type need
// a Name method that tells them apart.
func JobName(j Job) string {
	if j == nil {
		return ""
	}
	if named, ok := j.(interface{ Name() string }); ok {
		return named.Name()
	}
	return strings.TrimLeft(reflect.TypeOf(j).String(), "*")
}

// isNil reports whether j is nil or a nil pointer, which has no job behind
// it to run.
func isNil(j Job) bool {
	if j == nil {
		return true
	}
	v := reflect.ValueOf(j)
	return v.Kind() == reflect.Pointer && v.IsNil()
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
