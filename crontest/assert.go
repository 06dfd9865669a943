package crontest

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/wakuwaku-go/wakuwaku/cron"
)

// maxReported is how many faults of one kind an assertion reports one by
// one before it sums up the rest.
const maxReported = 10

// OncePerSlot reports through tb every slot of job that more than one run
// belongs to, across replicas and restarts, naming the replicas and when
// they ran. A run counts whatever its outcome, a killed one included: the
// job may have done its work before it died. It checks the runs recorded so
// far, and reports a job that the cluster doesn't run, and one whose slots
// have no key (a duration policy's, see interval.Slot.Key): this
// assertion needs a Cron spec.
func (c *Cluster) OncePerSlot(tb testing.TB, job string) {
	tb.Helper()
	runs, ok := c.runsOf(tb, "OncePerSlot", job, false)
	if !ok {
		return
	}
	bySlot := make(map[string][]Run)
	var order []string
	for _, r := range runs {
		key, keyed := r.Tick.Slot.Key()
		if !keyed {
			tb.Errorf("crontest: OncePerSlot(%q): the job's slots have no key (a duration policy's); it needs a Cron spec", job)
			return
		}
		if bySlot[key] == nil {
			order = append(order, key)
		}
		bySlot[key] = append(bySlot[key], r)
	}
	var faults []string
	for _, key := range order {
		if rs := bySlot[key]; len(rs) > 1 {
			faults = append(faults, fmt.Sprintf("job %q ran slot %s %d times: %s", job, key, len(rs), describeRuns(rs)))
		}
	}
	reportFaults(tb, "OncePerSlot", faults)
}

// SucceededOncePerSlot reports through tb every slot of job whose
// scheduled runs (retries and catch-ups included, an operator's requested
// runs not) succeeded more than once, or ended without any success while
// none is in progress: what "each slot ran once" means for a job with
// LeaseConfig.Attempts, whose failed attempts are retried. A run succeeded
// if it returned nil. It checks the runs recorded so far, and reports, as
// [Cluster.OncePerSlot] does, a job that the cluster doesn't run and one
// whose slots have no key (it needs a Cron spec).
func (c *Cluster) SucceededOncePerSlot(tb testing.TB, job string) {
	tb.Helper()
	runs, ok := c.runsOf(tb, "SucceededOncePerSlot", job, false)
	if !ok {
		return
	}
	type slotRuns struct {
		ok, failed []Run
		running    bool
	}
	bySlot := make(map[string]*slotRuns)
	var order []string
	for _, r := range runs {
		if r.Tick.Trigger == cron.TriggerRequest {
			continue
		}
		key, keyed := r.Tick.Slot.Key()
		if !keyed {
			tb.Errorf("crontest: SucceededOncePerSlot(%q): the job's slots have no key (a duration policy's); it needs a Cron spec", job)
			return
		}
		sr := bySlot[key]
		if sr == nil {
			sr = &slotRuns{}
			bySlot[key] = sr
			order = append(order, key)
		}
		switch {
		case r.End.IsZero():
			sr.running = true
		case r.Err == nil:
			sr.ok = append(sr.ok, r)
		default:
			sr.failed = append(sr.failed, r)
		}
	}
	var faults []string
	for _, key := range order {
		switch sr := bySlot[key]; {
		case len(sr.ok) > 1:
			faults = append(faults, fmt.Sprintf("job %q succeeded %d times at slot %s: %s", job, len(sr.ok), key, describeRuns(sr.ok)))
		case len(sr.ok) == 0 && !sr.running:
			faults = append(faults, fmt.Sprintf("job %q did not succeed at slot %s: %s", job, key, describeRuns(sr.failed)))
		}
	}
	reportFaults(tb, "SucceededOncePerSlot", faults)
}

// NoSlotMissing reports through tb every slot of job that starts in [from,
// to) and that no run belongs to, with what each replica did at that slot's
// tick (a skip and its reason). A run counts whatever its outcome. from and
// to are times of the bubble's clock, and the slots are enumerated in
// from's location, as the replicas compute them (a replica whose clock is
// offset reads its slots' starts on its own clock). It reports a job that
// the cluster doesn't run, and one that is not a Cron spec's.
func (c *Cluster) NoSlotMissing(tb testing.TB, job string, from, to time.Time) {
	tb.Helper()
	runs, ok := c.runsOf(tb, "NoSlotMissing", job, false)
	if !ok {
		return
	}
	c.mu.Lock()
	every := c.jobIndex[job].Interval()
	c.mu.Unlock()
	ran := make(map[string]bool, len(runs))
	for _, r := range runs {
		ran[r.Tick.Slot.String()] = true
	}
	var faults []string
	slot, more := every.NextSlot(from.Add(-1))
	if !more {
		if _, isCron := every.NextSlot(from); !isCron {
			tb.Errorf("crontest: NoSlotMissing(%q): the job's interval, %v, has no slots of its own; it needs a Cron spec", job, every)
		}
		return
	}
	for ; more && slot.Start.Before(to); slot, more = every.NextSlot(slot.Start) {
		key := slot.String()
		if ran[key] {
			continue
		}
		msg := fmt.Sprintf("job %q did not run slot %s", job, key)
		c.mu.Lock()
		if why := c.skips[slotOf{job, key}]; len(why) > 0 {
			msg += " (" + strings.Join(why, "; ") + ")"
		} else {
			msg += " (no replica ticked for it)"
		}
		c.mu.Unlock()
		faults = append(faults, msg)
	}
	reportFaults(tb, "NoSlotMissing", faults)
}

