package cronsim

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/wakuwaku-go/wakuwaku/interval"
)

// Replicas is how many replicas every scenario runs.
const Replicas = 3

// monday is the first Monday of the bubble's clock, which starts at
// 2000-01-01 00:00 UTC, a Saturday: scenarios start in a working week, so
// that business-hours specs have slots.
var monday = time.Date(2000, 1, 3, 0, 0, 0, 0, time.UTC)

// Scenario is one simulated run, everything in it drawn from its seed:
// the replicas' clocks and latencies, the jobs, how each of their runs
// behaves, and the faults and operators' commands, at fixed instants.
// Shrinking a failure removes events and plans from it.
type Scenario struct {
	Seed int64
	// Start is when the replicas start, by the bubble's clock, and Span
	// how long the run lasts after it.
	Start time.Time
	Span  time.Duration
	// Offsets are how far each replica's clock is ahead of the bubble's at
	// the start; Latencies how long each replica's commands take to reach
	// Redis. Both are distinct, so that no two replicas act at one instant.
	Offsets, Latencies [Replicas]time.Duration
	Jobs               []Job
	// Replicated is whether the jobs' DB, and the operator's, wait for a
	// replica (lock.WithReplicas(1, time.Second)).
	Replicated bool
	// ProcessOnly says which replicas' jobs have a DB over a client with
	// only Process, as a user's metrics or tracing wrapper is: the
	// runtime cannot pipeline on it, and sends a batch command by command.
	// Not with Replicated, which needs a *redis.Client.
	ProcessOnly [Replicas]bool
	// AutoPipelined says which replicas' jobs have a DB over go-redis's
	// AutoPipeliner, and which face: 0 none, 1 the blocking one
	// (Client.AutoPipeline), 2 the asynchronous one, whose Process returns
	// before the reply. Not with Replicated, which it refuses, nor with
	// ProcessOnly.
	AutoPipelined [Replicas]int
	// Crowd is how many of Jobs, the last ones, are a crowd: leased jobs
	// of one Cron spec, due at one instant, whose runs take about as long
	// as a replica waits to look at the slots it does not own (E13), so
	// that each replica's completions meet its looks in its batching
	// client. BatchSize is that client's bound on a batch's commands (0:
	// the runtime's), small in a crowd's seed so that its batches fill
	// and the bound on completions behind claims and looks decides.
	Crowd, BatchSize int
	// Events are the faults and commands, by At.
	Events []Event
}

// Job is one leased job of a scenario.
type Job struct {
	// Name is the job's name and its lease's: "j0", "j1", ...; it stays
	// when shrinking removes other jobs.
	Name string
	// Versions are what the job's code says in each release: every
	// replica starts with Versions[0], and a deploy moves one to another.
	Versions []Version
	// NoStartup is interval.Interval.WithoutStartupRun; CatchUp the
	// LeaseConfig's (only with NoStartup, where it means something).
	NoStartup bool
	CatchUp   time.Duration
	RunTTL    time.Duration // LeaseConfig.RunTTL: 0, the default, or longer
	Backoff   time.Duration // LeaseConfig.Backoff: 0, the default, or longer
	// Plans say how runs behave, by slot and attempt (see PlanKey), so
	// that a run keeps its plan when shrinking removes events before it.
	// A run without a plan succeeds after Quick: a second, and
	// nanoseconds of the job's own. Two runs of one replica start a
	// whole number of its latencies apart; were they as long, their ends'
	// round trips could reach Redis at one instant, in either order (a
	// script that one loads and the other runs by its SHA tells them
	// apart).
	Plans map[PlanKey]Plan
	Quick time.Duration
	// Crowd says the job is one of a crowd (see Scenario.Crowd), whose
	// records the simulation does not read every few minutes (I7): with
	// miniredis reading every key to expire at each command, those reads
	// would cost most of the seed.
	Crowd bool
}

// Version is what one release of a job's code says: its schedule and its
// attempts per slot, and the knobs of its LeaseConfig and Func: a spread
// (a Cron spec's; interval.Interval.WithSpread), the slot's lease TTL (0:
// the default), the history's length (0: the default) and a run deadline
// (0: none; cron.WithRunDeadline).
type Version struct {
	Policy   Policy
	Attempts int
	Spread   time.Duration
	TTL      time.Duration
	History  int
	Deadline time.Duration
}

