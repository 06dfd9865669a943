package cron

import (
	"context"
	"log/slog"
	"time"
)

// This file holds what the runtime tells its logger and its observer
// about ticks and runs: one reporter per runtime, which the scheduler and
// the leased jobs' side share.

// reporter logs the runtime's ticks and runs and tells its observer.
type reporter struct {
	log      *slog.Logger
	observer Observer
}

// runStarted tells the observer that a run starts.
func (p *reporter) runStarted(t *Tick) { p.observer.RunStarted(*t) }

// report logs a finished run and tells the observer. The log records are
// built in functions of their own, only when the logger wants them, so that
// a run's goroutine stays within its initial stack when logging is off.
func (p *reporter) report(ctx context.Context, a *runArgs, err error, took time.Duration) {
	t := &a.tick
	level := slog.LevelInfo
	if err != nil {
		level = slog.LevelError
	}
	if p.log.Enabled(ctx, level) {
		p.logRun(ctx, level, a, err, took)
	}
	if p.observer.RunFinished != nil {
		p.observer.RunFinished(*t, err, took)
	}
}

// runAttrs returns the attributes that a run's records begin with. A
// leased run is named alike on every replica by its job, slot and attempt
// (tick numbers each replica's own ticks); the record's and the lease's
// keys, which a reader of the logs seldom needs, come at Debug only.
func (p *reporter) runAttrs(ctx context.Context, a *runArgs, more int) []slog.Attr {
	t := &a.tick
	attrs := make([]slog.Attr, 0, 8+more)
	attrs = append(attrs,
		slog.String("job", t.Job), slog.String("slot", t.Slot.String()), slog.Uint64("tick", t.Run),
		slog.Time("scheduled", t.Scheduled))
	if a.admit != nil && a.admit.state != nil {
		attrs = append(attrs, slog.Int("attempt", t.Attempt))
		if t.Trigger != TriggerSchedule {
			attrs = append(attrs, slog.String("trigger", t.Trigger.String()))
		}
		if p.log.Enabled(ctx, slog.LevelDebug) {
			attrs = append(attrs, slog.String("record", a.admit.state.Keys[0]))
			if len(a.admit.state.Keys) > 2 {
				attrs = append(attrs, slog.String("lease", a.admit.state.Keys[2]))
			}
		}
	}
	return attrs
}

func (p *reporter) logRunStart(ctx context.Context, a *runArgs) {
	p.log.LogAttrs(ctx, slog.LevelInfo, "cron job started", p.runAttrs(ctx, a, 0)...)
}

func (p *reporter) logRun(ctx context.Context, level slog.Level, a *runArgs, err error, took time.Duration) {
	attrs := append(p.runAttrs(ctx, a, 4), slog.Duration("duration", took))
	msg := "cron job finished"
	if pe, ok := err.(*PanicError); ok {
		msg = "cron job panicked"
		attrs = append(attrs, slog.String("outcome", "panic"), slog.Any("panic", pe.Value), slog.String("stack", string(pe.Stack)))
	} else if err != nil {
		o := outcome(err)
		msg = "cron job failed"
		if o == "timeout" {
			msg = "cron job ran past its deadline"
		}
		attrs = append(attrs, slog.String("outcome", o), slog.Any("error", err))
	} else {
		attrs = append(attrs, slog.String("outcome", "ok"))
	}
	p.log.LogAttrs(ctx, level, msg, attrs...)
}

// admissionFailed skips a tick whose admission failed (Redis, for a
// lease), and tells the observer. Only the first failure of a row is logged
// at Error; the rest, one per tick while the outage lasts, at Debug.
func (p *reporter) admissionFailed(ctx context.Context, ad *admission, t *Tick, err error) {
	ad.failedSince.CompareAndSwap(0, t.Started.UnixNano())
	level, msg := slog.LevelDebug, "cron job skipped a run"
	if ad.failures.Add(1) == 1 {
		level, msg = slog.LevelError, "cron job's admission failed; its runs are skipped until it succeeds"
	}
	if p.log.Enabled(ctx, level) {
		p.logSkip(ctx, level, msg, t, ReasonAdmissionFailed, err)
	}
	if p.observer.RunSkipped != nil {
		p.observer.RunSkipped(*t, ReasonAdmissionFailed, err)
	}
}

