package cronsim

import (
	"errors"
	"slices"
	"time"

	"github.com/wakuwaku-go/wakuwaku/cron"
	"github.com/wakuwaku-go/wakuwaku/crontest"
	"github.com/wakuwaku-go/wakuwaku/lock"
)

// Paths are what a seed may reach: the knobs it draws, the faults it
// plays, and the protocol's paths, as the public API shows them (a run's
// trigger and how it ended, the reasons the runtimes skipped ticks for).
// TestSimulate counts, for each, the seeds that reached it; with -sim.all
// on CI's 500 seeds or more, a path that no seed reached fails the run.
var Paths = []string{
	// Knobs.
	"knob: cron spec", "knob: duration policy", "knob: attempts >= 2", "knob: no startup run, catch-up",
	"knob: spread (a spread tick ran)", "knob: slot TTL", "knob: history length", "knob: run deadline",
	"knob: run deadline exceeded", "knob: Replace on a running replica", "knob: Remove", "knob: Add back",
	"knob: rolling deploy", "knob: DB WithReplicas", "knob: client with only Process",
	"knob: AutoPipeliner (blocking)", "knob: AutoPipeliner (async)", "knob: many jobs due at once",
	"batch: completions sent before waiting claims (the bound decided)",
	// Faults.
	"fault: kill", "fault: restart", "fault: redis down", "fault: redis stall", "fault: redis restart (keys lost)",
	"fault: failover", "fault: clock step", "fault: SCRIPT FLUSH", "fault: replies lost (sent again)",
	"fault: process frozen", "fault: pause", "fault: run-now",
	// The protocol's paths.
	"E1 tick ran", "E13 after the replica's own run lost its lease", "E13 after the replica's own run, its tick unanswered", "E2/E3 retry or follow-up ran", "E4 catch-up ran", "E5 request ran",
	"run failed", "run panicked", "run killed", "run lost its lease (R11)", "run ignored its cancellation",
	"slot retried to success", "E14 a start's run of a slot retried by another replica",
	"skip: " + cron.ReasonLeaseHeld, "skip: " + cron.ReasonRunning, "skip: " + cron.ReasonPaused,
	"skip: " + cron.ReasonRetryWait, "skip: " + cron.ReasonAttemptsUsedUp, "skip: " + cron.ReasonStillRunning,
	"skip: " + cron.ReasonAdmissionFailed, "skip: " + cron.ReasonTooLate, "skip: " + cron.ReasonSkippedElsewhere,
	"skip recorded: " + cron.ReasonStillRunning, "skip recorded: " + cron.ReasonPaused, "slot closed: claim window over",
	"fence: a stale run's write refused by the fenced store",
	// The everyday operations.
	"op: Shutdown returned nil", "op: Shutdown gave up (its context ended)",
	"op: a run's completion sent again, Shutdown waiting", "op: Replace inside a spread window, the slot ran",
	"op: Redis restarted empty mid-run, the slot ran again", "op: a skip's claim sent again (C3), the skip said",
	"op: a slot due while the last run held the job, skipped after it ended",
	// Not listed, as no seed of CI's reaches them yet: R17's
	// cron.ReasonNotReplicated (a failover's outage would have to outlast
	// half a run lease while a claim waits for its replica).
}

