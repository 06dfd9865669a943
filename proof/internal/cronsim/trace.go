package cronsim

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/wakuwaku-go/wakuwaku/cron"
	"github.com/wakuwaku-go/wakuwaku/crontest"
	"github.com/wakuwaku-go/wakuwaku/lock"
)

// stamp formats an instant of the bubble's clock for a trace: weekday and
// time of day to the millisecond, or to the nanosecond when that is what
// tells two instants apart.
func stamp(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	if t.Nanosecond()%int(time.Millisecond) != 0 && t.Nanosecond()%int(time.Microsecond) == 0 {
		return t.UTC().Format("Mon 15:04:05.000000")
	}
	return t.UTC().Format("Mon 15:04:05.000")
}

// String describes the scenario: its replicas, its jobs with the plans
// that are not a quick success, and its events. It is what a failing
// seed prints, once shrunk.
func (sc *Scenario) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "seed %d: %d replicas from %s for %s; clocks", sc.Seed, Replicas, sc.Start.Format("Mon 2006-01-02 15:04:05.000"), short(sc.Span))
	for _, o := range sc.Offsets {
		fmt.Fprintf(&b, " %+v", o.Round(time.Millisecond))
	}
	b.WriteString("; latencies")
	for _, l := range sc.Latencies {
		fmt.Fprintf(&b, " %v", l.Round(time.Microsecond))
	}
	if sc.Replicated {
		b.WriteString("; DB WithReplicas(1, 1s)")
	}
	for i, p := range sc.ProcessOnly {
		if p && !sc.Replicated {
			fmt.Fprintf(&b, "; r%d's client has only Process", i)
		}
	}
	b.WriteByte('\n')
	for _, j := range sc.Jobs {
		fmt.Fprintf(&b, "%s %v", j.Name, j.Versions[0])
		for v, ver := range j.Versions[1:] {
			fmt.Fprintf(&b, "; v%d: %v", v+1, ver)
		}
		if j.NoStartup {
			b.WriteString("; no startup run")
		}
		if j.CatchUp > 0 {
			fmt.Fprintf(&b, "; catch-up %s", short(j.CatchUp))
		}
		if j.RunTTL > 0 {
			fmt.Fprintf(&b, "; run TTL %s", short(j.RunTTL))
		}
		if j.Backoff > 0 {
			fmt.Fprintf(&b, "; backoff %s", short(j.Backoff))
		}
		b.WriteByte('\n')
		keys := slices.SortedFunc(maps.Keys(j.Plans), planOrder)
		what := "slot"
		if !j.Versions[0].Policy.Shared() {
			what = "interval from"
		}
		for _, k := range keys {
			run := fmt.Sprintf("attempt %d", k.Attempt)
			if k.Requested {
				run = "requested run"
			}
			fmt.Fprintf(&b, "  %s %s, %s: %v\n", what, stamp(sc.Start.Add(k.At)), run, j.Plans[k])
		}
	}
	for _, e := range sc.Events {
		fmt.Fprintf(&b, "%s %v\n", stamp(sc.Start.Add(e.At)), e)
	}
	return b.String()
}

// Trace describes what happened to the job named job ("" for every job):
// its runs, the runtimes' Warn and Error records about it, the operators'
// commands, and, if full, every reading of its record. Unless full, a
// stretch of runs of the schedule that went well (first attempts that
// succeeded) is cut to its first and last. Lines are in time order; the
// trace of one scenario is the same in every run.
func (h *History) Trace(job string, full bool) string {
	type line struct {
		at    time.Time
		text  string
		plain bool // a run of the schedule, first attempt, that went well
	}
	var lines []line
	add := func(at time.Time, plain bool, format string, args ...any) {
		lines = append(lines, line{at, stamp(at) + " " + fmt.Sprintf(format, args...), plain})
	}
	for i := range h.Runs {
		r := &h.Runs[i]
		if job == "" || r.Job == job {
			plain := r.Tick.Trigger == cron.TriggerSchedule && r.Tick.Attempt == 1 && !r.End.IsZero() && r.Err == nil && r.Cancelled.IsZero()
			add(r.Start, plain, "%s", describe(r))
		}
	}
	for _, l := range h.Logs {
		if job == "" || l.Job == job {
			s := fmt.Sprintf("%s %s %v %q", replicaName(l.Replica), l.Job, l.Level, l.Msg)
			if l.Reason != "" {
				s += fmt.Sprintf(" reason=%q", l.Reason)
			}
			if !l.Scheduled.IsZero() {
				s += " scheduled=" + stamp(l.Scheduled)
			}
			add(l.At, false, "%s", s)
		}
	}
	for _, op := range h.Admin {
		if job == "" || op.Job == job {
			res := "ok"
			if op.Err != nil {
				res = op.Err.Error()
			}
			add(op.At, false, "admin %v %s: %s", op.Kind, op.Job, res)
		}
	}
	if full {
		for _, p := range h.Probes {
			if job == "" || p.Job == job {
				add(p.At, false, "record %s", p.describe())
			}
		}
	}
	for _, msg := range h.Harness {
		add(h.End, false, "harness: %s", msg)
	}
	// Lines of one instant in the order of their text: events of one
	// instant of fake time happen in goroutines whose order the Go
	// scheduler picks, and a trace is compared across runs.
	slices.SortStableFunc(lines, func(a, b line) int { return cmp.Or(a.at.Compare(b.at), strings.Compare(a.text, b.text)) })
	var b strings.Builder
	for i := 0; i < len(lines); i++ {
		n := 0 // plain lines from i
		for i+n < len(lines) && lines[i+n].plain {
			n++
		}
		if !full && n > 3 {
			fmt.Fprintf(&b, "%s\n  ... %d more runs of the schedule that went well ...\n%s\n", lines[i].text, n-2, lines[i+n-1].text)
			i += n - 1
			continue
		}
		b.WriteString(lines[i].text)
		b.WriteByte('\n')
	}
	return b.String()
}

// describe tells a run in one line: replica, job, run number, slot,
// trigger and attempt, end and outcome.
func describe(r *Run) string {
	slot := "own slot " + stamp(r.Tick.Slot.Start)
	if key, ok := r.Tick.Slot.Key(); ok {
		slot = "slot " + key
	}
	s := fmt.Sprintf("r%d %s run #%d (v%d) %s %v/%d", r.Replica, r.Job, r.Number, r.Version, slot, r.Tick.Trigger, r.Tick.Attempt)
	if r.End.IsZero() {
		s += " still running"
	} else {
		s += " to " + stamp(r.End) + " " + outcome(r.Err)
	}
	if !r.Cancelled.IsZero() {
		s += fmt.Sprintf(" (cancelled %s: %v)", stamp(r.Cancelled), r.Cause)
	}
	return s
}

// outcome names what a run returned.
func outcome(err error) string {
	var p *cron.PanicError
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, crontest.ErrKilled):
		return "killed"
	case errors.As(err, &p):
		return "panicked"
	case errors.Is(err, lock.ErrLeaseLost):
		return "lease lost"
	}
	return "failed"
}

func (p Probe) describe() string {
	if !p.Exists {
		return p.Job + " absent"
	}
	ttl := "no TTL"
	if p.TTL >= 0 {
		ttl = "expires " + stamp(p.At.Add(p.TTL))
	}
	return fmt.Sprintf("%s slot %q at %s %s, %s", p.Job, p.Slot, stamp(p.SlotAt), p.State, ttl)
}

// replicaName shortens "replica-1" to "r1".
func replicaName(s string) string {
	if n, ok := strings.CutPrefix(s, "replica-"); ok {
		return "r" + n
	}
	return s
}