// Interval returns the version's schedule as package interval builds it,
// with its spread.
func (v Version) Interval(noStartup bool) interval.Interval {
	return v.Policy.Interval(noStartup).WithSpread(v.Spread)
}

// LeaseTTL is how long the version's slots can be claimed from their
// start: for a duration policy, the slot's lease.
func (v Version) LeaseTTL() time.Duration {
	if v.TTL > 0 {
		return v.TTL
	}
	return v.Policy.LeaseTTL()
}

// LeaseEnd is when slot s stops being claimable in this version.
func (v Version) LeaseEnd(s interval.Slot) time.Time { return s.LeaseEnd(v.TTL) }

func (v Version) String() string {
	s := fmt.Sprintf("%v attempts %d", v.Policy, v.Attempts)
	if v.Spread > 0 {
		s += " spread " + short(v.Spread)
	}
	if v.TTL > 0 {
		s += " TTL " + short(v.TTL)
	}
	if v.History > 0 {
		s += fmt.Sprint(" history ", v.History)
	}
	if v.Deadline > 0 {
		s += " deadline " + short(v.Deadline)
	}
	return s
}

// Policy is a job's schedule: a Cron spec, or a duration policy.
type Policy struct {
	Kind PolicyKind
	Spec string        // a Cron spec's, in UTC
	D    time.Duration // a duration policy's
}

// PolicyKind is the kind of a job's schedule.
type PolicyKind uint8

// The kinds of schedule.
const (
	CronSpec PolicyKind = iota
	AtLeast
	AfterFinish
)

// Interval returns the policy as package interval builds it.
func (p Policy) Interval(noStartup bool) interval.Interval {
	var i interval.Interval
	switch p.Kind {
	case CronSpec:
		i = interval.MustCron(p.Spec)
	case AtLeast:
		i = interval.AtLeast(p.D)
	default:
		i = interval.AfterFinish(p.D)
	}
	if noStartup {
		i = i.WithoutStartupRun()
	}
	return i
}

// Shared reports whether the policy's slots are named alike on every
// replica: a Cron spec's.
func (p Policy) Shared() bool { return p.Kind == CronSpec }

// LeaseTTL is a duration policy's slot lease, the runtime's default: 11/12
// of the interval.
func (p Policy) LeaseTTL() time.Duration { return p.D * 11 / 12 }

func (p Policy) String() string {
	switch p.Kind {
	case CronSpec:
		return fmt.Sprintf("%q", p.Spec)
	case AtLeast:
		return "at least " + short(p.D)
	}
	return "after finish " + short(p.D)
}

// PlanKey says which runs a plan is for: the runs of one attempt at one
// slot, requested or not. For a Cron spec, At is when the slot starts; for
// a duration policy, whose slots are the replicas' own, when the interval
// the run starts in does (intervals are counted from the scenario's
// start); both after Scenario.Start.
type PlanKey struct {
	At        time.Duration
	Attempt   int
	Requested bool
}

// planOrder orders plan keys by slot, then the runs of the schedule and
// their retries by attempt, then the requested run.
func planOrder(a, b PlanKey) int {
	if a.At != b.At {
		return cmp.Compare(a.At, b.At)
	}
	if a.Requested != b.Requested {
		if a.Requested {
			return 1
		}
		return -1
	}
	return a.Attempt - b.Attempt
}

// Plan is how one run behaves.
type Plan struct {
	Took     time.Duration // how long it runs, unless its context ends first
	Outcome  Outcome
	Stubborn bool // it ignores its context and runs for Took whatever happens
}

// Outcome is how a run ends.
type Outcome uint8

// The outcomes of a run.
const (
	Succeed Outcome = iota
	Fail
	Panic
)

func (p Plan) String() string {
	s := [...]string{"ok", "fails", "panics"}[p.Outcome] + " after " + short(p.Took.Round(time.Millisecond))
	if p.Stubborn {
		s += ", ignoring cancellation"
	}
	return s
}