// admissionRecovered logs the end of a row of admission failures, once the
// admission answered again, admitting the tick t or not.
func (p *reporter) admissionRecovered(ctx context.Context, ad *admission, t *Tick) {
	n := ad.failures.Swap(0)
	since := ad.failedSince.Swap(0)
	if n == 0 { // another run of the job logged it
		return
	}
	p.log.LogAttrs(ctx, slog.LevelInfo, "cron job's admission succeeded again",
		slog.String("job", t.Job), slog.Uint64("tick", t.Run),
		slog.Uint64("skipped", uint64(n)), slog.Duration("down", t.Started.Sub(time.Unix(0, since))))
}

// skipped logs a tick that did not run, because the job's previous run was
// still going or its admission refused it, and tells the observer.
func (p *reporter) skipped(ctx context.Context, t *Tick, reason string) {
	level := slog.LevelWarn
	switch reason {
	case ReasonStillRunning, ReasonTooManyRuns, ReasonTooLate, ReasonNotReplicated:
	default:
		// The admission refused: another replica has the run, as
		// planned, and logs it there at Info.
		level = slog.LevelDebug
	}
	if p.log.Enabled(ctx, level) {
		p.logSkip(ctx, level, "cron job skipped a run", t, reason, nil)
	}
	if p.observer.RunSkipped != nil {
		p.observer.RunSkipped(*t, reason, nil)
	}
}

// lookRefused logs a retry (E2, retry) or follow-up (E3) of t's slot that
// the record refused for reason. It tells the observer nothing: neither
// is a tick, and the slot's outcome is its last attempt's, which the
// history holds and its replica reported. Only this replica's own retry
// refused by a pause is worth a Warn (PROTOCOL.md, "How a slot ends"):
// the slot gets no further attempt, though it had one left.
func (p *reporter) lookRefused(ctx context.Context, t *Tick, retry bool, reason string) {
	level, msg := slog.LevelDebug, "cron job's look at its slot was refused"
	if retry && reason == ReasonPaused {
		level, msg = slog.LevelWarn, msgRetryPaused
	}
	if p.log.Enabled(ctx, level) {
		p.logSkip(ctx, level, msg, t, reason, nil)
	}
}

// msgRetryPaused is the message of a retry that a pause refused.
const msgRetryPaused = "cron job's retry was refused: the job is paused; its slot ends with its failed attempts"

// skipRecorded logs, at Warn, a tick whose slot this replica's claim
// recorded skipped in the record and its history (R20), and tells the
// observer with its reason: one replica does, so a count of skips summed
// over the replicas counts the slots skipped.
func (p *reporter) skipRecorded(ctx context.Context, t *Tick, reason string) {
	if p.log.Enabled(ctx, slog.LevelWarn) {
		p.logSkip(ctx, slog.LevelWarn, msgSkipRecorded, t, reason, nil)
	}
	if p.observer.RunSkipped != nil {
		p.observer.RunSkipped(*t, reason, nil)
	}
}

// msgSkipRecorded is the message of skipRecorded's log record.
const msgSkipRecorded = "cron job skipped a slot; recorded in its history"

func (p *reporter) logSkip(ctx context.Context, level slog.Level, msg string, t *Tick, reason string, err error) {
	attrs := []slog.Attr{
		slog.String("job", t.Job), slog.String("slot", t.Slot.String()), slog.Uint64("tick", t.Run),
		slog.Time("scheduled", t.Scheduled), slog.String("reason", reason),
	}
	if err != nil {
		attrs = append(attrs, slog.Any("error", err))
	}
	p.log.LogAttrs(ctx, level, msg, attrs...)
}

// logLate logs a tick that came more than a period late, which runs once
// for all the ticks it stands for.
func (p *reporter) logLate(ctx context.Context, a *runArgs) {
	p.log.LogAttrs(ctx, slog.LevelWarn, "cron job is late; missed ticks run once",
		slog.String("job", a.tick.Job), slog.Uint64("tick", a.tick.Run),
		slog.Time("scheduled", a.tick.Scheduled), slog.Duration("late", a.late))
}

// logStart logs the runtime's start, with its jobs' names.
func (p *reporter) logStart(ctx context.Context, entries []entry) {
	names := make([]string, len(entries))
	for i := range entries {
		names[i] = entries[i].name
	}
	p.log.LogAttrs(ctx, slog.LevelInfo, "cron runtime started",
		slog.Int("jobs", len(entries)), slog.Any("names", names))
}
