package cron

import (
	"errors"
	"time"
)

// Deadlined is implemented by a job whose runs may take only so long each,
// as Kubernetes' activeDeadlineSeconds bounds a Job's: RunDeadline after
// Process began (its admission and a leased job's claim not counted), the
// run's context is cancelled with cause [ErrRunDeadline].
//
// A run that returns after its deadline passed, whatever it returns, is a
// timeout: it is reported to the logger and the [Observer] with an error
// that errors.Is finds ErrRunDeadline in (and the job's own error, if it
// returned one), and a [Leased] job's record keeps its outcome as
// "timeout", which [LeaseConfig.Attempts] treats as a failure like any
// other. The runtime can't stop a run that ignores its context: the
// deadline ends the context, not the goroutine.
type Deadlined interface {
	Job
	// RunDeadline returns how long one run may take; 0 for no limit. The
	// runtime calls it once, when the job is started, added or replaced.
	RunDeadline() time.Duration
}

// ErrRunDeadline is the cause of a run's context when the run outlasted
// its job's deadline (see [Deadlined]), and is in the error the run is
// reported with.
var ErrRunDeadline = errors.New("cron: run deadline exceeded")

// outcome names how a run that returned err ended, as the log records and
// a leased job's record say: ok, error, panic, timeout, or lost (its run
// lease).
func outcome(err error) string {
	var p *PanicError
	switch {
	case err == nil:
		return "ok"
	case errors.As(err, &p):
		return "panic"
	case errors.Is(err, ErrRunDeadline):
		return "timeout"
	}
	return "error"
}
