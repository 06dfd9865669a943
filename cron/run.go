package cron

import (
	"context"
	"log/slog"
	"runtime/debug"
	"time"
)

// runArgs is what a run's goroutine gets: on the heap, so that the run's
// stack frames stay small (see run).
type runArgs struct {
	e        *entry
	tick     Tick
	atFinish bool
}

// run does one run of a.e in its own goroutine: the admission check, then
// Process, then the report. Whatever happens, even a runtime.Goexit in the
// job, finished is called, so the job keeps its schedule and Shutdown its
// count. A panic in Process is recovered here and reported as a
// *PanicError.
//
// The run's goroutine is kept within its initial stack, or it would be
// copied to a larger one at every run: the Tick, 136 bytes, stays on the
// heap and goes by pointer to the functions run calls, copied only where
// the job or the observer gets it; and Process is called from run itself,
// whose deferred function calls recover only if Process did not return.
func (r *Runtime) run(ctx context.Context, a *runArgs) {
	e, t := a.e, &a.tick
	var begin, end time.Time
	inProcess := false
	defer func() {
		switch {
		case inProcess:
			// Process panicked, or called runtime.Goexit.
			end = r.now()
			if v := recover(); v != nil {
				r.report(ctx, e, t, &PanicError{Value: v, Stack: debug.Stack()}, end.Sub(begin))
			}
		case begin.IsZero():
			end = t.Started // a skipped run took no time
		}
		r.finished(e, t.Started, end, a.atFinish)
	}()

	if e.admit != nil {
		admitted, reason, err := admit(ctx, e.admit.check, t)
		if err != nil {
			r.admissionFailed(ctx, e, t, err)
			return
		}
		if e.admit.failures.Load() > 0 {
			r.admissionRecovered(ctx, e, t)
		}
		if !admitted {
			if reason == "" {
				reason = ReasonNotAdmitted
			}
			r.skipped(ctx, t, reason)
			return
		}
	}

	if r.log.Enabled(ctx, slog.LevelInfo) {
		r.logRunStart(ctx, e, t)
	}
	if r.observer.RunStarted != nil {
		r.runStarted(t)
	}
	begin = r.now()
	inProcess = true
	err := e.job.Process(ctx, *t)
	inProcess = false
	end = r.now()
	r.report(ctx, e, t, err, end.Sub(begin))
}

// runStarted tells the observer that a run starts.
func (r *Runtime) runStarted(t *Tick) { r.observer.RunStarted(*t) }

// admit calls an admission, turning a panic into a *PanicError: a broken
// admission fails closed, like one that returns an error. Like run's
// deferred function, it calls recover only when the admission did not
// return.
func admit(ctx context.Context, a Admission, t *Tick) (admitted bool, reason string, err error) {
	returned := false
	defer func() {
		if returned {
			return
		}
		if v := recover(); v != nil {
			admitted, reason, err = false, "", &PanicError{Value: v, Stack: debug.Stack()}
		}
	}()
	admitted, reason, err = a(ctx, *t)
	returned = true
	return admitted, reason, err
}

// report logs a finished run and tells the observer. The log records are
// built in functions of their own, only when the logger wants them, so that
// a run's goroutine stays within its initial stack when logging is off.
func (r *Runtime) report(ctx context.Context, e *entry, t *Tick, err error, took time.Duration) {
	level := slog.LevelInfo
	if err != nil {
		level = slog.LevelError
	}
	if r.log.Enabled(ctx, level) {
		r.logRun(ctx, level, e, t, err, took)
	}
	if r.observer.RunFinished != nil {
		r.observer.RunFinished(*t, err, took)
	}
}

// runAttrs returns the attributes that a run's records begin with.
func runAttrs(e *entry, t *Tick, more int) []slog.Attr {
	attrs := make([]slog.Attr, 0, 5+more)
	attrs = append(attrs,
		slog.String("job", t.Job), slog.Uint64("run", t.Run),
		slog.Time("scheduled", t.Scheduled), slog.String("slot", t.Slot.String()))
	if e.admit != nil && e.admit.lease != "" {
		name, _ := slotLease(e.admit.lease, *t)
		attrs = append(attrs, slog.String("lease", leaseKeys.Key(name)))
	}
	return attrs
}

