package cronsim

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/wakuwaku-go/wakuwaku/cron"
	"github.com/wakuwaku-go/wakuwaku/crontest"
	"github.com/wakuwaku-go/wakuwaku/interval"
)

// Violation is an invariant that a history breaks.
type Violation struct {
	// Invariant is "I1" to "I16" (see the package documentation), or "H"
	// for the harness: crontest reported an error.
	Invariant string
	// Rule names which of the invariant's checks it broke: "slot lost",
	// "retry lost" or "idle" for I4, for instance.
	Rule string
	Job  string
	At   time.Time
	Msg  string
}

func (v Violation) String() string {
	return fmt.Sprintf("%s (%s) %s at %s: %s", v.Invariant, v.Rule, v.Job, stamp(v.At), v.Msg)
}

// Margins of the checks.
const (
	// tickMargin is how long a replica and Redis must be well around a
	// tick for its slot to be owed a run or a Warn (I4): the claim's round
	// trip, with room.
	tickMargin = 10 * time.Second
	// requestMargin is how soon a run-now request is owed its run (I6).
	requestMargin = 5 * time.Second
	// defaultRunTTL is the run lease when LeaseConfig.RunTTL is 0: at
	// most 30 seconds.
	defaultRunTTL = 30 * time.Second
)

// Check returns the violations of the invariants that h shows, by time,
// leaving out those named in ignore.
func Check(sc *Scenario, h *History, ignore ...string) []Violation {
	c := newChecker(sc, h)
	if len(h.Harness) > 0 {
		c.add("H", "harness", "", h.End, "%s", strings.Join(h.Harness, "; "))
	}
	for i := range sc.Jobs {
		j := &sc.Jobs[i]
		c.up = c.jobUp(j.Name)
		c.overlaps(j)
		c.slotRuns(j)
		if j.Versions[0].Policy.Shared() {
			c.cronSlotsRun(j)
		} else {
			c.durationSlotsRun(j)
			c.durationRetried(j)
		}
		c.pauses(j)
		c.admissions(j)
		c.leases(j)
		if j.Versions[0].Policy.Shared() {
			c.skips(j)
		}
		c.requests(j)
		c.fences(j)
		c.records(j)
		c.catchUps(j)
		c.ownOutcomes(j)
		c.saidOnce(j)
		c.restartRetried(j)
		c.overruns(j)
	}
	c.batches()
	c.quiet()
	c.listedOnce()
	out := slices.DeleteFunc(c.out, func(v Violation) bool { return slices.Contains(ignore, v.Invariant) })
	slices.SortStableFunc(out, func(a, b Violation) int { return a.At.Compare(b.At) })
	return out
}

// span is a stretch of the bubble's time, [from, to).
type span struct{ from, to time.Time }

func (s span) contains(a, b time.Time) bool { return !a.Before(s.from) && !b.After(s.to) }

func (s span) meets(a, b time.Time) bool { return a.Before(s.to) && !b.Before(s.from) }

// checker holds a history and the timelines the scenario's events make.
type checker struct {
	sc         *Scenario
	h          *History
	start, end time.Time
	downs      []span // Redis down or restarting: commands fail
	stalls     []span // Redis stalled: commands wait
	bad        []span // both
	flushes    []time.Time
	lossy      []time.Time       // the failovers among flushes: they may have kept any key
	mayPause   map[string][]span // where a job may be paused: a pause that a lossy failover may have kept
	up         [Replicas][]span  // each replica's runtimes with the job being checked (jobUp)
	upAll      [Replicas][]span  // each replica's runtimes
	live       [Replicas][]span  // upAll, each runtime until its Shutdown returned
	removed    map[string][Replicas][]span
	frozen     [Replicas][]span
	steps      [Replicas][]Event
	deploys    [Replicas][]Event
	paused     map[string][]span
	out        []Violation
}

func newChecker(sc *Scenario, h *History) *checker {
	runs := *h
	runs.Runs = slices.Clone(h.Runs)
	slices.SortStableFunc(runs.Runs, func(a, b Run) int { return a.Start.Compare(b.Start) })
	h = &runs
	c := &checker{sc: sc, h: h, start: sc.Start, end: h.End, paused: make(map[string][]span), mayPause: make(map[string][]span),
		removed: make(map[string][Replicas][]span)}
	if c.end.IsZero() {
		c.end = sc.Start.Add(sc.Span)
	}
	var upSince [Replicas]time.Time
	for i := range upSince {
		upSince[i] = sc.Start
	}
	down := func(i int, at time.Time) {
		if !upSince[i].IsZero() {
			c.up[i] = append(c.up[i], span{upSince[i], at})
			upSince[i] = time.Time{}
		}
	}
	// Where a replica's runtime had no job of a name (Remove to Add); the
	// simulation skips a Remove or Add that would change nothing.
	removedSince := make(map[string]*[Replicas]time.Time)
	for _, e := range sc.Events {
		at := sc.Start.Add(e.At)
		switch e.Kind {
		case Remove, Add:
			rs := removedSince[e.Job]
			if rs == nil {
				rs = new([Replicas]time.Time)
				removedSince[e.Job] = rs
			}
			if e.Kind == Remove && rs[e.Replica].IsZero() {
				rs[e.Replica] = at
			} else if e.Kind == Add && !rs[e.Replica].IsZero() {
				sp := c.removed[e.Job]
				sp[e.Replica] = append(sp[e.Replica], span{rs[e.Replica], at})
				c.removed[e.Job] = sp
				rs[e.Replica] = time.Time{}
			}
		case Replace:
			c.deploys[e.Replica] = append(c.deploys[e.Replica], e)
		case Freeze:
			c.frozen[e.Replica] = append(c.frozen[e.Replica], span{at, at.Add(e.D)})
		case Kill, Shutdown:
			// A Shutdown stops the replica's claims at once; its runs
			// go on while it waits.
			down(e.Replica, at)
		case Restart, Deploy:
			down(e.Replica, at)
			upSince[e.Replica] = at
			if e.Kind == Deploy {
				c.deploys[e.Replica] = append(c.deploys[e.Replica], e)
			}
		case RedisDown:
			c.downs = append(c.downs, span{at, at.Add(e.D)})
		case RedisStall:
			c.stalls = append(c.stalls, span{at, at.Add(e.D)})
		case RedisRestart:
			c.downs = append(c.downs, span{at, at.Add(e.D + time.Nanosecond)})
			c.flushes = append(c.flushes, at)
		case Failover:
			// Without WithReplicas, a failover loses writes as a
			// restart loses keys; with it, none that decides who runs.
			at = at.Add(e.Lag)
			c.downs = append(c.downs, span{at, at.Add(e.D + time.Nanosecond)})
			if !sc.Replicated {
				c.flushes = append(c.flushes, at)
				c.lossy = append(c.lossy, at)
			}
		case StepClock:
			c.steps[e.Replica] = append(c.steps[e.Replica], e)
		}
	}
	for i := range upSince {
		down(i, c.end)
	}
	for job, rs := range removedSince {
		sp := c.removed[job]
		for i, t := range rs {
			if !t.IsZero() {
				sp[i] = append(sp[i], span{t, c.end})
			}
		}
		c.removed[job] = sp
	}
	c.upAll = c.up
	// A runtime that Shutdown stopped claiming goes on recording its
	// runs' ends until Shutdown returned, or a Restart killed it.
	for i := range Replicas {
		c.live[i] = slices.Clone(c.upAll[i])
	}
	for _, op := range h.Shutdowns {
		i := op.Replica
		for k := range c.live[i] {
			if !c.live[i][k].to.Equal(op.At) {
				continue
			}
			to := op.Done
			if to.IsZero() {
				to = c.end
			}
			if k+1 < len(c.live[i]) && c.live[i][k+1].from.Before(to) {
				to = c.live[i][k+1].from
			}
			c.live[i][k].to = later(op.At, to)
		}
	}
	// A failover's instant is its master's crash, a lag after the event.
	slices.SortFunc(c.flushes, time.Time.Compare)
	slices.SortFunc(c.downs, func(a, b span) int { return a.from.Compare(b.from) })
	c.bad = append(slices.Clone(c.downs), c.stalls...)
	// A pause lasts from the Pause that the record took to the Resume,
	// or to Redis losing the record.
	since := make(map[string]time.Time)
	stop := func(job string, at time.Time) {
		if p, ok := since[job]; ok {
			c.paused[job] = append(c.paused[job], span{p, at})
			delete(since, job)
		}
	}
	// A lossy failover may have kept a pause or lost it: from it to the
	// job's next command, the job may be paused.
	maySince := make(map[string]time.Time)
	mayStop := func(job string, at time.Time) {
		if p, ok := maySince[job]; ok {
			c.mayPause[job] = append(c.mayPause[job], span{p, at})
			delete(maySince, job)
		}
	}
	flushes := slices.Clone(c.flushes)
	for _, op := range h.Admin {
		for len(flushes) > 0 && !flushes[0].After(op.At) {
			for job := range since {
				if slices.Contains(c.lossy, flushes[0]) {
					if _, ok := maySince[job]; !ok {
						maySince[job] = flushes[0]
					}
				}
				stop(job, flushes[0])
			}
			flushes = flushes[1:]
		}
		if op.Err != nil {
			continue
		}
		switch op.Kind {
		case Pause:
			mayStop(op.Job, op.At)
			if _, ok := since[op.Job]; !ok {
				since[op.Job] = op.At
			}
		case Resume:
			mayStop(op.Job, op.At)
			stop(op.Job, op.At)
		}
	}
	for job := range maySince {
		mayStop(job, c.end)
	}
	for job, p := range since {
		end := c.end
		for _, f := range flushes {
			if f.After(p) {
				end = f
				break
			}
		}
		c.paused[job] = append(c.paused[job], span{p, end})
		if end.Before(c.end) && slices.Contains(c.lossy, end) {
			c.mayPause[job] = append(c.mayPause[job], span{end, c.end})
		}
	}
	return c
}

