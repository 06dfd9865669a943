package cronsim

import (
	"math/rand/v2"
	"time"
)

// sharing gives, for each Cron spec of the scenarios, another whose slots
// are some of its own or include them.
var sharing = map[string]string{
	"CRON_TZ=UTC 0 * * * *":         "CRON_TZ=UTC */30 * * * *",
	"CRON_TZ=UTC */15 * * * *":      "CRON_TZ=UTC 0 * * * *",
	"CRON_TZ=UTC */15 9-17 * * 1-5": "CRON_TZ=UTC 0 9-17 * * 1-5",
	"CRON_TZ=UTC 30 */2 * * *":      "CRON_TZ=UTC 30 * * * *",
}

// NoOps leaves the everyday operations of genOps out of the scenarios
// that Generate draws, as they were before the simulator had them (the
// -sim.noops flag): their other draws come from streams of their own, so
// a seed's scenario is otherwise the same.
var NoOps bool

// The moments of a slot that genOps aims an operation at.
const (
	atLook    = iota // the grace after the slot's tick, when the replicas that don't own it look (E13)
	atEnd            // its first run's end: the completion, and with a blip its resends (R13)
	atBackoff        // the back-off after its first attempt failed (E2)
	numMoments
)

// genOps draws, from a stream of its own, the everyday operations at
// their awkward moments, about one every two hours: a rolling deploy
// (each replica in turn shut down gracefully, cron.Runtime.Shutdown with
// a deadline short, long or none, then started again) or a recreate
// (every replica shut down at once); at a Cron slot's looks, at its run's
// end with a blip of Redis that fails the completion once, or in the
// back-off after a failed attempt; a Replace of a spread job on every
// replica inside its slot's spread window; a Redis restarted empty in the
// middle of a long run of a slot with attempts to spare; and a start shut
// down at once, as its announcement goes.
func genOps(sc *Scenario) {
	r := rand.New(rand.NewPCG(uint64(sc.Seed), 0x0b5e))
	span := sc.Span
	at := func() time.Duration { return time.Duration(r.Int64N(int64(span))) }
	between := func(lo, hi time.Duration) time.Duration { return lo + time.Duration(r.Int64N(int64(hi-lo))) }
	deadline := func() time.Duration {
		switch r.IntN(3) {
		case 0:
			return between(0, 3*time.Second)
		case 1:
			return between(30*time.Second, 10*time.Minute)
		}
		return -1
	}
	// restartAfter is when a replica shut down with deadline d starts
	// again: after the deadline, mostly (a Restart while Shutdown still
	// waits kills the replica, as a deploy's SIGKILL does).
	restartAfter := func(d time.Duration) time.Duration {
		if d < 0 {
			d = between(time.Second, 2*time.Minute)
		}
		return d + between(500*time.Millisecond, 30*time.Second)
	}
	cronJobs := func() []*Job {
		var out []*Job
		for k := range sc.Jobs {
			if j := &sc.Jobs[k]; !j.Crowd && j.Versions[0].Policy.Shared() {
				out = append(out, j)
			}
		}
		return out
	}()
	// moment returns the instant (after the start) of a moment of a slot
	// of job j that begins after t, as replica i's clock brings it, and
	// for atEnd when the blip that fails the completion begins and ends
	// (covering the run's end on every replica's clock); false if the span
	// has none. It may plan the slot's first run for it.
	type aimed struct{ at, blipFrom, blipTo time.Duration }
	moment := func(j *Job, t time.Duration, m, i int) (aimed, bool) {
		v := j.Versions[0]
		every := v.Interval(false)
		s, ok := every.NextSlot(sc.Start.Add(t))
		if !ok || !s.Start.Before(sc.Start.Add(span)) {
			return aimed{}, false
		}
		due := every.Due(j.Name, s.Start).Sub(sc.Start)
		tick := func(i int) time.Duration { return due - sc.Offsets[i] + sc.Latencies[i] }
		key := PlanKey{At: s.Start.Sub(sc.Start), Attempt: 1}
		switch m {
		case atLook:
			return aimed{at: tick(i) + between(0, 2500*time.Millisecond)}, true
		case atEnd:
			p, ok := j.Plans[key]
			if !ok {
				p = Plan{Took: j.Quick}
			}
			a := aimed{at: tick(i) + p.Took + between(-500*time.Millisecond, 500*time.Millisecond)}
			a.blipFrom, a.blipTo = tick(0)+p.Took, tick(0)+p.Took
			for k := range Replicas {
				a.blipFrom, a.blipTo = min(a.blipFrom, tick(k)+p.Took), max(a.blipTo, tick(k)+p.Took)
			}
			a.blipFrom -= 50 * time.Millisecond
			a.blipTo += between(20*time.Millisecond, 700*time.Millisecond)
			return a, true
		default:
			p := Plan{Outcome: Fail, Took: between(time.Second, 20*time.Second) + time.Duration(1+r.IntN(int(time.Millisecond)-1))}
			j.Plans[key] = p
			backoff := max(j.Backoff, time.Second)
			return aimed{at: tick(i) + p.Took + between(0, backoff+time.Second)}, true
		}
	}
	for range int(span / (2 * time.Hour)) {
		t := at()
		switch x := r.IntN(10); {
		case x < 5 && len(cronJobs) > 0: // a rolling deploy or a recreate at a moment of a slot
			j := cronJobs[r.IntN(len(cronJobs))]
			first, recreate := r.IntN(Replicas), r.IntN(3) == 0
			m := r.IntN(numMoments)
			a, ok := moment(j, t, m, first)
			if !ok {
				continue
			}
			aim := a.at
			if m == atEnd && r.IntN(2) == 0 {
				// A blip that fails the completion once, on whichever
				// replica ran it: its resend waits out a back-off while
				// Shutdown comes.
				sc.Events = append(sc.Events, Event{At: a.blipFrom, Kind: RedisDown, D: a.blipTo - a.blipFrom})
				aim = a.blipTo - between(0, 500*time.Millisecond)
				recreate = recreate || r.IntN(2) == 0
			}
			for i := range Replicas {
				d := deadline()
				rep := (first + i) % Replicas
				sc.Events = append(sc.Events, Event{At: aim, Kind: Shutdown, Replica: rep, D: d},
					Event{At: aim + restartAfter(d), Kind: Restart, Replica: rep})
				if recreate {
					aim += time.Duration(1+r.IntN(5)) * time.Millisecond
				} else {
					aim += restartAfter(d) + between(time.Second, 20*time.Second)
				}
			}
		case x < 7 && len(cronJobs) > 0: // Redis restarted empty mid-run, attempts to spare
			j := cronJobs[r.IntN(len(cronJobs))]
			v := j.Versions[0]
			s, ok := v.Interval(false).NextSlot(sc.Start.Add(t))
			if !ok || v.Attempts < 2 {
				continue
			}
			slotAt := s.Start.Sub(sc.Start)
			due := v.Interval(false).Due(j.Name, s.Start).Sub(sc.Start)
			took := between(10*time.Second, 40*time.Second) + time.Duration(1+r.IntN(int(time.Millisecond)-1))
			j.Plans[PlanKey{At: slotAt, Attempt: 1}] = Plan{Took: took}
			sc.Events = append(sc.Events, Event{At: due + 3*time.Second + between(500*time.Millisecond, took-7*time.Second), Kind: RedisRestart, D: between(0, 3*time.Second)})
		case x < 8 && len(cronJobs) > 0: // Replace on every replica inside a spread window
			// By a release of another schedule that shares the slot, and
			// the same spread: a Replace that keeps the interval keeps the
			// next tick anyway.
			j := cronJobs[r.IntN(len(cronJobs))]
			v := j.Versions[0]
			other, ok := sharing[v.Policy.Spec]
			if v.Spread == 0 || !ok {
				continue
			}
			w := v
			w.Policy.Spec = other
			s, ok := w.Interval(false).NextSlot(sc.Start.Add(t))
			if !ok {
				continue
			}
			if n, ok := v.Interval(false).NextSlot(s.Start.Add(-time.Nanosecond)); !ok || !n.Start.Equal(s.Start) {
				continue
			}
			slotAt := s.Start.Sub(sc.Start)
			due := min(v.Interval(false).Due(j.Name, s.Start).Sub(sc.Start), w.Interval(false).Due(j.Name, s.Start).Sub(sc.Start))
			if due <= slotAt+4*time.Second {
				continue
			}
			j.Versions = append(j.Versions, w)
			// Inside the window by every replica's clock.
			aim := slotAt + 3*time.Second + between(0, due-slotAt-4*time.Second)
			for i := range Replicas {
				sc.Events = append(sc.Events, Event{At: aim + time.Duration(i)*time.Millisecond, Kind: Replace, Replica: i, Job: j.Name, Version: len(j.Versions) - 1})
			}
		case x < 9 && len(cronJobs) > 0: // a slot's run that ends just after the next slot is due (R2)
			j := cronJobs[r.IntN(len(cronJobs))]
			every := j.Versions[0].Interval(false)
			p, ok := every.NextSlot(sc.Start.Add(t))
			if !ok {
				continue
			}
			s, ok := every.NextSlot(p.Start)
			if !ok {
				continue
			}
			took := every.Due(j.Name, s.Start).Sub(every.Due(j.Name, p.Start)) + between(10*time.Millisecond, 2500*time.Millisecond)
			if r.IntN(2) == 0 {
				// Redis down as the slot's ticks come, on every replica's
				// clock, and as the run ends: the ticks are retried after
				// it (their looks after an error), when the run has ended,
				// and only R2's reading of the last run skips the slot.
				took += 3 * time.Second
				due := every.Due(j.Name, s.Start).Sub(sc.Start)
				sc.Events = append(sc.Events, Event{At: due - 3500*time.Millisecond, Kind: RedisDown, D: 7*time.Second + between(0, 5*time.Second)})
			}
			j.Plans[PlanKey{At: p.Start.Sub(sc.Start), Attempt: 1}] = Plan{Took: took + time.Duration(1+r.IntN(int(time.Millisecond)-1))}
		case x < 10 && r.IntN(2) == 0: // a pause whose ticks' replies are lost: the skips' claims are sent again (C3)
			j := &sc.Jobs[r.IntN(len(sc.Jobs))]
			if j.Crowd {
				continue
			}
			long := 20 * time.Minute
			if p := j.Versions[0].Policy; !p.Shared() {
				long = p.D + time.Minute
			}
			sc.Events = append(sc.Events, Event{At: t, Kind: Pause, Job: j.Name},
				Event{At: t + 30*time.Second, Kind: LoseReplies, D: long},
				Event{At: t + long + time.Minute, Kind: Resume, Job: j.Name})
		default: // a start shut down as it announces its jobs
			// After a slot's claim window, with a slot TTL shorter than
			// the slot, the start's tick is too late for it: the start
			// announces the job (E6) instead, on its way as Shutdown
			// comes, a few milliseconds later.
			rep := r.IntN(Replicas)
			d := deadline()
			for _, j := range cronJobs {
				v := j.Versions[0]
				if s, ok := v.Interval(false).NextSlot(sc.Start.Add(t)); ok && v.TTL > 0 && v.TTL+5*time.Second < s.End.Sub(s.Start) {
					t = s.Start.Sub(sc.Start) + v.TTL + 4*time.Second + between(0, s.End.Sub(s.Start)-v.TTL-5*time.Second)
					break
				}
			}
			sc.Events = append(sc.Events, Event{At: t, Kind: Restart, Replica: rep},
				Event{At: t + between(0, 5*time.Millisecond), Kind: Shutdown, Replica: rep, D: d})
			sc.Events = append(sc.Events, Event{At: t + restartAfter(d), Kind: Restart, Replica: rep})
		}
	}
	// Events at or after the span's end are dropped by Generate's sort
	// and the simulation's loop alike; drop them here so that the
	// scenario says what runs.
	out := sc.Events[:0]
	for _, e := range sc.Events {
		if e.At >= 0 && e.At < span {
			out = append(out, e)
		}
	}
	sc.Events = out
}
