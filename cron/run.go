package cron

import (
	"context"
	"log/slog"
	"runtime/debug"
	"time"
)

// run does one run of e in its own goroutine: the admission check, then
// Process, then the report. Whatever happens, even a runtime.Goexit in the
// job, finished is called, so the job keeps its schedule and Shutdown its
// count.
func (r *Runtime) run(ctx context.Context, e *entry, t Tick, atFinish bool) {
	ran := false
	var end time.Time
	defer func() {
		switch {
		case !ran:
			end = t.Started // a skipped run took no time
		case end.IsZero():
			end = r.now() // the job called runtime.Goexit
		}
		r.finished(e, t.Started, end, atFinish)
	}()

	if e.admit != nil {
		admitted, reason, err := admit(ctx, e.admit, t)
		switch {
		case err != nil:
			r.skipped(ctx, t, ReasonAdmissionFailed, err)
			return
		case !admitted:
			if reason == "" {
				reason = ReasonNotAdmitted
			}
			r.skipped(ctx, t, reason, nil)
			return
		}
	}

	ran = true
	if r.observer.RunStarted != nil {
		r.observer.RunStarted(t)
	}
	begin := r.now()
	err := process(ctx, e.job, t)
	end = r.now()
	r.report(ctx, t, err, end.Sub(begin))
}

// process calls the job, turning a panic into a *PanicError.
func process(ctx context.Context, j Job, t Tick) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &PanicError{Value: v, Stack: debug.Stack()}
		}
	}()
	return j.Process(ctx, t)
}

// admit calls an admission, turning a panic into a *PanicError: a broken
// admission fails closed, like one that returns an error.
func admit(ctx context.Context, a Admission, t Tick) (admitted bool, reason string, err error) {
	defer func() {
		if v := recover(); v != nil {
			admitted, reason, err = false, "", &PanicError{Value: v, Stack: debug.Stack()}
		}
	}()
	return a(ctx, t)
}

// report logs a finished run and tells the observer. The log records are
// built in functions of their own, only when the logger wants them, so that
// a run's goroutine stays within its initial stack when logging is off.
func (r *Runtime) report(ctx context.Context, t Tick, err error, took time.Duration) {
	level := slog.LevelDebug
	if err != nil {
		level = slog.LevelError
	}
	if r.log.Enabled(ctx, level) {
		r.logRun(ctx, level, t, err, took)
	}
	if r.observer.RunFinished != nil {
		r.observer.RunFinished(t, err, took)
	}
}

func (r *Runtime) logRun(ctx context.Context, level slog.Level, t Tick, err error, took time.Duration) {
	attrs := []slog.Attr{
		slog.String("job", t.Job), slog.Uint64("run", t.Run),
		slog.Time("scheduled", t.Scheduled), slog.Duration("duration", took),
	}
	msg := "cron job finished"
	if p, ok := err.(*PanicError); ok {
		msg = "cron job panicked"
		attrs = append(attrs, slog.Any("panic", p.Value), slog.String("stack", string(p.Stack)))
	} else if err != nil {
		msg = "cron job failed"
		attrs = append(attrs, slog.Any("error", err))
	}
	r.log.LogAttrs(ctx, level, msg, attrs...)
}

// skipped logs a tick that did not run and tells the observer.
func (r *Runtime) skipped(ctx context.Context, t Tick, reason string, err error) {
	level := slog.LevelWarn
	switch {
	case err != nil:
		level = slog.LevelError
	case reason != ReasonStillRunning && reason != ReasonTooManyRuns:
		// The admission refused: another replica has the run, as planned.
		level = slog.LevelInfo
	}
	if r.log.Enabled(ctx, level) {
		r.logSkip(ctx, level, t, reason, err)
	}
	if r.observer.RunSkipped != nil {
		r.observer.RunSkipped(t, reason, err)
	}
}

func (r *Runtime) logSkip(ctx context.Context, level slog.Level, t Tick, reason string, err error) {
	attrs := []slog.Attr{
		slog.String("job", t.Job), slog.Uint64("run", t.Run),
		slog.Time("scheduled", t.Scheduled), slog.String("reason", reason),
	}
	if err != nil {
		attrs = append(attrs, slog.Any("error", err))
	}
	r.log.LogAttrs(ctx, level, "cron job skipped a run", attrs...)
}

// logLate logs a tick that came more than a period late, which runs once
// for all the ticks it stands for.
func (r *Runtime) logLate(ctx context.Context, d decision) {
	r.log.LogAttrs(ctx, slog.LevelWarn, "cron job is late; missed ticks run once",
		slog.String("job", d.tick.Job), slog.Uint64("run", d.tick.Run),
		slog.Time("scheduled", d.tick.Scheduled), slog.Duration("late", d.late))
}