// jobUp returns each replica's runtimes with the job named job: its
// runtimes, less where Remove took the job out.
func (c *checker) jobUp(job string) [Replicas][]span {
	var out [Replicas][]span
	for i := range Replicas {
		for _, u := range c.upAll[i] {
			rest := []span{u}
			for _, r := range c.removed[job][i] {
				var next []span
				for _, x := range rest {
					if !r.meets(x.from, x.to) {
						next = append(next, x)
						continue
					}
					if x.from.Before(r.from) {
						next = append(next, span{x.from, r.from})
					}
					if r.to.Before(x.to) {
						next = append(next, span{r.to, x.to})
					}
				}
				rest = next
			}
			out[i] = append(out[i], rest...)
		}
	}
	return out
}

// frozenDuring reports whether replica i's process was frozen at some time
// in [a, b].
func (c *checker) frozenDuring(i int, a, b time.Time) bool {
	for _, s := range c.frozen[i] {
		if s.meets(a, b) {
			return true
		}
	}
	return false
}

func (c *checker) add(inv, rule, job string, at time.Time, format string, args ...any) {
	c.out = append(c.out, Violation{Invariant: inv, Rule: rule, Job: job, At: at, Msg: fmt.Sprintf(format, args...)})
}

// healthy reports whether Redis served every command in [a, b] as it
// came, without losing its keys.
func (c *checker) healthy(a, b time.Time) bool {
	for _, s := range c.bad {
		if s.meets(a, b) {
			return false
		}
	}
	return true
}

// lossBetween reports whether a failover in [a, b] lost some writes, and
// perhaps not all.
func (c *checker) lossBetween(a, b time.Time) bool {
	for _, f := range c.lossy {
		if !f.Before(a) && !f.After(b) {
			return true
		}
	}
	return false
}

// lastFlush returns the last instant in [a, b] at which Redis lost every
// key, if there is one.
func (c *checker) lastFlush(a, b time.Time) (time.Time, bool) {
	var last time.Time
	for _, f := range c.flushes {
		if !f.Before(a) && !f.After(b) {
			last = f
		}
	}
	return last, !last.IsZero()
}

// flushed reports whether Redis lost every key in [a, b].
func (c *checker) flushed(a, b time.Time) bool {
	for _, f := range c.flushes {
		if !f.Before(a) && !f.After(b) {
			return true
		}
	}
	return false
}

// healthyFrom returns the first instant from a at which Redis is healthy
// for d.
func (c *checker) healthyFrom(a time.Time, d time.Duration) time.Time {
	for moved := true; moved; {
		moved = false
		for _, s := range c.bad {
			if s.meets(a, a.Add(d)) {
				a, moved = s.to, true
			}
		}
	}
	return a
}

// arrival returns when a command that replica i sent at t reached Redis,
// as crontest takes it there: held to the end of a stall, then the
// replica's latency. It returns false if the command failed: Redis was
// down when it arrived, the replica was killed first, or it took longer
// than timeout.
func (c *checker) arrival(i int, t time.Time, timeout time.Duration) (time.Time, bool) {
	at := t
	for moved := true; moved; {
		moved = false
		for _, s := range append(slices.Clone(c.stalls), c.frozen[i]...) {
			if !at.Before(s.from) && at.Before(s.to) {
				at, moved = s.to, true
			}
		}
	}
	at = at.Add(c.sc.Latencies[i])
	if at.Sub(t) > timeout || !c.liveThrough(i, t, at) {
		return at, false
	}
	for _, s := range c.downs {
		if !at.Before(s.from) && at.Before(s.to) {
			return at, false
		}
	}
	return at, true
}

// eventualArrival is arrival for a command that is sent again while Redis
// is down or stalled (R13's completion): the first send, or one right
// after an outage ends, that gets through within within of t.
func (c *checker) eventualArrival(i int, t time.Time, within time.Duration) (time.Time, bool) {
	sends := []time.Time{t}
	for _, s := range c.downs {
		if s.to.After(t) {
			sends = append(sends, s.to)
		}
	}
	for _, s := range append(slices.Clone(c.stalls), c.frozen[i]...) {
		if s.to.After(t) {
			sends = append(sends, s.to)
		}
	}
	slices.SortFunc(sends, time.Time.Compare)
	for _, x := range sends {
		if x.Sub(t) > within {
			break
		}
		if at, ok := c.arrival(i, x, within-x.Sub(t)); ok {
			return at, true
		}
	}
	return time.Time{}, false
}