func (r *Runtime) logRunStart(ctx context.Context, e *entry, t *Tick) {
	r.log.LogAttrs(ctx, slog.LevelInfo, "cron job started", runAttrs(e, t, 0)...)
}

func (r *Runtime) logRun(ctx context.Context, level slog.Level, e *entry, t *Tick, err error, took time.Duration) {
	attrs := append(runAttrs(e, t, 4), slog.Duration("duration", took))
	msg, outcome := "cron job finished", "ok"
	if p, ok := err.(*PanicError); ok {
		msg, outcome = "cron job panicked", "panic"
		attrs = append(attrs, slog.String("outcome", outcome), slog.Any("panic", p.Value), slog.String("stack", string(p.Stack)))
	} else if err != nil {
		msg, outcome = "cron job failed", "error"
		attrs = append(attrs, slog.String("outcome", outcome), slog.Any("error", err))
	} else {
		attrs = append(attrs, slog.String("outcome", outcome))
	}
	r.log.LogAttrs(ctx, level, msg, attrs...)
}

// admissionFailed skips a tick whose admission failed (Redis, for a
// lease), and tells the observer. Only the first failure of a row is logged
// at Error; the rest, one per tick while the outage lasts, at Debug.
func (r *Runtime) admissionFailed(ctx context.Context, e *entry, t *Tick, err error) {
	e.admit.failedSince.CompareAndSwap(0, t.Started.UnixNano())
	level, msg := slog.LevelDebug, "cron job skipped a run"
	if e.admit.failures.Add(1) == 1 {
		level, msg = slog.LevelError, "cron job's admission failed; its runs are skipped until it succeeds"
	}
	if r.log.Enabled(ctx, level) {
		r.logSkip(ctx, level, msg, t, ReasonAdmissionFailed, err)
	}
	if r.observer.RunSkipped != nil {
		r.observer.RunSkipped(*t, ReasonAdmissionFailed, err)
	}
}

// admissionRecovered logs the end of a row of admission failures, once the
// admission answered again, admitting the tick t or not.
func (r *Runtime) admissionRecovered(ctx context.Context, e *entry, t *Tick) {
	n := e.admit.failures.Swap(0)
	since := e.admit.failedSince.Swap(0)
	if n == 0 { // another run of the job logged it
		return
	}
	r.log.LogAttrs(ctx, slog.LevelInfo, "cron job's admission succeeded again",
		slog.String("job", t.Job), slog.Uint64("run", t.Run),
		slog.Uint64("skipped", uint64(n)), slog.Duration("down", t.Started.Sub(time.Unix(0, since))))
}

// skipped logs a tick that did not run, because the job's previous run was
// still going or its admission refused it, and tells the observer.
func (r *Runtime) skipped(ctx context.Context, t *Tick, reason string) {
	level := slog.LevelWarn
	switch reason {
	case ReasonStillRunning, ReasonTooManyRuns, ReasonTooLate:
	default:
		// The admission refused: another replica has the run, as
		// planned, and logs it there at Info.
		level = slog.LevelDebug
	}
	if r.log.Enabled(ctx, level) {
		r.logSkip(ctx, level, "cron job skipped a run", t, reason, nil)
	}
	if r.observer.RunSkipped != nil {
		r.observer.RunSkipped(*t, reason, nil)
	}
}

func (r *Runtime) logSkip(ctx context.Context, level slog.Level, msg string, t *Tick, reason string, err error) {
	attrs := []slog.Attr{
		slog.String("job", t.Job), slog.Uint64("run", t.Run),
		slog.Time("scheduled", t.Scheduled), slog.String("reason", reason),
	}
	if err != nil {
		attrs = append(attrs, slog.Any("error", err))
	}
	r.log.LogAttrs(ctx, level, msg, attrs...)
}

// logLate logs a tick that came more than a period late, which runs once
// for all the ticks it stands for.
func (r *Runtime) logLate(ctx context.Context, d decision) {
	r.log.LogAttrs(ctx, slog.LevelWarn, "cron job is late; missed ticks run once",
		slog.String("job", d.tick.Job), slog.Uint64("run", d.tick.Run),
		slog.Time("scheduled", d.tick.Scheduled), slog.Duration("late", d.late))
}