// NoOverlap reports through tb every two runs of job that were in
// progress at once by the bubble's clock, on one replica or two, naming
// both; a run in progress counts as lasting until now. It is
// [Cluster.AtMostConcurrent] with a limit of 1, told run by run.
func (c *Cluster) NoOverlap(tb testing.TB, job string) {
	tb.Helper()
	runs, ok := c.runsOf(tb, "NoOverlap", job, false)
	if !ok {
		return
	}
	now := time.Now()
	var faults []string
	var longest *Run // of the runs so far, the one that ends last
	for i := range runs {
		r := &runs[i]
		if longest != nil && r.Start.Before(endOf(*longest, now)) {
			faults = append(faults, fmt.Sprintf("job %q ran twice at once: %s and %s",
				job, describeRun(*longest), describeRun(*r)))
		}
		if longest == nil || endOf(*r, now).After(endOf(*longest, now)) {
			longest = r
		}
	}
	reportFaults(tb, "NoOverlap", faults)
}

// AtMostConcurrent reports through tb if more than n runs of job, or of any
// job if job is "", were in progress at once by the bubble's clock, across
// replicas: once, at the first moment the most runs were, naming them. A
// run in progress counts as lasting until now.
func (c *Cluster) AtMostConcurrent(tb testing.TB, job string, n int) {
	tb.Helper()
	runs, ok := c.runsOf(tb, "AtMostConcurrent", job, true)
	if !ok {
		return
	}
	now := time.Now()
	var active, peak []Run
	for _, r := range runs { // by start
		active = slices.DeleteFunc(active, func(a Run) bool { return !endOf(a, now).After(r.Start) })
		active = append(active, r)
		if len(active) > len(peak) {
			peak = slices.Clone(active)
		}
	}
	if len(peak) > n {
		who := "job " + fmt.Sprintf("%q", job)
		if job == "" {
			who = "the jobs"
		}
		tb.Errorf("crontest: AtMostConcurrent: %s had %d runs at once at %s, want at most %d: %s",
			who, len(peak), format(peak[len(peak)-1].Start), n, describeRuns(peak))
	}
}

// runsOf returns the runs of job by start (if all, "" is every job's), and
// false, having failed tb, if the cluster runs no such job.
func (c *Cluster) runsOf(tb testing.TB, assertion, job string, all bool) ([]Run, bool) {
	tb.Helper()
	c.mu.Lock()
	_, known := c.jobIndex[job]
	names := make([]string, 0, len(c.jobIndex))
	for name := range c.jobIndex {
		names = append(names, name)
	}
	c.mu.Unlock()
	if !known && (job != "" || !all) {
		slices.Sort(names)
		tb.Errorf("crontest: %s: the cluster runs no job named %q; its jobs are %q", assertion, job, names)
		return nil, false
	}
	runs := c.Runs()
	if job != "" {
		runs = slices.DeleteFunc(runs, func(r Run) bool { return r.Job != job })
	}
	return runs, true
}

// reportFaults fails tb with each fault, up to maxReported, and the count of the
// rest.
func reportFaults(tb testing.TB, assertion string, faults []string) {
	tb.Helper()
	for i, f := range faults {
		if i == maxReported {
			tb.Errorf("crontest: %s: and %d more", assertion, len(faults)-i)
			return
		}
		tb.Errorf("crontest: %s: %s", assertion, f)
	}
}

// endOf returns when r ended, or now if it has not.
func endOf(r Run, now time.Time) time.Time {
	if r.End.IsZero() {
		return now
	}
	return r.End
}

func describeRuns(runs []Run) string {
	parts := make([]string, len(runs))
	for i, r := range runs {
		parts[i] = describeRun(r)
	}
	return strings.Join(parts, ", ")
}

// describeRun names a run for a message: replica, slot, times and outcome.
func describeRun(r Run) string {
	end := "still running"
	if !r.End.IsZero() {
		end = "to " + format(r.End)
	}
	s := fmt.Sprintf("replica %d's run for slot %s from %s %s", r.Replica, r.Tick.Slot, format(r.Start), end)
	if r.Err != nil {
		s += " (" + cmp.Or(r.Err.Error(), "error") + ")"
	}
	return s
}

func format(t time.Time) string { return t.Format("2006-01-02 15:04:05.999999999") }