// upThrough reports whether replica i ran one runtime throughout [a, b].
func (c *checker) upThrough(i int, a, b time.Time) bool {
	for _, s := range c.up[i] {
		if s.contains(a, b) {
			return true
		}
	}
	return false
}

// liveThrough reports whether replica i ran one runtime throughout [a, b],
// with the job or without: a run of a job that Remove took out goes on,
// and records its end.
func (c *checker) liveThrough(i int, a, b time.Time) bool {
	for _, s := range c.live[i] {
		if s.contains(a, b) {
			return true
		}
	}
	return false
}

// upDuring reports whether replica i ran a runtime at some time in [a, b].
func (c *checker) upDuring(i int, a, b time.Time) bool {
	for _, s := range c.up[i] {
		if s.meets(a, b) {
			return true
		}
	}
	return false
}

// hearsBy returns when a run-now request published at p is owed its run
// by a replica whose client can subscribe (see Scenario.ProcessOnly: one
// that can't serves a request at its next tick), if one ran a runtime
// from a second before p until then: no sooner than due, and a few
// seconds after that replica's E5 reaches Redis. A replica frozen as it
// hears the request sends E5 as its freeze ends (seeds 60661, 62370).
func (c *checker) hearsBy(p, due time.Time) (time.Time, bool) {
	var best time.Time
	for i := range Replicas {
		if c.sc.ProcessOnly[i] && !c.sc.Replicated {
			continue
		}
		send := p
		for moved := true; moved; {
			moved = false
			for _, s := range c.frozen[i] {
				if s.meets(p, send.Add(time.Second)) && s.to.After(send) {
					send, moved = s.to, true
				}
			}
		}
		by := later(due, send.Add(c.sc.Latencies[i]+requestMargin))
		if c.upThrough(i, p.Add(-time.Second), by) && (best.IsZero() || by.Before(best)) {
			best = by
		}
	}
	return best, !best.IsZero()
}

// pausedDuring reports whether job was, or may have been, paused at any
// time in [a, b].
func (c *checker) pausedDuring(job string, a, b time.Time) bool {
	for _, s := range append(slices.Clone(c.paused[job]), c.mayPause[job]...) {
		if s.meets(a, b) {
			return true
		}
	}
	return false
}

// offset returns how far replica i's clock was ahead at t.
func (c *checker) offset(i int, t time.Time) time.Duration {
	o := c.sc.Offsets[i]
	for _, e := range c.steps[i] {
		if !c.start.Add(e.At).After(t) {
			o += e.D
		}
	}
	return o
}

// skewed reports whether some replica's clock was more than tickMargin
// off at t, or was stepped within the step and tickMargin of t: a replica
// ahead runs slots early, and the others then find a later slot run and
// skip theirs.
func (c *checker) skewed(t time.Time) bool {
	for i := range Replicas {
		if c.offset(i, t).Abs() > tickMargin {
			return true
		}
		for _, e := range c.steps[i] {
			at := c.start.Add(e.At)
			d := e.D.Abs() + tickMargin
			if t.After(at.Add(-d)) && t.Before(at.Add(d)) {
				return true
			}
		}
	}
	return false
}

// steppedBetween reports whether a replica's clock was stepped between
// from and to: a duration policy's next tick on a stepped clock comes
// early or late by the step, so the lease spacing of the slots on either
// side of it is not owed (the slots are named by the replica's clock).
func (c *checker) steppedBetween(from, to time.Time) bool {
	for i := range Replicas {
		for _, e := range c.steps[i] {
			if at := c.start.Add(e.At); !at.Before(from) && !at.After(to) {
				return true
			}
		}
	}
	return false
}

// steppedAcross reports whether replica i's clock was stepped near the
// true time at which it showed at (within the offsets before and after the
// step, and tickMargin): a step forward may jump over at, so that no tick
// of at comes, and the tick time that the offset after the step gives may
// lie before the step itself (seed 2007051).
func (c *checker) steppedAcross(i int, at time.Time) bool {
	for _, e := range c.steps[i] {
		when := c.start.Add(e.At)
		d := c.offset(i, when.Add(-time.Nanosecond)).Abs() + c.offset(i, when).Abs() + tickMargin
		if when.After(at.Add(-d)) && when.Before(at.Add(d)) {
			return true
		}
	}
	return false
}

// steppedBack returns how far replica i's clock was stepped back within
// [a, b]: a duration policy's next tick on that replica comes as much
// later (seed 31831).
func (c *checker) steppedBack(i int, a, b time.Time) time.Duration {
	var d time.Duration
	for _, e := range c.steps[i] {
		when := c.start.Add(e.At)
		if when.Before(a) || when.After(b) {
			continue
		}
		if back := c.offset(i, when.Add(-time.Nanosecond)) - c.offset(i, when); back > 0 {
			d += back
		}
	}
	return d
}

// version returns the release of job that replica i ran at t.
func (c *checker) version(i int, job string, t time.Time) int {
	v := 0
	for _, e := range c.deploys[i] {
		if e.Job == job && !c.start.Add(e.At).After(t) {
			v = e.Version
		}
	}
	return v
}

func (c *checker) runsOf(job string) []*Run {
	var out []*Run
	for i := range c.h.Runs {
		if c.h.Runs[i].Job == job {
			out = append(out, &c.h.Runs[i])
		}
	}
	return out
}

// runTTL is the job's run lease.
func runTTL(j *Job) time.Duration {
	if j.RunTTL > 0 {
		return j.RunTTL
	}
	return defaultRunTTL
}

// resendGap is the longest that R13 waits between two sends of a
// completion: a third of the run lease, or the back-off if longer.
func resendGap(j *Job) time.Duration {
	return max(j.Backoff, runTTL(j)/3)
}

// held is when r stopped holding the job: its effective end, or, for a run
// whose replica was killed or that went on past its deadline, when its run
// lease ran out.
func (c *checker) held(j *Job, r *Run) time.Time {
	if errors.Is(r.Err, crontest.ErrKilled) || c.notRecorded(j, r) || c.unsent(j, r) {
		end := r.End
		if end.IsZero() {
			end = c.end
		}
		return end.Add(runTTL(j))
	}
	if errors.Is(r.Cause, cron.ErrRunDeadline) {
		// Past its deadline, a run that ignores its context holds the
		// job until it returns, or its lease lapses after (seed 1928).
		end := r.End
		if end.IsZero() {
			end = c.end
		}
		return end.Add(runTTL(j))
	}
	return r.effectiveEnd(c.end)
}