// Event is a fault or an operator's command at At after the start.
type Event struct {
	At      time.Duration
	Kind    EventKind
	Replica int
	Job     string        // of Pause, Resume, RunNow and Deploy
	D       time.Duration // of RedisDown, RedisStall, RedisRestart and Failover (down), StepClock
	Lag     time.Duration // of Failover: how long after it the master fails
	Version int           // of Deploy
}

// EventKind is what an event does.
type EventKind uint8

// The events: crontest's faults, an Admin's commands, and a deploy, which
// restarts a replica with another version of a job.
const (
	Kill EventKind = iota
	Restart
	RedisDown
	RedisStall
	RedisRestart
	StepClock
	Pause
	Resume
	RunNow
	Deploy
	// Failover is crontest's RedisFailover: the writes of the last Lag
	// that no WAIT acknowledged are lost, and Redis is down for D.
	Failover
	// Replace is cron.Runtime.Replace of a job on a running replica,
	// with another release (Version): no restart.
	Replace
	// Remove is cron.Runtime.Remove of a job on a replica, and Add puts
	// it back (its replica's release).
	Remove
	Add
	// ScriptFlush is SCRIPT FLUSH: every EVALSHA answers NOSCRIPT once,
	// each command of a pipeline on its own.
	ScriptFlush
	// LoseReplies is crontest's LoseReplies: for D, Redis executes each
	// command and its reply is lost, so the client sends it again.
	LoseReplies
	// Freeze is crontest's Freeze: replica Replica's process stops for D
	// (a GC stop, a VM paused) while time goes on.
	Freeze
	// Shutdown is crontest's Shutdown, cron.Runtime.Shutdown of replica
	// Replica with a context that ends D later (never if D is negative):
	// a deploy's SIGTERM. The replica stays down until a Restart.
	Shutdown
	numEventKinds
)

var eventNames = [numEventKinds]string{"kill", "restart", "redis-down", "redis-stall", "redis-restart", "step-clock", "pause", "resume", "run-now", "deploy", "failover",
	"replace", "remove", "add", "script-flush", "lose-replies", "freeze", "shutdown"}

func (k EventKind) String() string { return eventNames[k] }

func (e Event) String() string {
	switch e.Kind {
	case Kill, Restart:
		return fmt.Sprintf("%v r%d", e.Kind, e.Replica)
	case RedisDown, RedisStall, RedisRestart:
		return fmt.Sprintf("%v %s", e.Kind, short(e.D))
	case StepClock:
		return fmt.Sprintf("%v r%d %+v", e.Kind, e.Replica, e.D)
	case Deploy, Replace:
		return fmt.Sprintf("%v r%d %s v%d", e.Kind, e.Replica, e.Job, e.Version)
	case Remove, Add:
		return fmt.Sprintf("%v r%d %s", e.Kind, e.Replica, e.Job)
	case ScriptFlush:
		return e.Kind.String()
	case LoseReplies:
		return fmt.Sprintf("%v %v", e.Kind, e.D)
	case Freeze:
		return fmt.Sprintf("%v r%d %v", e.Kind, e.Replica, e.D)
	case Shutdown:
		if e.D < 0 {
			return fmt.Sprintf("%v r%d, no deadline", e.Kind, e.Replica)
		}
		return fmt.Sprintf("%v r%d, deadline %v", e.Kind, e.Replica, e.D)
	case Failover:
		return fmt.Sprintf("%v lag %v, down %s", e.Kind, e.Lag, short(e.D))
	}
	return fmt.Sprintf("%v %s", e.Kind, e.Job)
}

// The schedules a job is drawn from: the examples, hourly, every
// 15 minutes, business hours, and durations from half an hour to two.
var (
	cronSpecs = []string{
		"CRON_TZ=UTC 0 * * * *",
		"CRON_TZ=UTC */15 * * * *",
		"CRON_TZ=UTC */15 9-17 * * 1-5",
		"CRON_TZ=UTC 30 */2 * * *",
	}
	durations = []time.Duration{30 * time.Minute, 45 * time.Minute, time.Hour, 2 * time.Hour}
)

