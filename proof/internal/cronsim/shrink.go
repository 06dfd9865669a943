package cronsim

import (
	"maps"
	"slices"
	"time"
)

// Shrink returns the smallest scenario it finds from sc that still fails:
// that fails, given a scenario, reports whether its simulation still
// breaks the invariant in question (the same rule of it, for the same
// job), and how. It keeps only the job that
// broke it (v's; another job's deploy becomes the restart it is), cuts the
// span to an hour past the violation, then
// removes events and plans by delta debugging, and cuts the span again; it
// stops after budget simulations. It returns the scenario, its violation,
// and the simulations it ran. Shrinking is deterministic: a seed shrinks to
// the same scenario every time.
func Shrink(sc *Scenario, v Violation, fails func(*Scenario) (Violation, bool), budget int) (*Scenario, Violation, int) {
	runs := 0
	try := func(c *Scenario) bool {
		if runs >= budget {
			return false
		}
		runs++
		if got, ok := fails(c); ok {
			sc, v = c, got
			return true
		}
		return false
	}
	if len(sc.Jobs) > 1 {
		if j, ok := sc.job(v.Job); ok {
			alone := sc.clone()
			alone.Jobs = []Job{j.clone()}
			alone.Events = nil
			for _, e := range sc.Events {
				switch {
				case e.Job == "" || e.Job == v.Job:
					alone.Events = append(alone.Events, e)
				case e.Kind == Deploy: // another job's deploy still restarts the replica
					alone.Events = append(alone.Events, Event{At: e.At, Kind: Restart, Replica: e.Replica})
				}
			}
			try(alone)
		}
	}
	cut := func() {
		if span := v.At.Sub(sc.Start).Truncate(time.Minute) + time.Hour; span < sc.Span {
			shorter := sc.clone()
			shorter.Span = span
			shorter.Events = slices.DeleteFunc(shorter.Events, func(e Event) bool { return e.At >= span })
			try(shorter)
		}
	}
	cut()
	// try keeps the last scenario that failed, which is base with the
	// atoms that ddmin keeps.
	base := sc
	ddmin(base.atoms(), func(as []atom) bool { return try(base.only(as)) })
	cut()
	return sc, v, runs
}

// atom is what delta debugging removes from a scenario: an event (its
// index) or a job's plan (job and key; event -1).
type atom struct {
	event int
	job   string
	plan  PlanKey
}

// atoms lists sc's events and plans.
func (sc *Scenario) atoms() []atom {
	var out []atom
	for i := range sc.Events {
		out = append(out, atom{event: i})
	}
	for _, j := range sc.Jobs {
		keys := slices.SortedFunc(maps.Keys(j.Plans), planOrder)
		for _, k := range keys {
			out = append(out, atom{event: -1, job: j.Name, plan: k})
		}
	}
	return out
}

// only returns sc with only the events and plans in as.
func (sc *Scenario) only(as []atom) *Scenario {
	c := sc.clone()
	c.Events = nil
	for i := range c.Jobs {
		c.Jobs[i].Plans = make(map[PlanKey]Plan)
	}
	for _, a := range as {
		if a.event >= 0 {
			c.Events = append(c.Events, sc.Events[a.event])
			continue
		}
		j, _ := c.job(a.job)
		from, _ := sc.job(a.job)
		j.Plans[a.plan] = from.Plans[a.plan]
	}
	return c
}

// clone returns a copy of sc that shares nothing with it.
func (sc *Scenario) clone() *Scenario {
	c := *sc
	c.Events = slices.Clone(sc.Events)
	c.Jobs = make([]Job, len(sc.Jobs))
	for i, j := range sc.Jobs {
		c.Jobs[i] = j.clone()
	}
	return &c
}

func (j Job) clone() Job {
	j.Versions = slices.Clone(j.Versions)
	j.Plans = maps.Clone(j.Plans)
	return j
}

// ddmin returns a subset of as for which fails holds, 1-minimal as far as
// Zeller's delta debugging finds: removing any one of its members makes
// fails false. fails(as) is assumed to hold. It tries the empty set first.
func ddmin[T any](as []T, fails func([]T) bool) []T {
	if len(as) == 0 || fails(nil) {
		return nil
	}
	n := 2
	for len(as) >= 2 {
		chunks := split(as, n)
		reduced := false
		for _, c := range chunks {
			if fails(c) {
				as, n, reduced = c, 2, true
				break
			}
		}
		if !reduced {
			for i := range chunks {
				rest := complement(chunks, i)
				if fails(rest) {
					as, n, reduced = rest, max(n-1, 2), true
					break
				}
			}
		}
		if !reduced {
			if n >= len(as) {
				break
			}
			n = min(2*n, len(as))
		}
	}
	return as
}

// split cuts as into n chunks of nearly equal length.
func split[T any](as []T, n int) [][]T {
	out := make([][]T, 0, n)
	for i := range n {
		out = append(out, as[i*len(as)/n:(i+1)*len(as)/n])
	}
	return out
}

// complement joins every chunk but chunks[skip].
func complement[T any](chunks [][]T, skip int) []T {
	var out []T
	for i, c := range chunks {
		if i != skip {
			out = append(out, c...)
		}
	}
	return out
}