// notRecorded reports whether r's end was not sent because its replica's
// Shutdown gave up and returned first: r ended after that, or is still
// going, or its completion, sent again through an outage (R13), could not
// have reached Redis by then (seeds 9753, 10478). Its run lease runs out
// by itself, as a killed replica's does.
func (c *checker) notRecorded(j *Job, r *Run) bool {
	for _, op := range c.h.Shutdowns {
		if op.Replica != r.Replica || op.Err == nil || op.Done.IsZero() || !r.Start.Before(op.Done) || !c.liveThrough(r.Replica, r.Start, op.At) {
			continue
		}
		if r.End.IsZero() || !r.End.Before(op.Done) {
			return true
		}
		if at, ok := c.eventualArrival(r.Replica, r.End, runTTL(j)); !ok || !at.Add(resendGap(j)).Before(op.Done) {
			return true
		}
	}
	return false
}

// unsent reports whether r returned and its completion could not reach
// Redis, sent again through outages (R13), before its run lease ran out:
// its replica died first, or Redis stayed away (seed 10346). Its run lease
// runs out by itself.
func (c *checker) unsent(j *Job, r *Run) bool {
	if r.End.IsZero() || errors.Is(r.Err, crontest.ErrKilled) || !r.Cancelled.IsZero() {
		return false
	}
	at, ok := c.eventualArrival(r.Replica, r.End, runTTL(j))
	return !ok || !c.liveThrough(r.Replica, r.Start, at) // a send of the replica's next runtime is not this one's
}

// I1: never two runs of a job at once while its record survives. A run
// lasts until it returned or its context told it to stop (a run that
// ignores its context is the job's fault); Redis losing every key between
// two runs' starts excuses their overlap.
func (c *checker) overlaps(j *Job) {
	var active []*Run
	for _, r := range c.runsOf(j.Name) {
		active = slices.DeleteFunc(active, func(a *Run) bool { return !a.effectiveEnd(c.end).After(r.Start) })
		for _, a := range active {
			f, ok := c.lastFlush(a.Start, r.Start)
			if !ok {
				c.add("I1", "overlap", j.Name, r.Start, "two runs at once: %s, and %s", describe(a), describe(r))
				continue
			}
			// The loss excuses the overlap for a run lease: the run from
			// before it loses its lease at its next heartbeat, or when
			// its lease's deadline passes without one, and is cancelled.
			if end := earlier(a.effectiveEnd(c.end), r.effectiveEnd(c.end)); end.After(f.Add(runTTL(j) + tickMargin)) {
				c.add("I1", "overlap after loss", j.Name, f.Add(runTTL(j)+tickMargin),
					"two runs at once for %v after Redis lost the record at %s (a run lease is %v): %s, and %s",
					end.Sub(f), stamp(f), runTTL(j), describe(a), describe(r))
			}
		}
		active = append(active, r)
	}
}

// slot is the runs of one slot that no operator requested: for a Cron
// spec, those whose tick names the slot, between two losses of every key;
// for a duration policy, a run of the schedule or a catch-up, which opens
// a slot, and the retries after it.
type slot struct {
	key   string
	start time.Time // the Cron slot's start, or the opening run's
	end   time.Time // the Cron slot's end; zero for a duration policy's
	runs  []*Run
}

func (c *checker) slots(j *Job) []*slot {
	var out []*slot
	byKey := make(map[string]*slot)
	for _, r := range c.runsOf(j.Name) {
		if r.Tick.Trigger == cron.TriggerRequest {
			continue
		}
		if key, ok := r.Tick.Slot.Key(); ok {
			flushes := 0
			for _, f := range c.flushes {
				if f.Before(r.Start) {
					flushes++
				}
			}
			k := fmt.Sprintf("%s/%d", key, flushes)
			s := byKey[k]
			if s == nil {
				s = &slot{key: key, start: r.Tick.Slot.Start, end: r.Tick.Slot.End}
				byKey[k] = s
				out = append(out, s)
			}
			s.runs = append(s.runs, r)
			continue
		}
		if r.Tick.Trigger == cron.TriggerRetry && len(out) > 0 {
			last := out[len(out)-1]
			last.runs = append(last.runs, r)
			continue
		}
		out = append(out, &slot{key: "opened " + stamp(r.Start), start: r.Start, runs: []*Run{r}})
	}
	return out
}

// closing returns the run that closed s, done or failed after its last
// attempt, as its record must say: one that returned on a live replica
// with its lease, and whose completion Redis served; without eventually,
// served as it came, not held by a stall (which may have let a claim
// record the run lost first).
func (c *checker) closing(j *Job, s *slot, eventually bool) *Run {
	for _, r := range s.runs {
		if r.End.IsZero() || !r.Cancelled.IsZero() || errors.Is(r.Err, crontest.ErrKilled) {
			continue
		}
		// The completion is sent as the run returns, with a run lease to
		// get through; and again while Redis does not answer (R13), as
		// long as the slot lasts, which may or may not come before a
		// claim records the run lost: with eventually, such a completion
		// counts too.
		at, ok := c.arrival(r.Replica, r.End, runTTL(j))
		if ok && !eventually && at.After(r.End.Add(c.sc.Latencies[r.Replica])) {
			// A stall held it: the run lease may have run out on the
			// server meanwhile, and another replica's claim, held by the
			// same stall, may have come first and recorded the run lost
			// (C1), so that the slot is open again (seed 1009168).
			ok = false
		}
		if !ok && eventually {
			at, ok = c.eventualArrival(r.Replica, r.End, max(runTTL(j), s.end.Sub(r.End)))
		}
		if !ok || !c.liveThrough(r.Replica, r.Start, at) {
			continue
		}
		if r.Err == nil || r.Tick.Attempt >= j.Versions[r.Version].Attempts {
			return r
		}
	}
	return nil
}

// I2: a slot's non-requested runs are at most its attempts (the most any
// release of the job gives); a duration policy's slots open no closer than
// the slot's lease, unless Redis lost every key in between.
// I3: no non-requested run of a slot after it was done or failed.
func (c *checker) slotRuns(j *Job) {
	most, lease := 0, time.Duration(1<<63-1)
	for _, v := range j.Versions {
		most = max(most, v.Attempts)
		lease = min(lease, v.LeaseTTL())
	}
	var prev *slot
	for _, s := range c.slots(j) {
		if len(s.runs) > most {
			c.add("I2", "attempts", j.Name, s.runs[most].Start, "%s had %d runs, attempts %d: %s", s.key, len(s.runs), most, describeAll(s.runs))
		}
		if closed := c.closing(j, s, false); closed != nil {
			for _, r := range s.runs {
				if r.Start.After(closed.End) {
					c.add("I3", "closed", j.Name, r.Start, "%s ran after it was closed by %s: %s", s.key, describe(closed), describe(r))
				}
			}
		}
		c.backoffs(j, s)
		if !j.Versions[0].Policy.Shared() && prev != nil && !c.flushed(prev.start, s.start) {
			// The lease of the slot that prev opened ran out lease after
			// the tick that opened it, read on its replica's clock.
			first := prev.runs[0]
			opened := first.Tick.Slot.Start.Add(-c.offset(first.Replica, first.Start))
			if !c.skewed(first.Start) && !c.skewed(s.start) && !c.steppedBetween(first.Start, s.start) && s.start.Before(opened.Add(lease-time.Millisecond)) {
				c.add("I2", "lease", j.Name, s.start, "a slot opened %v after the tick that opened the last one, within its lease (%v): %s, then %s",
					s.start.Sub(opened), lease, describe(first), describe(s.runs[0]))
			}
		}
		prev = s
	}
}