// Generate draws the scenario of seed, span long.
func Generate(seed int64, span time.Duration) *Scenario {
	r := rand.New(rand.NewPCG(uint64(seed), 0x5eed))
	sc := &Scenario{
		Seed: seed,
		// Any hour of Monday to Thursday, to the nanosecond.
		Start: monday.Add(time.Duration(r.Int64N(int64(4 * 24 * time.Hour)))),
		Span:  span,
	}
	for i := range Replicas {
		// Within 3 s of the bubble's clock, and each latency a millisecond
		// apart, plus nanoseconds that keep them apart from everything.
		sc.Offsets[i] = time.Duration(r.Int64N(int64(6*time.Second))) - 3*time.Second
		sc.Latencies[i] = time.Duration(i+1)*time.Millisecond + time.Duration(r.Int64N(int64(time.Millisecond)))
	}
	r.Shuffle(Replicas, func(i, j int) { sc.Latencies[i], sc.Latencies[j] = sc.Latencies[j], sc.Latencies[i] })
	for j := range 2 + r.IntN(3) {
		sc.Jobs = append(sc.Jobs, genJob(r, fmt.Sprintf("j%d", j), sc.Start, span))
	}
	sc.Events = genEvents(r, sc)
	// Failovers come from a stream of their own, so that the other draws
	// of a seed are what they were before the simulator had them.
	f := rand.New(rand.NewPCG(uint64(seed), 0xfa11))
	sc.Replicated = f.IntN(2) == 0
	for range int(sc.Span / (4 * time.Hour)) {
		if f.IntN(2) != 0 {
			continue
		}
		e := Event{
			At: time.Duration(f.Int64N(int64(span))), Kind: Failover,
			Lag: time.Millisecond + time.Duration(f.Int64N(int64(20*time.Millisecond))),
			D:   time.Second + time.Duration(f.Int64N(int64(30*time.Second))),
		}
		// Three in four come as a replica's tick claims a Cron slot, so
		// that its writes are the ones in flight: the replica's clock
		// reaches the slot's start, and its claim reaches Redis a
		// latency later, within the lag before the master fails.
		j, i, aim := &sc.Jobs[f.IntN(len(sc.Jobs))], f.IntN(Replicas), f.IntN(4) > 0
		if p := j.Versions[0].Policy; aim && p.Shared() {
			if slot, ok := p.Interval(false).NextSlot(sc.Start.Add(e.At)); ok {
				claim := slot.Start.Add(-sc.Offsets[i]).Add(sc.Latencies[i])
				e.At = claim.Sub(sc.Start) - time.Duration(f.Int64N(int64(e.Lag)))
			}
		}
		if e.At >= 0 && e.At < span {
			sc.Events = append(sc.Events, e)
		}
	}
	genKnobs(sc)
	genReplaceMidRun(sc)
	genCrowd(sc)
	if !NoOps {
		genOps(sc)
	}
	slices.SortStableFunc(sc.Events, func(a, b Event) int { return int(a.At - b.At) })
	return sc
}