// Cover returns the paths of Paths that the scenario and its history
// reached, and the skip reasons not in Paths, as "skip: <reason>".
func Cover(sc *Scenario, h *History) []string {
	got := make(map[string]bool)
	add := func(p string) { got[p] = true }
	for _, j := range sc.Jobs {
		var runs []*Run
		for i := range h.Runs {
			if h.Runs[i].Job == j.Name {
				runs = append(runs, &h.Runs[i])
			}
		}
		for _, ok := range storeWrites(runs) {
			if !ok {
				add("fence: a stale run's write refused by the fenced store")
			}
		}
		if j.Versions[0].Policy.Shared() {
			add("knob: cron spec")
		} else {
			add("knob: duration policy")
		}
		if j.NoStartup && j.CatchUp > 0 {
			add("knob: no startup run, catch-up")
		}
	}
	if sc.Replicated {
		add("knob: DB WithReplicas")
	} else if slices.Contains(sc.ProcessOnly[:], true) {
		add("knob: client with only Process")
	}
	for i, ap := range sc.AutoPipelined {
		if ap > 0 && !sc.Replicated && !sc.ProcessOnly[i] {
			add([]string{"", "knob: AutoPipeliner (blocking)", "knob: AutoPipeliner (async)"}[ap])
		}
	}
	if sc.Crowd > 0 {
		add("knob: many jobs due at once")
	}
	if h.CompletionsFirst > 0 {
		add("batch: completions sent before waiting claims (the bound decided)")
	}
	kinds := map[EventKind]string{
		Kill: "fault: kill", Restart: "fault: restart", RedisDown: "fault: redis down", RedisStall: "fault: redis stall",
		RedisRestart: "fault: redis restart (keys lost)", Failover: "fault: failover", StepClock: "fault: clock step",
		ScriptFlush: "fault: SCRIPT FLUSH", LoseReplies: "fault: replies lost (sent again)", Freeze: "fault: process frozen",
		Pause: "fault: pause", RunNow: "fault: run-now", Deploy: "knob: rolling deploy",
	}
	for _, e := range sc.Events {
		if p, ok := kinds[e.Kind]; ok {
			add(p)
		}
	}
	for _, a := range h.Applied {
		switch a {
		case Replace.String():
			add("knob: Replace on a running replica")
		case Remove.String():
			add("knob: Remove")
		case Add.String():
			add("knob: Add back")
		}
	}
	// E14: a slot that a replica's start ran (its catch-up, or the late
	// tick of its startup run), whose next attempt another replica ran.
	atStart := make(map[string]*Run)
	for i := range h.Runs {
		r := &h.Runs[i]
		if r.Number < 0 || r.Tick.Trigger == cron.TriggerRequest {
			continue
		}
		k := r.Job + " " + r.Tick.Slot.Start.String()
		if p := atStart[k]; p != nil && p.Replica != r.Replica && r.Tick.Attempt == p.Tick.Attempt+1 {
			add("E14 a start's run of a slot retried by another replica")
		}
		delete(atStart, k)
		if r.Tick.Trigger == cron.TriggerCatchUp || r.Tick.Run == 1 && r.Tick.Started.Sub(r.Tick.Slot.Start) > 2*time.Second {
			atStart[k] = r
		}
	}
	for _, r := range h.Runs {
		j, ok := sc.job(r.Job)
		if !ok || r.Number < 0 {
			continue
		}
		v := j.Versions[r.Version]
		switch r.Tick.Trigger {
		case cron.TriggerSchedule:
			add("E1 tick ran")
			if v.Spread > 0 && !r.Tick.Scheduled.Equal(r.Tick.Slot.Start) {
				add("knob: spread (a spread tick ran)")
			}
		case cron.TriggerRetry:
			add("E2/E3 retry or follow-up ran")
			if r.Err == nil && !r.End.IsZero() && r.Cancelled.IsZero() {
				add("slot retried to success")
			}
		case cron.TriggerCatchUp:
			add("E4 catch-up ran")
		case cron.TriggerRequest:
			add("E5 request ran")
		}
		if v.Attempts >= 2 {
			add("knob: attempts >= 2")
		}
		if v.TTL > 0 {
			add("knob: slot TTL")
		}
		if v.History > 0 {
			add("knob: history length")
		}
		if v.Deadline > 0 {
			add("knob: run deadline")
		}
		var pe *cron.PanicError
		switch {
		case errors.Is(r.Err, crontest.ErrKilled):
			add("run killed")
		case errors.As(r.Err, &pe):
			add("run panicked")
		case r.Err != nil:
			add("run failed")
		}
		switch {
		case errors.Is(r.Cause, cron.ErrRunDeadline):
			add("knob: run deadline exceeded")
		case errors.Is(r.Cause, lock.ErrLeaseLost):
			add("run lost its lease (R11)")
		}
		if !r.Cancelled.IsZero() && !r.End.IsZero() && r.End.Sub(r.Cancelled) > tickMargin {
			add("run ignored its cancellation")
		}
	}
	if h.AfterRunLooks > 0 {
		add("E13 after the replica's own run lost its lease")
	}
	if h.AfterErrorLooks > 0 {
		add("E13 after the replica's own run, its tick unanswered")
	}
	for _, reason := range h.Reasons {
		add("skip: " + reason)
	}
	for _, l := range h.Logs {
		switch l.Msg {
		case msgSkipRecorded:
			add("skip recorded: " + l.Reason)
		case msgClaimWindowOver:
			add("slot closed: claim window over")
		}
	}
	coverOps(sc, h, add)
	out := make([]string, 0, len(got))
	for p := range got {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}

// coverOps adds the paths of the everyday operations that the scenario
// and its history reached.
func coverOps(sc *Scenario, h *History, add func(string)) {
	for _, op := range h.Shutdowns {
		switch {
		case op.Done.IsZero():
		case op.Err == nil:
			add("op: Shutdown returned nil")
		default:
			add("op: Shutdown gave up (its context ended)")
		}
	}
	for _, l := range h.Resent {
		for _, op := range h.Shutdowns {
			if op.Replica == replicaIndex(l.Replica) && !op.At.After(l.At) && (op.Done.IsZero() || !op.Done.Before(l.At)) {
				add("op: a run's completion sent again, Shutdown waiting")
			}
		}
	}
	for _, e := range sc.Events {
		switch e.Kind {
		case Replace:
			j, ok := sc.job(e.Job)
			if !ok || e.Version >= len(j.Versions) {
				continue
			}
			v := j.Versions[e.Version]
			at := sc.Start.Add(e.At)
			s, ok := v.Interval(false).LatestSlot(at.Add(-24*time.Hour), at)
			if !ok || v.Spread == 0 || !v.Interval(false).Due(j.Name, s.Start).Add(-sc.Offsets[e.Replica]).After(at) {
				continue
			}
			for _, r := range h.Runs {
				if r.Job == j.Name && r.Replica == e.Replica && r.Start.After(at) && r.Tick.Slot.Start.Equal(s.Start) {
					add("op: Replace inside a spread window, the slot ran")
				}
			}
		case RedisRestart:
			at := sc.Start.Add(e.At)
			for _, r := range h.Runs {
				if !r.Start.Before(at) || !r.effectiveEnd(h.End).After(at) || !isCron(&r) || r.Tick.Trigger == cron.TriggerRequest {
					continue
				}
				for _, q := range h.Runs {
					if q.Job == r.Job && q.Start.After(at) && q.Tick.Slot.Start.Equal(r.Tick.Slot.Start) {
						add("op: Redis restarted empty mid-run, the slot ran again")
					}
				}
			}
		}
	}
	for _, s := range h.Skips {
		if recordedSkip(s.Reason) && (&checker{sc: sc, start: sc.Start}).repliesLost(s.At.Add(-time.Second), s.At) {
			add("op: a skip's claim sent again (C3), the skip said")
		}
	}
	for _, l := range h.Logs {
		if l.Msg == msgSkipRecorded && l.Reason == cron.ReasonStillRunning && !l.Scheduled.IsZero() && l.At.Sub(l.Scheduled) > 2*time.Second {
			add("op: a slot due while the last run held the job, skipped after it ended")
		}
	}
}