// backoffs checks I2's back-off: a run of slot s that failed, returned on
// a live replica and whose completion Redis served as it came, leaves the
// slot waiting for the back-off (Backoff, doubled for each attempt after
// the first, at most 64 times): the slot's next run starts no sooner,
// unless an operator requested it or Redis lost the record meanwhile.
func (c *checker) backoffs(j *Job, s *slot) {
	base := j.Backoff
	if base == 0 {
		base = time.Second
	}
	for k := 0; k+1 < len(s.runs); k++ {
		r, next := s.runs[k], s.runs[k+1]
		if r.Err == nil || r.End.IsZero() || !r.Cancelled.IsZero() || errors.Is(r.Err, crontest.ErrKilled) {
			continue
		}
		at, ok := c.arrival(r.Replica, r.End, runTTL(j))
		if !ok || at.After(r.End.Add(c.sc.Latencies[r.Replica])) || c.flushed(r.Start, next.Start) {
			continue
		}
		d := base
		for i := 1; i < r.Tick.Attempt && d < 64*base; i++ {
			d *= 2
		}
		d = min(d, 64*base)
		if next.Start.Before(at.Add(d - time.Millisecond)) {
			c.add("I2", "back-off", j.Name, next.Start, "%s ran again %v after its failed attempt was recorded, before its back-off of %v: %s, then %s",
				s.key, next.Start.Sub(at), d, describe(r), describe(next))
		}
	}
}

// warned reports whether a replica logged, at Warn or above with a
// reason, a skip of the job's tick scheduled at sched (the zero time: any
// tick) within [a, b].
func (c *checker) warned(job string, sched, a, b time.Time) bool {
	dues := []time.Time{sched}
	if j, ok := c.sc.job(job); ok && !sched.IsZero() {
		for _, v := range j.Versions {
			dues = append(dues, v.Interval(false).Due(job, sched))
		}
	}
	for _, l := range c.h.Logs {
		if l.Job == job && l.Reason != "" && (sched.IsZero() || slices.ContainsFunc(dues, l.Scheduled.Equal)) && !l.At.Before(a) && !l.At.After(b) {
			return true
		}
	}
	return false
}

// msgSkipRecorded is the message of the Warn with which the replica whose
// claim recorded a slot skipped says so (PROTOCOL.md, R20).
const msgSkipRecorded = "cron job skipped a slot; recorded in its history"

// msgClaimWindowOver is the message of the Warn with which a replica says
// that its completion closed a slot as failed with attempts left (R12).
const msgClaimWindowOver = "cron job's slot failed: its claim window ends before its retry would be due"

// msgLookAfterRun is the Debug line with which a replica whose tick came
// in mode skip, and found no run holding the job, plans a look at the slot
// for when its own run ends (E13).
const msgLookAfterRun = "cron job's tick found its own run's lease lost; looking at its slot once that run ends"

// msgLookAfterRunError is the Debug line with which a replica whose tick
// came in mode skip, and got no answer from Redis, plans the same look.
const msgLookAfterRunError = "cron job's tick got no answer while its own run goes on; looking at its slot once that run ends"

// accounted reports whether a replica said, within [a, b], that the job's
// tick scheduled at sched (by any release) ended as a user can see without
// a run: its claim recorded the slot skipped (R20), or the replicas did
// not acknowledge its claim, whose run lease then lapses and C1 records
// the attempt lost (R17).
func (c *checker) accounted(job string, sched, a, b time.Time) bool {
	dues := []time.Time{sched}
	if j, ok := c.sc.job(job); ok {
		for _, v := range j.Versions {
			dues = append(dues, v.Interval(false).Due(job, sched))
		}
	}
	var keys []string // the slot's key, by each release that has it
	if j, ok := c.sc.job(job); ok {
		for _, v := range j.Versions {
			if s, ok := v.Interval(false).NextSlot(sched.Add(-time.Nanosecond)); ok && s.Start.Equal(sched) {
				key, _ := s.Key()
				keys = append(keys, key)
			}
		}
	}
	for _, l := range c.h.Logs {
		// A start's tick of a slot in its claim window is scheduled at
		// the start: its record names the slot.
		named := slices.ContainsFunc(dues, l.Scheduled.Equal) || l.Slot != "" && slices.Contains(keys, l.Slot)
		if l.Job == job && (l.Msg == msgSkipRecorded || l.Reason == cron.ReasonNotReplicated) && named &&
			!l.At.Before(a) && !l.At.After(b) {
			return true
		}
	}
	return false
}

// replacedNear reports whether replica i's job was replaced within
// tickMargin of [a, b], a slot's start and its tick: the new job's first
// tick is the first its interval has after the Replace, so a tick then may
// come from neither.
// replacedLosing reports whether a Replace of job on replica i, from a
// little before the start a of a slot to a little after its tick b in
// release v (the release it put in place), may have cost the replica the
// slot's tick: one as the tick came. A Replace inside the slot's spread
// window, whatever release it replaced, queues the slot's tick at its due
// time in the new one (cron.Runtime.Replace).
func (c *checker) replacedLosing(i int, job string, a, b time.Time) bool {
	for _, e := range c.deploys[i] {
		at := c.start.Add(e.At)
		if e.Kind != Replace || e.Job != job || !at.After(a.Add(-tickMargin)) || !at.Before(b.Add(tickMargin)) {
			continue
		}
		if !at.Before(b.Add(-tickMargin)) {
			return true
		}
	}
	return false
}

func (c *checker) replacedNear(i int, job string, a, b time.Time) bool {
	for _, e := range c.deploys[i] {
		if at := c.start.Add(e.At); e.Kind == Replace && e.Job == job && at.After(a.Add(-tickMargin)) && at.Before(b.Add(tickMargin)) {
			return true
		}
	}
	return false
}

// stepDelays reports whether a forward step of replica i's clock, after
// its previous slot began at prev (and so possibly after its timer was set
// for the tick of slot s, which the offset after the step puts at b, and
// s's start at a, by the true clock), may have put that tick as late as
// the step: the runtime's timer waits on the monotonic clock
// (crontest.Cluster.StepClock). The tick is
// then owed only if, through that delay, the replica stayed up with
// release v, unreplaced, with Redis well and the job not paused, and the
// late tick still came within the slot's lease by the replica's clock
// (seeds 17919, 85574).
func (c *checker) stepDelays(i int, job string, v int, ver Version, s interval.Slot, prev, a, b time.Time) bool {
	var fwd time.Duration
	for _, e := range c.steps[i] {
		if at := c.start.Add(e.At); e.D > 0 && at.After(prev) && at.Before(b) {
			fwd += e.D
		}
	}
	if fwd == 0 {
		return false
	}
	late := b.Add(fwd)
	return late.Add(tickMargin).After(c.end) || !late.Add(c.offset(i, late)).Add(tickMargin).Before(ver.LeaseEnd(s)) ||
		c.version(i, job, late) != v || !c.upThrough(i, b, late.Add(tickMargin)) || !c.healthy(b, late.Add(tickMargin)) ||
		c.frozenDuring(i, b, late.Add(tickMargin)) || c.replacedNear(i, job, a, late) || c.pausedDuring(job, b, late.Add(tickMargin))
}