// genKnobs draws, from a stream of its own (so that the other draws of a
// seed are what they were before the simulator had them), the knobs and
// faults that came later: the jobs' spreads, lease TTLs, histories and
// run deadlines, a third release of each job that Replace puts in place
// on a running replica, clients without Pipelined, Remove and Add, SCRIPT
// FLUSH, replies lost after Redis executed the command, and frozen
// processes.
func genKnobs(sc *Scenario) {
	r := rand.New(rand.NewPCG(uint64(sc.Seed), 0x6b6e6f62))
	for i := range sc.ProcessOnly {
		sc.ProcessOnly[i] = r.IntN(4) == 0
	}
	span := sc.Span
	at := func() time.Duration { return time.Duration(r.Int64N(int64(span))) }
	for k := range sc.Jobs {
		j := &sc.Jobs[k]
		for v := range j.Versions {
			knobs(r, &j.Versions[v])
		}
		// A third release: the first with other knobs, and perhaps other
		// attempts or schedule.
		third := j.Versions[0]
		knobs(r, &third)
		if r.IntN(2) == 0 {
			third.Attempts = 1 + r.IntN(3)
		}
		if r.IntN(3) == 0 {
			third.Policy = genPolicy(r, third.Policy.Kind)
			third.TTL, third.Spread = 0, 0
			knobs(r, &third)
		}
		j.Versions = append(j.Versions, third)
	}
	rep := func() int { return r.IntN(Replicas) }
	job := func() string { return sc.Jobs[r.IntN(len(sc.Jobs))].Name }
	for range int(span / (2 * time.Hour)) {
		switch x := r.IntN(10); {
		case x < 4: // Replace on one replica, or on each in turn
			// Each in turn, within a minute or ten: a retry that every
			// replica planned is each one's to keep.
			t, first, v := at(), rep(), r.IntN(3)
			n, gap := 1+2*r.IntN(2), []time.Duration{time.Minute, 10 * time.Minute}[r.IntN(2)]
			jn := job()
			for i := range n {
				sc.Events = append(sc.Events, Event{At: t, Kind: Replace, Replica: (first + i) % Replicas, Job: jn, Version: v})
				t += time.Duration(r.Int64N(int64(gap)))
			}
		case x < 5: // Remove, and Add back later
			t, i, jn := at(), rep(), job()
			sc.Events = append(sc.Events, Event{At: t, Kind: Remove, Replica: i, Job: jn},
				Event{At: t + time.Minute + time.Duration(r.Int64N(int64(2*time.Hour))), Kind: Add, Replica: i, Job: jn})
		case x < 7: // at a Cron slot's tick, so that a batch of claims meets it
			t := at()
			if s, ok := sc.Jobs[r.IntN(len(sc.Jobs))].Versions[0].Policy.Interval(false).NextSlot(sc.Start.Add(t)); ok && s.Start.Before(sc.Start.Add(span)) {
				t = s.Start.Sub(sc.Start) - time.Duration(r.Int64N(int64(2*time.Second)))
			}
			kind := []EventKind{ScriptFlush, LoseReplies}[r.IntN(2)]
			sc.Events = append(sc.Events, Event{At: t, Kind: kind, D: time.Millisecond + time.Duration(r.Int64N(int64(5*time.Second)))})
		case x < 8: // replies lost for a while, heartbeats and completions too
			sc.Events = append(sc.Events, Event{At: at(), Kind: LoseReplies, D: time.Second + time.Duration(r.Int64N(int64(time.Minute)))})
		default:
			sc.Events = append(sc.Events, Event{At: at(), Kind: Freeze, Replica: rep(), D: 100*time.Millisecond + time.Duration(r.Int64N(int64(45*time.Second)))})
		}
	}
	// A third of the seeds: a replica killed in its run of a Cron slot
	// that it claimed at its tick, while a stall longer than the run lease
	// holds the other replicas' looks at the slot, and started again after
	// the slot's claim window: the looks find the run's lease expired, and
	// only they can retry the slot.
	k := rand.New(rand.NewPCG(uint64(sc.Seed), 0xa1d))
	if k.IntN(3) == 0 {
		j := &sc.Jobs[k.IntN(len(sc.Jobs))]
		i := k.IntN(Replicas)
		if p := j.Versions[0].Policy; p.Shared() {
			if slot, ok := j.Versions[0].Interval(false).NextSlot(sc.Start.Add(at())); ok {
				due := j.Versions[0].Interval(false).Due(j.Name, slot.Start)
				claim := due.Add(-sc.Offsets[i]).Add(sc.Latencies[i]).Sub(sc.Start)
				stall := 45*time.Second + time.Duration(k.Int64N(int64(2*time.Minute)))
				sc.Events = append(sc.Events,
					Event{At: claim + time.Millisecond, Kind: RedisStall, D: stall},
					Event{At: claim + 100*time.Millisecond + time.Duration(k.Int64N(int64(800*time.Millisecond))), Kind: Kill, Replica: i},
					Event{At: claim + 2*slot.End.Sub(slot.Start) + time.Duration(k.Int64N(int64(time.Hour))), Kind: Restart, Replica: i})
			}
		}
	}
	sc.Events = slices.DeleteFunc(sc.Events, func(e Event) bool { return e.At < 0 || e.At >= span })
}