// I4, for a Cron spec: a slot at whose tick some replica was up, on its own
// clock, with Redis well and the job not paused, ends in an outcome a user
// can see: it runs, or its skip is recorded (see accounted); unless a
// replica's clock was skewed then (see skewed). And a slot whose last run failed with
// attempts left runs again, if a replica stayed up from that run on and
// Redis was then well long enough within the slot for the run lease and
// the back-off to pass.
func (c *checker) cronSlotsRun(j *Job) {
	ran := make(map[string]*slot)
	for _, s := range c.slots(j) {
		ran[s.key] = s // the latest since a loss of every key
	}
	seen := make(map[string]bool)
	for v, ver := range j.Versions {
		every := ver.Interval(j.NoStartup)
		last := c.start.Add(-time.Hour) // the previous slot's start
		for s, ok := every.NextSlot(last); ok && s.Start.Before(c.end); s, ok = every.NextSlot(s.Start) {
			prev := last
			last = s.Start
			key, _ := s.Key()
			if seen[key] || ran[key] != nil {
				continue
			}
			due := every.Due(j.Name, s.Start)
			for i := range Replicas {
				// A runtime started, or a job replaced, after the slot's
				// start has its first tick in the next slot: with a
				// spread, a tick due after its start may not come.
				b, a := due.Add(-c.offset(i, due)), s.Start.Add(-c.offset(i, s.Start))
				if b.Add(tickMargin).After(c.end) || c.skewed(b) || c.steppedAcross(i, due) || c.version(i, j.Name, b) != v ||
					!c.upThrough(i, a.Add(-time.Second), b.Add(tickMargin)) || !c.healthy(b.Add(-time.Second), b.Add(tickMargin)) ||
					c.frozenDuring(i, b.Add(-tickMargin), b.Add(tickMargin)) || c.replacedLosing(i, j.Name, a, b) ||
					c.pausedDuring(j.Name, b.Add(-tickMargin), b.Add(tickMargin)) {
					continue
				}
				if c.stepDelays(i, j.Name, v, ver, s, prev, a, b) {
					continue
				}
				seen[key] = true
				if !c.accounted(j.Name, s.Start, s.Start.Add(-time.Hour), c.end) {
					c.add("I4", "slot lost", j.Name, b, "slot %s did not run, and no replica recorded it skipped: replica %d was up with Redis at its tick", key, i)
				}
				break
			}
		}
	}
	for _, s := range ran {
		c.retried(j, s)
	}
}

// retried checks that a Cron slot whose last run failed with attempts left
// ran again (I4), unless Redis lost the record meanwhile.
func (c *checker) retried(j *Job, s *slot) {
	last := s.runs[len(s.runs)-1]
	// The attempts the record counts: the runs since it was last lost, or
	// more, as the last run's attempt says, if a failover kept some from
	// before (seed 3886: a failover kept the first attempt, and the third,
	// the last, lost its lease).
	tried := max(len(s.runs), last.Tick.Attempt)
	if c.closing(j, s, true) != nil || tried >= j.Versions[last.Version].Attempts {
		return
	}
	backoff := j.Backoff
	if backoff == 0 {
		backoff = time.Second
	}
	// A failed attempt whose back-off ends after the slot's claim window,
	// as the release of its replica reckons it, closes the slot in its
	// completion (R12, claim window over), though a replica of another
	// release, with a longer window, could have retried it (PROTOCOL.md,
	// Limits; seed 5003778).
	if v := j.Versions[last.Version]; last.Err != nil && !errors.Is(last.Err, crontest.ErrKilled) && !last.End.IsZero() {
		d := backoff
		for i := 1; i < last.Tick.Attempt && d < 64*backoff; i++ {
			d *= 2
		}
		if !last.End.Add(min(d, 64*backoff)).Before(v.LeaseEnd(last.Tick.Slot)) {
			return
		}
	}
	wait := runTTL(j) + 4*backoff + tickMargin
	from := c.healthyFrom(c.held(j, last), wait)
	// Another run that holds the job meanwhile (a requested one, say)
	// puts the retry off until it ends (R2 for E2 and E3: again when the
	// lease ends; seed 3002930).
	for moved := true; moved; {
		moved = false
		for _, r := range c.runsOf(j.Name) {
			if r != last && !r.Start.Before(last.Start) && r.Start.Before(from.Add(wait)) && c.held(j, r).After(from) {
				from, moved = c.healthyFrom(c.held(j, r), wait), true
			}
		}
	}
	due := from.Add(wait)
	if !due.Before(s.end) || due.After(c.end) || c.pausedDuring(j.Name, last.Start, due) || c.skewed(last.Start) || c.skewed(due) ||
		c.flushed(last.Start, due) { // the record, and its attempts, are gone
		return
	}
	// A release whose schedule has a slot inside this one (a deploy that
	// changed the interval) ran it meanwhile: the record holds one slot a
	// job, and its claim made this one past (PROTOCOL.md, Limits; seed
	// 6009650).
	for _, r := range c.runsOf(j.Name) {
		if r.Start.After(last.Start) && r.Start.Before(due) && r.Tick.Slot.Start.After(s.start) && r.Tick.Slot.Start.Before(s.end) {
			return
		}
	}
	// A replica that stayed up, running a release whose schedule has the
	// slot and whose attempts it has not spent (a deploy may have changed
	// either).
	// A replica up meanwhile whose release gives the slot no more attempts
	// than it had may have claimed it and closed it as failed (a rolling
	// deploy that lowers Attempts: PROTOCOL.md, the state of S; seed
	// 2002456). So may the replica that ran the last attempt, replaced
	// meanwhile by a release whose schedule lacks the slot: Replace keeps
	// its retry, within the new release's attempts (seed 82042).
	own := !errors.Is(last.Err, crontest.ErrKilled)
	owed := false
	for i := range Replicas {
		for _, at := range []time.Time{last.End, due} {
			w := j.Versions[c.version(i, j.Name, at)]
			next, ok := w.Policy.Interval(false).NextSlot(s.start.Add(-time.Nanosecond))
			if (ok && next.Start.Equal(s.start) || own && i == last.Replica) && tried >= w.Attempts && c.upDuring(i, last.End, due) {
				return
			}
		}
		v := j.Versions[c.version(i, j.Name, due)]
		next, ok := v.Policy.Interval(false).NextSlot(s.start.Add(-time.Nanosecond))
		// The slot as this release names it, claimable until its lease's
		// end: a deploy that shortened the interval shortened the claim
		// window of a slot both schedules share (PROTOCOL.md, Limits;
		// seed 8009346).
		has := ok && next.Start.Equal(s.start) && due.Before(v.LeaseEnd(next))
		owed = owed || has && tried < v.Attempts && c.upThrough(i, last.Start, due)
	}
	if !owed {
		return
	}
	if !c.warned(j.Name, s.start, from, due) {
		c.add("I4", "retry lost", j.Name, due, "slot %s was not run again after %s, with attempts left, though Redis was well from %s",
			s.key, describe(last), stamp(from))
	}
}

// I4, for a duration policy, whose slots are each replica's own: while a
// replica stays up with Redis well and the job not paused, the job is
// never idle for more than two intervals (a tick every interval, the first
// of which may find the last slot's lease still held), the run lease and a
// margin, unless a replica warns of a skip meanwhile.
func (c *checker) durationSlotsRun(j *Job) {
	var longest time.Duration
	for _, v := range j.Versions {
		longest = max(longest, v.Policy.D)
	}
	limit := 2*longest + runTTL(j) + 2*time.Minute
	var busy []span
	for _, r := range c.runsOf(j.Name) {
		busy = append(busy, span{r.Start, c.held(j, r)})
	}
	busy = append(busy, c.bad...)
	busy = append(busy, c.paused[j.Name]...)
	busy = append(busy, c.mayPause[j.Name]...)
	slices.SortFunc(busy, func(a, b span) int { return a.from.Compare(b.from) })
	for i := range Replicas {
		for _, u := range c.up[i] {
			free := u.from // the start of the idle stretch
			for _, b := range append(busy, span{u.to, u.to}) {
				if !b.to.After(free) {
					continue
				}
				idle := span{free, earlier(b.from, u.to)}
				if idle.to.Sub(idle.from) > limit+c.steppedBack(i, idle.from, idle.to) && !c.warned(j.Name, time.Time{}, idle.from, idle.to) {
					c.add("I4", "idle", j.Name, idle.from.Add(limit), "no run from %s to %s (%v), though replica %d was up with Redis and the job not paused",
						stamp(idle.from), stamp(idle.to), idle.to.Sub(idle.from), i)
					return
				}
				free = later(free, b.to)
				if !free.Before(u.to) {
					break
				}
			}
		}
	}
}

// I9: a run that the record no longer names, or whose lease its replica
// could not extend, is cancelled within its run lease: a run in progress
// when Redis lost every key (a restart; a lossy failover may have kept
// the record) ends within a run lease after, as its next heartbeat finds
// the record gone or its lease's deadline passes (R11, R14); and so does
// a run whose replica could not reach Redis (down, stalled, or its
// process frozen) for longer than a run lease.
func (c *checker) leases(j *Job) {
	ttl := runTTL(j) + tickMargin
	for _, r := range c.runsOf(j.Name) {
		end := r.effectiveEnd(c.end)
		for _, f := range c.flushes {
			if !slices.Contains(c.lossy, f) && r.Start.Before(f) && end.After(f.Add(ttl)) {
				c.add("I9", "unnamed", j.Name, f.Add(ttl), "a run went on %v after Redis lost its record at %s (a run lease is %v): %s",
					end.Sub(f), stamp(f), runTTL(j), describe(r))
			}
		}
		cut := append(append(slices.Clone(c.downs), c.stalls...), c.frozen[r.Replica]...)
		slices.SortFunc(cut, func(a, b span) int { return a.from.Compare(b.from) })
		for k := 0; k < len(cut); k++ {
			s := cut[k]
			for k+1 < len(cut) && !cut[k+1].from.After(s.to) { // merged with those it meets
				s.to = later(s.to, cut[k+1].to)
				k++
			}
			if s.to.Sub(s.from) > ttl && r.Start.Before(s.from) && end.After(s.from.Add(ttl)) {
				c.add("I9", "unextended", j.Name, s.from.Add(ttl), "a run went on %v after its replica lost Redis at %s (until %s; a run lease is %v): %s",
					end.Sub(s.from), stamp(s.from), stamp(s.to), runTTL(j), describe(r))
			}
		}
	}
}

// I4 and I10, for a Cron spec, the skips that a replica's claim recorded
// (R20): one recorded as ReasonStillRunning came while a run held the job
// (on this replica, or by the record: it began before the slot's tick was
// due and Redis recorded its end after); and no run of the schedule, a
// retry or a catch-up runs a slot recorded skipped, while Redis keeps the
// record (I10).
func (c *checker) skips(j *Job) {
	runs := c.runsOf(j.Name)
	for _, l := range c.h.Logs {
		if l.Job != j.Name || l.Msg != msgSkipRecorded || l.Scheduled.IsZero() {
			continue
		}
		i := replicaIndex(l.Replica)
		if i < 0 {
			continue
		}
		// The slot and its due time the tick names, by some release (a
		// start's tick is scheduled at the start: the slot names it, and
		// its due time is the earliest a release gives it).
		var start, due time.Time
		exact := false
		for _, v := range j.Versions {
			every := v.Interval(false)
			if s, ok := every.NextSlot(l.Scheduled.Add(-24 * time.Hour)); ok {
				for ; ok && !s.Start.After(l.Scheduled); s, ok = every.NextSlot(s.Start) {
					key, _ := s.Key()
					d := every.Due(j.Name, s.Start)
					switch {
					case d.Equal(l.Scheduled):
						start, due, exact = s.Start, d, true
					case !exact && key == l.Slot && (due.IsZero() || d.Before(due)):
						start, due = s.Start, d
					}
				}
			}
		}
		if start.IsZero() {
			continue
		}
		if l.Reason == cron.ReasonStillRunning {
			dueAt := due.Add(-c.offset(i, due)) // by the bubble's clock
			held := false
			for _, r := range runs {
				if r.Start.After(l.At.Add(tickMargin)) {
					break
				}
				if c.recordedEnd(j, r).Add(tickMargin).After(dueAt) {
					held = true
				}
			}
			if !held && !c.skewed(dueAt) && !c.steppedAcross(i, due) {
				c.add("I4", "false skip", j.Name, l.At, "replica %d recorded slot %s (due %s) skipped as %q, but no run held the job then",
					i, start.Format(time.RFC3339), stamp(dueAt), l.Reason)
			}
		}
		for _, r := range runs {
			if r.Tick.Trigger == cron.TriggerRequest || !r.Tick.Slot.Start.Equal(start) || !isCron(r) {
				continue
			}
			if !c.flushed(earlier(l.At, r.Start).Add(-tickMargin), later(l.At, r.Start)) {
				c.add("I10", "skip ran", j.Name, r.Start, "replica %d recorded slot %s skipped as %q at %s, and it ran: %s",
					i, start.Format(time.RFC3339), l.Reason, stamp(l.At), describe(r))
				break
			}
		}
	}
}

// isCron reports whether r is a run of a Cron slot, named alike on every
// replica.
func isCron(r *Run) bool {
	_, ok := r.Tick.Slot.Key()
	return ok
}