// genReplaceMidRun draws, from a stream of its own, in a third of the
// seeds that have a duration policy with attempts to spare, a slot of that
// job whose first attempt fails after 20 to 40 seconds, and a Replace of
// the job with its first release on each replica while that run goes on:
// the slot's retry is the new job's to run (the replica that opened the
// slot is the only one that knows of it).
func genReplaceMidRun(sc *Scenario) {
	r := rand.New(rand.NewPCG(uint64(sc.Seed), 0x7e91ace))
	if r.IntN(3) != 0 {
		return
	}
	var cands []*Job
	for k := range sc.Jobs {
		if v := sc.Jobs[k].Versions[0]; !v.Policy.Shared() && v.Attempts >= 2 {
			cands = append(cands, &sc.Jobs[k])
		}
	}
	if len(cands) == 0 {
		return
	}
	j := cands[r.IntN(len(cands))]
	d := j.Versions[0].Policy.D
	n := int(sc.Span / d)
	if n < 2 {
		return
	}
	at := time.Duration(1+r.IntN(n-1)) * d
	j.Plans[PlanKey{At: at, Attempt: 1}] = Plan{Outcome: Fail, Took: 20*time.Second + time.Duration(r.Int64N(int64(20*time.Second))) + time.Duration(1+r.IntN(int(time.Millisecond)-1))}
	t := at + 6*time.Second + time.Duration(r.Int64N(int64(6*time.Second)))
	for i := range Replicas {
		sc.Events = append(sc.Events, Event{At: t + time.Duration(i)*time.Millisecond, Kind: Replace, Replica: i, Job: j.Name})
	}
}

// crowdGrace is how long after its tick a replica looks at the Cron slots
// it does not own: the runtime's lookGrace for any interval of 20 s or
// more.
const crowdGrace = 2 * time.Second

// genCrowd draws, from a stream of its own, in one seed of 40, a
// crowd of 20 to 100 leased jobs that share a daily Cron spec due once in
// the span, each replica's batches bounded at 2 to 8 commands: the owner
// of each slot claims it at the tick, the other replicas look at it two
// seconds later, and the runs, which take two seconds give or take 50 ms,
// end among those looks. (A crowd costs more than its runs: miniredis
// reads every key to expire at each command.) In half of those seeds
// SCRIPT FLUSH comes just before the tick and a replica's client has only
// Process; two in three of the other replicas' clients are go-redis's
// AutoPipeliner, blocking or asynchronous (only in a crowd's seeds, which
// replay a few milliseconds apart anyway: its flushers batch the commands
// of one instant in the order the Go scheduler runs their goroutines).
// The crowd's DB waits for no replicas: a DB that does is not batched.
func genCrowd(sc *Scenario) {
	r := rand.New(rand.NewPCG(uint64(sc.Seed), 0xc20d))
	if r.IntN(40) != 0 {
		return
	}
	sc.Replicated = false
	sc.Crowd, sc.BatchSize = 20+r.IntN(81), []int{2, 4, 8}[r.IntN(3)]
	// A tick an hour into the span or later, at a minute no other job's
	// spec names.
	tick := sc.Start.Add(time.Hour + time.Duration(r.Int64N(int64(sc.Span-2*time.Hour))))
	spec := fmt.Sprintf("CRON_TZ=UTC %d %d * * *", []int{7, 23, 38, 52}[r.IntN(4)], tick.Hour())
	v := Version{Policy: Policy{Kind: CronSpec, Spec: spec}, Attempts: 1 + r.IntN(3)}
	for k := range sc.Crowd {
		j := Job{Name: fmt.Sprintf("j%d", len(sc.Jobs)), Versions: []Version{v, v, v}, NoStartup: true, Crowd: true,
			Plans: make(map[PlanKey]Plan),
			Quick: crowdGrace - 50*time.Millisecond + time.Duration(r.Int64N(int64(100*time.Millisecond))) + time.Duration(1+k)}
		sc.Jobs = append(sc.Jobs, j)
	}
	switch r.IntN(4) {
	case 0, 1:
		if s, ok := v.Policy.Interval(false).NextSlot(sc.Start); ok && s.Start.Before(sc.Start.Add(sc.Span)) {
			at := s.Start.Sub(sc.Start) - time.Duration(r.Int64N(int64(time.Second)))
			sc.Events = append(sc.Events, Event{At: at, Kind: ScriptFlush, D: time.Millisecond})
		}
		sc.ProcessOnly[r.IntN(Replicas)] = true
	}
	for i := range sc.AutoPipelined {
		if !sc.ProcessOnly[i] && r.IntN(3) > 0 {
			sc.AutoPipelined[i] = 1 + r.IntN(2)
		}
	}
}