// recordedEnd is the latest that Redis may have recorded as the end of r:
// its completion's arrival, sent again through outages (R13), or the end
// of its run lease (C1).
func (c *checker) recordedEnd(j *Job, r *Run) time.Time {
	end := later(c.held(j, r), r.End)
	if r.End.IsZero() || errors.Is(r.Err, crontest.ErrKilled) {
		return end.Add(runTTL(j))
	}
	if at, ok := c.eventualArrival(r.Replica, r.End, time.Hour); ok {
		return later(end, at.Add(resendGap(j)))
	}
	return end.Add(runTTL(j))
}

// replicaIndex returns i of a replica named "replica-<i>", or -1.
func replicaIndex(name string) int {
	var i int
	if _, err := fmt.Sscanf(name, "replica-%d", &i); err != nil || i < 0 || i >= Replicas {
		return -1
	}
	return i
}

// I5: no run of the schedule, a retry or a catch-up while the job is
// paused.
func (c *checker) pauses(j *Job) {
	for _, p := range c.paused[j.Name] {
		for _, r := range c.runsOf(j.Name) {
			if r.Tick.Trigger != cron.TriggerRequest && r.Start.After(p.from) && r.Start.Before(p.to) {
				c.add("I5", "paused", j.Name, r.Start, "a run while paused since %s: %s", stamp(p.from), describe(r))
			}
		}
	}
}

// I6: one run per run-now request. Every requested run serves a request
// made since the last one ran (several make one run; Redis losing every
// key loses them); and a request made while a replica is up and Redis
// well runs within a few seconds, or, if a run is in progress, a few
// seconds after it returns.
func (c *checker) requests(j *Job) {
	type event struct {
		at  time.Time
		run *Run // nil for a request
	}
	var evs []event
	for _, op := range c.h.Admin {
		if op.Job == j.Name && op.Kind == RunNow && op.Err == nil {
			evs = append(evs, event{at: op.At})
		}
	}
	runs := c.runsOf(j.Name)
	for _, r := range runs {
		if r.Tick.Trigger == cron.TriggerRequest {
			evs = append(evs, event{at: r.Start, run: r})
		}
	}
	slices.SortStableFunc(evs, func(a, b event) int { return a.at.Compare(b.at) })
	// maybe: a lossy failover since the last request may have kept it
	// or lost it.
	pending, maybe := false, false
	var last time.Time
	for _, e := range evs {
		if pending && c.flushed(last, e.at) {
			pending, maybe = false, c.lossBetween(last, e.at)
		}
		if e.run == nil {
			if !pending {
				c.served(j, e.at, runs)
			}
			pending, maybe, last = true, false, e.at
			continue
		}
		if !pending && !maybe {
			c.add("I6", "unrequested", j.Name, e.at, "a requested run with no request waiting: %s", describe(e.run))
		}
		pending, maybe = false, false
	}
}

// served checks that a request made at p ran in time, where it is owed:
// a few seconds after p, or after the runs in progress or starting
// meanwhile returned, if they return on a live replica that records them.
func (c *checker) served(j *Job, p time.Time, runs []*Run) {
	due := p.Add(requestMargin)
	for _, r := range runs { // by start
		if r.Start.After(due) || r.Tick.Trigger == cron.TriggerRequest && !r.Start.Before(p) {
			continue
		}
		if c.notRecorded(j, r) || c.unsent(j, r) {
			if c.held(j, r).After(p) {
				return // its run lease runs out instead: no completion serves the request
			}
			continue
		}
		if r.End.IsZero() || !r.Cancelled.IsZero() || errors.Is(r.Err, crontest.ErrKilled) {
			if c.held(j, r).After(p) {
				return
			}
			continue
		}
		// The run holds the job until its completion frees it, which
		// serves the request (R9, R12). A completion that Redis did not
		// answer is sent again (R13), a back-off after the last send, not
		// as Redis comes back (seed 19170): at the latest, a gap after.
		at, ok := c.arrival(r.Replica, r.End, runTTL(j))
		if !ok {
			if at, ok = c.eventualArrival(r.Replica, r.End, runTTL(j)); !ok {
				if c.held(j, r).After(p) {
					return // its run lease runs out instead: no completion serves the request
				}
				continue
			}
			at = at.Add(resendGap(j))
		}
		if !at.After(p) {
			continue
		}
		if !c.liveThrough(r.Replica, r.Start, at.Add(requestMargin)) {
			return
		}
		due = later(due, at.Add(requestMargin))
	}
	due, ok := c.hearsBy(p, due)
	if !ok || due.After(c.end) || !c.healthy(p, due) {
		return
	}
	for _, r := range runs {
		if r.Tick.Trigger == cron.TriggerRequest && !r.Start.Before(p) && !r.Start.After(due) {
			return
		}
	}
	c.add("I6", "unserved", j.Name, due, "the run-now request of %s did not run by %s", stamp(p), stamp(due))
}

// I7: a record outlives every claimable slot it names: its TTL, read every
// few minutes, reaches past the end of the named slot's lease (the
// earliest any release of the job gives it).
func (c *checker) records(j *Job) {
	for _, p := range c.h.Probes {
		if p.Job != j.Name || !p.Exists || p.SlotAt.IsZero() || p.TTL < 0 {
			continue
		}
		var claimable time.Time
		for _, v := range j.Versions {
			var end time.Time
			if v.Policy.Shared() {
				s, ok := v.Policy.Interval(false).NextSlot(p.SlotAt.Add(-time.Nanosecond))
				if !ok || !s.Start.Equal(p.SlotAt) {
					continue
				}
				end = v.LeaseEnd(s)
			} else {
				end = p.SlotAt.Add(v.LeaseTTL())
			}
			if claimable.IsZero() || end.Before(claimable) {
				claimable = end
			}
		}
		if expires := p.At.Add(p.TTL); claimable.After(p.At) && expires.Before(claimable.Add(-time.Millisecond)) {
			c.add("I7", "expiry", j.Name, p.At, "the record expires at %s, before its slot %q (%s) stops being claimable at %s",
				stamp(expires), p.Slot, p.State, stamp(claimable))
			return // once per job: every later reading says the same
		}
	}
}

// I8: a catch-up never runs a slot from before the job first started.
func (c *checker) catchUps(j *Job) {
	for _, r := range c.runsOf(j.Name) {
		if r.Tick.Trigger != cron.TriggerCatchUp {
			continue
		}
		if _, shared := r.Tick.Slot.Key(); shared && r.Tick.Slot.Start.Before(c.start) {
			c.add("I8", "catch-up", j.Name, r.Start, "caught up a slot from before the job first started at %s: %s", stamp(c.start), describe(r))
		}
		if d := j.Versions[max(r.Version, 0)].Policy.D; d > 0 && r.Start.Before(c.start.Add(d)) {
			c.add("I8", "catch-up", j.Name, r.Start, "caught up within the first interval since the job first started at %s: %s", stamp(c.start), describe(r))
		}
	}
}

func describeAll(runs []*Run) string {
	s := make([]string, len(runs))
	for i, r := range runs {
		s[i] = describe(r)
	}
	return strings.Join(s, "; ")
}