// knobs draws a release's spread, TTL, history and run deadline.
func knobs(r *rand.Rand, v *Version) {
	if v.Policy.Shared() {
		v.Spread = []time.Duration{0, 0, time.Minute, 5 * time.Minute, 10 * time.Minute}[r.IntN(5)]
		v.TTL = []time.Duration{0, 0, 0, 20 * time.Minute, 45 * time.Minute}[r.IntN(5)]
	} else if r.IntN(4) == 0 {
		v.TTL = v.Policy.D / 2
	}
	v.History = []int{0, 0, 1, 3}[r.IntN(4)]
	v.Deadline = []time.Duration{0, 0, 0, 90 * time.Second, 5 * time.Minute}[r.IntN(5)]
}

func genPolicy(r *rand.Rand, kind PolicyKind) Policy {
	if kind == CronSpec {
		return Policy{Kind: CronSpec, Spec: cronSpecs[r.IntN(len(cronSpecs))]}
	}
	return Policy{Kind: kind, D: durations[r.IntN(len(durations))]}
}

func genJob(r *rand.Rand, name string, start time.Time, span time.Duration) Job {
	kind := CronSpec
	if r.IntN(3) == 0 {
		kind = PolicyKind(1 + r.IntN(2))
	}
	v := Version{Policy: genPolicy(r, kind), Attempts: 1 + r.IntN(3)}
	j := Job{Name: name, Versions: []Version{v}, Plans: make(map[PlanKey]Plan),
		Quick: time.Second + time.Duration(1+r.IntN(int(time.Millisecond)-1))}
	// A second release: another schedule of the same kind, or other
	// attempts; deploys roll it out.
	next := v
	if r.IntN(2) == 0 {
		next.Policy = genPolicy(r, kind)
	} else {
		next.Attempts = 1 + (v.Attempts+r.IntN(2))%3
	}
	j.Versions = append(j.Versions, next)
	if r.IntN(4) == 0 {
		j.NoStartup = true
		if r.IntN(3) > 0 {
			j.CatchUp = 3 * time.Hour
		}
	}
	// The default run lease (30 s at most) on a quarter of the jobs: a
	// longer one takes fewer heartbeats through a slow run, which cost
	// the simulation most of its time.
	j.RunTTL = []time.Duration{0, 2 * time.Minute, 5 * time.Minute, 10 * time.Minute}[r.IntN(4)]
	if r.IntN(3) == 0 {
		j.Backoff = 10 * time.Second
	}
	// Plans for a third of the runs of the schedule, some of their
	// retries and some requested runs, by the slots of the first release
	// (or its intervals, for a duration policy) that the span can hold.
	type slot struct{ at, length time.Duration }
	var slots []slot
	if every := v.Policy.Interval(false); kind == CronSpec {
		for s, ok := every.NextSlot(start.Add(-24 * time.Hour)); ok && s.Start.Before(start.Add(span)); s, ok = every.NextSlot(s.Start) {
			if s.End.After(start) { // the slot of the startup run, and later ones
				slots = append(slots, slot{s.Start.Sub(start), s.End.Sub(s.Start)})
			}
		}
	} else {
		for at := time.Duration(0); at < span; at += v.Policy.D {
			slots = append(slots, slot{at, v.Policy.D})
		}
	}
	for _, sl := range slots {
		for attempt := 1; attempt <= 3 && r.IntN(3) == 0; attempt++ {
			p := genPlan(r, min(sl.length, 2*time.Hour))
			j.Plans[PlanKey{At: sl.at, Attempt: attempt}] = p
			if p.Outcome == Succeed {
				break
			}
		}
		if r.IntN(6) == 0 {
			j.Plans[PlanKey{At: sl.at, Attempt: 1, Requested: true}] = genPlan(r, min(sl.length, 2*time.Hour))
		}
	}
	return j
}

// genEvents draws about one fault or command an hour.
// genPlan draws a run's plan: to fail, panic, run slow (up to one and a
// half times period), ignore cancellation, or just take a while.
func genPlan(r *rand.Rand, period time.Duration) Plan {
	// Mostly under 30 s; one in four up to 5 minutes.
	p := Plan{Took: time.Duration(100+r.IntN(30_000)) * time.Millisecond}
	if r.IntN(4) == 0 {
		p.Took *= 10
	}
	switch x := r.IntN(20); {
	case x < 7:
		p.Outcome = Fail
	case x < 9:
		p.Outcome = Panic
	case x < 14:
		p.Took = time.Duration(float64(period) * (0.3 + 1.2*r.Float64())).Round(time.Millisecond)
		if r.IntN(3) == 0 {
			p.Outcome = Fail
		}
	case x < 17:
		p.Stubborn = true
		p.Took = time.Duration(1+r.IntN(10)) * time.Minute
	}
	// Nanoseconds that keep its end off every other instant: a run that
	// returns as its heartbeat is due races it.
	p.Took += time.Duration(1 + r.IntN(int(time.Millisecond)-1))
	return p
}

func genEvents(r *rand.Rand, sc *Scenario) []Event {
	var evs []Event
	at := func() time.Duration { return time.Duration(r.Int64N(int64(sc.Span))) }
	between := func(lo, hi time.Duration) time.Duration { return lo + time.Duration(r.Int64N(int64(hi-lo))) }
	job := func() string { return sc.Jobs[r.IntN(len(sc.Jobs))].Name }
	for range int(sc.Span / time.Hour) {
		t, rep := at(), r.IntN(Replicas)
		switch x := r.IntN(100); {
		case x < 15: // a crash and a start at once
			evs = append(evs, Event{At: t, Kind: Restart, Replica: rep})
		case x < 30: // a crash, and a start later
			evs = append(evs, Event{At: t, Kind: Kill, Replica: rep},
				Event{At: t + between(time.Minute, 3*time.Hour), Kind: Restart, Replica: rep})
		case x < 40:
			evs = append(evs, Event{At: t, Kind: RedisDown, D: between(time.Second, 15*time.Minute)})
		case x < 50:
			evs = append(evs, Event{At: t, Kind: RedisStall, D: between(100*time.Millisecond, 3*time.Minute)})
		case x < 55:
			evs = append(evs, Event{At: t, Kind: RedisRestart, D: between(0, 30*time.Second)})
		case x < 60:
			d := between(time.Second, 20*time.Minute)
			if r.IntN(2) == 0 {
				d = -d
			}
			// A clock that jumps, and NTP stepping it back later.
			evs = append(evs, Event{At: t, Kind: StepClock, Replica: rep, D: d},
				Event{At: t + between(time.Minute, 2*time.Hour), Kind: StepClock, Replica: rep, D: -d})
		case x < 70:
			j := job()
			evs = append(evs, Event{At: t, Kind: Pause, Job: j},
				Event{At: t + between(10*time.Minute, 5*time.Hour), Kind: Resume, Job: j})
		case x < 90:
			evs = append(evs, Event{At: t, Kind: RunNow, Job: job()})
		default: // a rolling deploy of a job's next version, a replica at a time
			j := job()
			for i := range Replicas {
				evs = append(evs, Event{At: t, Kind: Deploy, Replica: (rep + i) % Replicas, Job: j, Version: 1})
				t += between(30*time.Second, 5*time.Minute)
			}
		}
	}
	evs = slices.DeleteFunc(evs, func(e Event) bool { return e.At >= sc.Span })
	slices.SortStableFunc(evs, func(a, b Event) int { return int(a.At - b.At) })
	return evs
}

// job returns the scenario's job called name, and false if it has none.
func (sc *Scenario) job(name string) (*Job, bool) {
	for i := range sc.Jobs {
		if sc.Jobs[i].Name == name {
			return &sc.Jobs[i], true
		}
	}
	return nil, false
}

// short formats a duration without its zero units: 1h, 15m, 1m30s, 1.5s.
func short(d time.Duration) string {
	s := d.String()
	for _, z := range []string{"h0m0s", "m0s"} {
		if len(s) > len(z) && s[len(s)-len(z):] == z {
			return s[:len(s)-len(z)+1]
		}
	}
	return s
}
