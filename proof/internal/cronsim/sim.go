package cronsim

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wakuwaku-go/wakuwaku/cron"
	"github.com/wakuwaku-go/wakuwaku/crontest"
	"github.com/wakuwaku-go/wakuwaku/internal/cronhook"
	"github.com/wakuwaku-go/wakuwaku/internal/recordfmt"
	"github.com/wakuwaku-go/wakuwaku/lock"
)

// probeEvery is how often the simulation reads every job's record for I7.
const probeEvery = 5 * time.Minute

// History is what one simulated run did, as the public API shows it: the
// runs crontest recorded, what each job's code saw, the runtime's Warn and
// Error log records, the operators' commands and what they returned, and
// the records as Redis held them every few minutes.
type History struct {
	Runs   []Run
	Logs   []LogRecord
	Admin  []AdminOp
	Probes []Probe
	// Harness is what crontest reported (cron.Start refusing the jobs, a
	// Shutdown that failed).
	Harness []string
	End     time.Time // the bubble's time when the run stopped
	// Reasons are the skip reasons the runtimes gave, at any level, and
	// Applied the scenario's events that changed something (a Replace,
	// Remove or Add that the replica's runtime took): for the coverage.
	Reasons, Applied []string
	// AfterRunLooks is how many times a replica's tick in mode skip found
	// no run holding the job and planned a look at its slot for when the
	// replica's own run ends (a Debug line).
	AfterRunLooks int
	// AfterErrorLooks is how many times a replica planned that look after
	// a tick in mode skip that Redis did not answer.
	AfterErrorLooks int
	// CompletionsFirst is how many times a replica's batching client sent
	// completions while claims or looks waited, its bound reached.
	CompletionsFirst int
	// Starved is each batch of completions that a replica's batching
	// client sent after more batches of claims and looks than its bound
	// let go first while it waited at the head of its queue (I11).
	Starved []Starved
	// Shutdowns are the graceful Shutdowns the scenario made, and what
	// each returned when; AfterShutdown the commands a replica's client
	// was asked for after its Shutdown returned (I12).
	Shutdowns     []ShutdownOp
	AfterShutdown []crontest.Sent
	// Skips are the ticks the replicas reported skipped
	// (cron.Observer.RunSkipped), and Entries every entry of the jobs'
	// histories that a read of Redis found, each once, by job (I13, I14);
	// HistoryReads when each job's history was read.
	Skips        []crontest.Skip
	Entries      map[string][]Entry
	HistoryReads map[string][]time.Time
	// Listed are the runs that Admin.Status listed more than once, as a
	// read found them.
	Listed []string
	// Resent are the Info records of runs recorded after Redis answered
	// again (R13), for the coverage.
	Resent []LogRecord
}

// ShutdownOp is a graceful Shutdown of a replica: when it was called, when
// its context ended (zero for none), and when it returned with what.
type ShutdownOp struct {
	Replica            int
	At, Deadline, Done time.Time
	Err                error
}

// Entry is an entry of a job's history, as Redis held it, and when a read
// first found it.
type Entry struct {
	recordfmt.Entry
	Seen time.Time
}

// Starved is a batch of completions that waited at the head of its queue
// while Passed batches of claims and looks went first, until At.
type Starved struct {
	At     time.Time
	Passed int
}

// Run is one run of a job, as crontest recorded it, with what the job's
// code saw of it.
type Run struct {
	Job     string
	Replica int
	Tick    cron.Tick
	// Start and End are when the run began and returned (zero while it
	// goes on), by the bubble's clock; Err is what it returned, and
	// crontest.ErrKilled for a run whose replica was killed.
	Start, End time.Time
	Err        error
	// Number is the job's run number across the cluster, which chose its
	// plan (-1 if the job's code never saw the run); Version the release
	// of the job's code that ran it.
	Number, Version int
	// Cancelled is when the run's context ended, if it did before
	// Process returned, and Cause why.
	Cancelled time.Time
	Cause     error
}

// effectiveEnd is when r stopped being a run of the job: when it returned,
// or when its context told it to stop, whichever came first; end for a run
// still going.
func (r *Run) effectiveEnd(end time.Time) time.Time {
	e := r.End
	if e.IsZero() {
		e = end
	}
	if !r.Cancelled.IsZero() && r.Cancelled.Before(e) {
		e = r.Cancelled
	}
	return e
}

// LogRecord is a Warn or Error record of a replica's runtime.
type LogRecord struct {
	At        time.Time
	Level     slog.Level
	Msg       string
	Replica   string
	Job       string
	Reason    string
	Scheduled time.Time
	Err       string // the record's "error", if it has one
	Slot      string // the tick's slot, as the record names it (a Cron slot's key)
}

// AdminOp is an operator's command and what it returned: nil, an error
// wrapping cron.ErrUnknownJob, or errRedisUnavailable when Redis was down
// or stalled and the command was not sent.
type AdminOp struct {
	At   time.Time
	Kind EventKind
	Job  string
	Err  error
}

var errRedisUnavailable = errors.New("redis unavailable")

// Probe is a job's record as Redis held it at At.
type Probe struct {
	At     time.Time
	Job    string
	Exists bool
	TTL    time.Duration // negative for a record that never expires
	Slot   string        // the record's latest slot, and when it began
	SlotAt time.Time
	State  string
}

// Simulate runs sc in a testing/synctest bubble of t and returns its
// history. Nothing it finds fails t: [Check] judges the history. t fails
// only if the bubble deadlocks (goroutines left blocked at its end).
func Simulate(t *testing.T, sc *Scenario) *History {
	h := &History{}
	synctest.Test(t, func(t *testing.T) {
		defer func() {
			if v := recover(); v != nil && v != errFatal {
				panic(v)
			}
		}()
		w := &world{
			sc: sc, h: h, tb: &recorder{TB: t, h: h},
			runs: make(map[runKey]*seen), counts: make(map[string]int), alive: make(map[string]*atomic.Bool),
			reasons: make(map[string]bool), applied: make(map[string]bool),
		}
		defer func() {
			for _, c := range w.clients {
				hooked.Delete(c)
			}
		}()
		w.run()
	})
	return h
}

// world is a simulation in progress.
type world struct {
	sc *Scenario
	h  *History
	tb *recorder
	c  *crontest.Cluster

	mu       sync.Mutex
	versions [Replicas]map[string]int // each replica's release of each job
	starting int                      // the replica being started
	started  int                      // how many of the first starts (New's) were
	runs     map[runKey]*seen
	counts   map[string]int // runs so far, by job
	logs     []LogRecord
	alive    map[string]*atomic.Bool // by replica name, its runtime's sink's

	downUntil, stallUntil time.Time // of Redis, as the events made them
	removed               [Replicas]map[string]bool
	reasons, applied      map[string]bool
	afterRunLooks         int          // guarded by mu
	afterErrorLooks       int          // guarded by mu
	clients               []any        // the jobs' clients, in hooked
	completionsFirst      atomic.Int64 // cronhook.CompletionsFirst's calls

	qmu     sync.Mutex // for queues and starved, which the batching clients' hooks write
	queues  map[any]*completionQueue
	starved []Starved

	shutdowns []*ShutdownOp   // guarded by mu
	resent    []LogRecord     // guarded by mu
	entrySeen map[string]bool // the raw entries read so far
	admin     cron.Admin      // the operator's
	listed    map[string]bool // Listed, as a set
	rdb       *redis.Client   // the simulation's own client
}

// completionQueue is what a batching client's hooks tell of its queue of
// completions: how many batches wait in it, and how many batches of
// claims and looks went while the first of them waited at its head.
type completionQueue struct{ waiting, passed int }

// queued and dequeued follow a batching client's queues (cronhook.Queued,
// cronhook.Dequeued) and note each batch of completions sent after more
// than completionsBound batches of claims and looks went before it.
func (w *world) queued(c any, completions bool) {
	w.qmu.Lock()
	defer w.qmu.Unlock()
	if completions {
		w.queue(c).waiting++
	}
}

func (w *world) dequeued(c any, completions bool) {
	w.qmu.Lock()
	defer w.qmu.Unlock()
	q := w.queue(c)
	switch {
	case !completions && q.waiting > 0:
		q.passed++
	case completions:
		if q.passed > completionsBound {
			w.starved = append(w.starved, Starved{At: time.Now(), Passed: q.passed})
		}
		q.waiting, q.passed = max(q.waiting-1, 0), 0
	}
}

func (w *world) queue(c any) *completionQueue {
	q := w.queues[c]
	if q == nil {
		if w.queues == nil {
			w.queues = make(map[any]*completionQueue)
		}
		q = &completionQueue{}
		w.queues[c] = q
	}
	return q
}

// completionsBound is how many batches of claims and looks the runtime's
// batching client lets go before a batch of completions at the head of
// its queue (batchWire in cron/batch.go, which its doc comment states).
const completionsBound = 4

// hooked maps the clients of the jobs' DBs to their world, for the
// runtime's hooks: seeds run side by side in one process.
var hooked sync.Map

func init() {
	cronhook.BatchSize = func(c any) int {
		if w, ok := hooked.Load(c); ok {
			return w.(*world).sc.BatchSize
		}
		return 0
	}
	cronhook.CompletionsFirst = func(c any) {
		if w, ok := hooked.Load(c); ok {
			w.(*world).completionsFirst.Add(1)
		}
	}
	cronhook.Queued = func(c any, completions bool) {
		if w, ok := hooked.Load(c); ok {
			w.(*world).queued(c, completions)
		}
	}
	cronhook.Dequeued = func(c any, completions bool) {
		if w, ok := hooked.Load(c); ok {
			w.(*world).dequeued(c, completions)
		}
	}
}

// runKey names a run as both the job's code and crontest see it: its
// replica, the job, and its tick's number and start by the replica's
// clock. Two replicas may run one slot under one tick number and start
// (after Redis lost the record, with their clocks apart by the time
// between the runs; seeds 6005933, 6008885).
type runKey struct {
	replica int
	job     string
	run     uint64
	started int64
}

// seen is what a job's code saw of a run.
type seen struct {
	number, version int
	cancelled       time.Time
	cause           error
}

// run plays the scenario: it starts the cluster, applies each event at its
// instant, reads the records every probeEvery, and collects the history
// at the end.
func (w *world) run() {
	sc := w.sc
	time.Sleep(time.Until(sc.Start))
	for i := range w.versions {
		w.versions[i] = make(map[string]int)
		w.removed[i] = make(map[string]bool)
	}
	sink := &logSink{w: w}
	w.c = crontest.New(w.tb, Replicas, w.jobs,
		crontest.WithClockOffsets(sc.Offsets[:]...),
		crontest.WithRedisLatency(sc.Latencies[:]...),
		crontest.WithCronOptions(cron.WithLogger(slog.New(sink))))
	rdb := w.c.Client()
	admin := cron.NewAdmin(lock.NewDB(rdb, w.dbOptions()...))
	w.admin, w.rdb = admin, rdb
	w.entrySeen, w.listed = make(map[string]bool), make(map[string]bool)
	w.h.Entries, w.h.HistoryReads = make(map[string][]Entry), make(map[string][]time.Time)
	ctx := context.Background()

	probe := sc.Start.Add(probeEvery / 2).Add(7) // off every other instant
	end := sc.Start.Add(sc.Span)
	for _, e := range sc.Events {
		at := sc.Start.Add(e.At)
		for ; probe.Before(at); probe = probe.Add(probeEvery) {
			time.Sleep(time.Until(probe))
			w.probe(ctx, rdb)
		}
		time.Sleep(time.Until(at))
		w.apply(ctx, e, admin)
	}
	for ; probe.Before(end); probe = probe.Add(probeEvery) {
		time.Sleep(time.Until(probe))
		w.probe(ctx, rdb)
	}
	time.Sleep(time.Until(end))
	w.probe(ctx, rdb)
	w.collect()
}

// dbOptions are the options of the jobs' DB and the operator's.
func (w *world) dbOptions() []lock.DBOption {
	if w.sc.Replicated {
		return []lock.DBOption{lock.WithReplicas(1, time.Second)}
	}
	return nil
}

// jobs is the cluster's jobs function: a fresh copy of each job, in the
// release that the replica being started runs. New starts the replicas in
// order; a restart says which it starts.
func (w *world) jobs(rdb *redis.Client) []cron.Job {
	w.mu.Lock()
	i := w.starting
	if w.started < Replicas {
		i = w.started
		w.started++
	}
	w.mu.Unlock()
	out := make([]cron.Job, 0, len(w.sc.Jobs))
	for k := range w.sc.Jobs {
		out = append(out, w.build(rdb, i, &w.sc.Jobs[k]))
	}
	return out
}

// build returns a fresh copy of job j for replica i, in the release that
// the replica runs now.
func (w *world) build(rdb *redis.Client, i int, j *Job) cron.Job {
	w.mu.Lock()
	v := w.versions[i][j.Name]
	w.mu.Unlock()
	var c lock.Client = rdb
	switch {
	case w.sc.Replicated: // WithReplicas needs a *redis.Client
	case w.sc.ProcessOnly[i]:
		c = processOnly{rdb}
	case w.sc.AutoPipelined[i] > 0:
		// One per client, closed with it. Ordered, with one batch on the
		// wire (its default), a flusher that finds the batch out waits on
		// a timer from a pool that go-redis shares across goroutines: a
		// timer another bubble made, which this one may not wait on. So
		// up to eight batches go out at once, unordered, which changes no
		// order the runtime needs (each caller waits for its command's
		// reply before it sends another). And a batch's bytes stay within
		// what miniredis reads before it answers: the in-memory connection
		// has no buffer.
		open, opts := rdb.AutoPipelineWithOptions, redis.DefaultBlockingAutoPipelineOptions()
		if w.sc.AutoPipelined[i] == 2 {
			open, opts = rdb.AsyncAutoPipelineWithOptions, redis.DefaultAutoPipelineOptions()
		}
		opts.MaxConcurrentBatches, opts.Unordered, opts.FullDuplex, opts.MaxBatchBytes = 8, true, false, 3<<10
		if ap, err := open(opts); err != nil {
			w.tb.Errorf("cronsim: replica %d's AutoPipeliner: %v", i, err)
		} else {
			c = ap
		}
	}
	if _, ok := hooked.LoadOrStore(c, w); !ok {
		w.mu.Lock()
		w.clients = append(w.clients, c)
		w.mu.Unlock()
	}
	version := j.Versions[v]
	opts := []cron.FuncOption{cron.WithLease(cron.LeaseConfig{
		DB: lock.NewDB(c, w.dbOptions()...), Attempts: version.Attempts, CatchUp: j.CatchUp, RunTTL: j.RunTTL, Backoff: j.Backoff,
		TTL: version.TTL, History: version.History,
	})}
	if version.Deadline > 0 {
		opts = append(opts, cron.WithRunDeadline(version.Deadline))
	}
	return cron.Func(j.Name, version.Interval(j.NoStartup),
		func(ctx context.Context, t cron.Tick) error { return w.process(ctx, i, j, v, t) }, opts...)
}

// processOnly is a client with only Process, as a user's wrapper may be
// (lock.Client asks for no more): the runtime can't pipeline on it.
type processOnly struct{ c *redis.Client }

func (p processOnly) Process(ctx context.Context, cmd redis.Cmder) error {
	return p.c.Process(ctx, cmd)
}

// process is a run of job j in release v on replica i: it follows its
// plan.
func (w *world) process(ctx context.Context, i int, j *Job, v int, t cron.Tick) error {
	w.mu.Lock()
	n := w.counts[j.Name]
	w.counts[j.Name]++
	s := &seen{number: n, version: v}
	w.runs[runKey{i, j.Name, t.Run, t.Started.UnixNano()}] = s
	w.mu.Unlock()
	stop := context.AfterFunc(ctx, func() {
		w.mu.Lock()
		s.cancelled, s.cause = time.Now(), context.Cause(ctx)
		w.mu.Unlock()
	})
	defer stop()

	p, ok := j.Plans[w.planKey(j, v, t)]
	if !ok {
		p = Plan{Took: j.Quick}
	}
	if p.Stubborn {
		time.Sleep(p.Took)
	} else {
		timer := time.NewTimer(p.Took)
		defer timer.Stop()
		select {
		case <-timer.C:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
	switch p.Outcome {
	case Fail:
		return fmt.Errorf("run %d of %s failed as planned", n, j.Name)
	case Panic:
		panic(fmt.Sprintf("run %d of %s panicked as planned", n, j.Name))
	}
	return nil
}

// planKey returns the key of the plan of a run of job j in release v.
func (w *world) planKey(j *Job, v int, t cron.Tick) PlanKey {
	k := PlanKey{Attempt: t.Attempt, Requested: t.Trigger == cron.TriggerRequest}
	if k.Requested {
		k.Attempt = 1
	}
	if _, ok := t.Slot.Key(); ok {
		k.At = t.Slot.Start.Sub(w.sc.Start)
	} else {
		k.At = time.Since(w.sc.Start).Truncate(j.Versions[v].Policy.D)
	}
	return k
}

// apply does what e says, at its instant.
func (w *world) apply(ctx context.Context, e Event, admin cron.Admin) {
	now := time.Now()
	switch e.Kind {
	case Kill:
		w.killed(e.Replica)
		w.c.Kill(e.Replica)
	case Restart:
		w.restart(e.Replica)
	case RedisDown:
		w.c.RedisDown(e.D)
		w.downUntil = later(w.downUntil, now.Add(e.D))
	case RedisStall:
		w.c.RedisStall(e.D)
		w.stallUntil = later(w.stallUntil, now.Add(e.D))
	case RedisRestart:
		w.readHistories(ctx) // what the restart is about to lose
		w.c.RedisRestart(e.D)
		w.downUntil = later(w.downUntil, now.Add(e.D))
	case Failover:
		w.readHistories(ctx)
		w.c.RedisFailover(e.Lag, e.D)
		w.downUntil = later(w.downUntil, now.Add(e.Lag+e.D))
	case StepClock:
		w.c.StepClock(e.Replica, e.D)
	case Deploy:
		w.mu.Lock()
		w.versions[e.Replica][e.Job] = e.Version
		w.mu.Unlock()
		w.restart(e.Replica)
	case Replace, Add:
		j, _ := w.sc.job(e.Job)
		if e.Kind == Replace {
			w.mu.Lock()
			w.versions[e.Replica][e.Job] = e.Version
			w.mu.Unlock()
		}
		// A replica without the job gets the release at its Add; the
		// runtime has nothing to replace, nor to add twice.
		if w.removed[e.Replica][e.Job] != (e.Kind == Add) {
			return
		}
		w.removed[e.Replica][e.Job] = false
		w.applied[e.Kind.String()] = true
		build := func(rdb *redis.Client) cron.Job { return w.build(rdb, e.Replica, j) }
		if e.Kind == Replace {
			w.c.Replace(build, e.Replica)
		} else {
			w.c.Add(build, e.Replica)
		}
	case Remove:
		if w.removed[e.Replica][e.Job] {
			return
		}
		w.removed[e.Replica][e.Job] = true
		w.applied[e.Kind.String()] = true
		// Remove waits for the job's runs in progress there; the events
		// after it come on time.
		go w.c.Remove(e.Job, e.Replica)
	case ScriptFlush:
		if err := w.c.Client().ScriptFlush(ctx).Err(); err != nil {
			w.tb.Errorf("cronsim: SCRIPT FLUSH: %v", err)
		}
	case LoseReplies:
		w.c.LoseReplies(e.D)
	case Freeze:
		w.c.Freeze(e.Replica, e.D)
	case Shutdown:
		w.shutdown(e)
	default:
		op := AdminOp{At: now, Kind: e.Kind, Job: e.Job, Err: errRedisUnavailable}
		// An operator's command fails while Redis is down or stalled
		// (his client is not the replicas', so crontest doesn't fail it).
		if !now.Before(w.downUntil) && !now.Before(w.stallUntil) {
			switch e.Kind {
			case Pause:
				op.Err = admin.Pause(ctx, e.Job)
			case Resume:
				op.Err = admin.Resume(ctx, e.Job)
			case RunNow:
				op.Err = admin.RunNow(ctx, e.Job)
			}
		}
		w.h.Admin = append(w.h.Admin, op)
	}
}

// msgResent is the Info line of a run whose completion Redis took after it
// answered again (R13).
const msgResent = "cron job's run was recorded after Redis answered again"

// shutdown shuts replica e.Replica down gracefully, with a context that
// ends e.D later (never if e.D is negative), without holding up the
// events after it.
func (w *world) shutdown(e Event) {
	op := &ShutdownOp{Replica: e.Replica, At: time.Now()}
	ctx, cancel := context.Background(), context.CancelFunc(func() {})
	if e.D >= 0 {
		op.Deadline = op.At.Add(e.D)
		ctx, cancel = context.WithDeadline(ctx, op.Deadline)
	}
	w.mu.Lock()
	w.shutdowns = append(w.shutdowns, op)
	w.mu.Unlock()
	go func() {
		defer cancel()
		err := w.c.Shutdown(ctx, e.Replica)
		w.mu.Lock()
		op.Done, op.Err = time.Now(), err
		w.mu.Unlock()
	}()
}

// readHistories reads every job's history (but a crowd's), keeps the
// entries it had not seen, and checks that Admin.Status lists each run
// once.
func (w *world) readHistories(ctx context.Context) {
	if now := time.Now(); now.Before(w.downUntil) || now.Before(w.stallUntil) {
		return // the read would fail, or wait out the stall
	}
	jobs := slices.DeleteFunc(slices.Clone(w.sc.Jobs), func(j Job) bool { return j.Crowd })
	lists := make([]*redis.StringSliceCmd, len(jobs))
	for from := 0; from < len(jobs); from += 8 {
		_, err := w.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i, j := range jobs[from:min(from+8, len(jobs))] {
				lists[from+i] = p.LRange(ctx, recordfmt.HistoryKey(leases.Key(j.Name)), 0, -1)
			}
			return nil
		})
		if err != nil {
			w.tb.Errorf("cronsim: reading the histories: %v", err)
			return
		}
	}
	now := time.Now()
	for i, j := range jobs {
		raw := lists[i].Val()
		for k := len(raw) - 1; k >= 0; k-- { // oldest first
			key := j.Name + "\x00" + raw[k]
			if w.entrySeen[key] {
				continue
			}
			w.entrySeen[key] = true
			if e := recordfmt.ParseHistory(raw[k : k+1]); len(e) == 1 {
				w.h.Entries[j.Name] = append(w.h.Entries[j.Name], Entry{Entry: e[0], Seen: now})
			}
		}
		w.h.HistoryReads[j.Name] = append(w.h.HistoryReads[j.Name], now)
		st, err := w.admin.Status(ctx, j.Name)
		if err != nil {
			continue
		}
		seen := make(map[string]bool)
		for _, rr := range st.History {
			k := fmt.Sprintf("%s: slot %s attempt %d (%v) by %s, started %s, %s", j.Name, rr.Slot, rr.Attempt, rr.Trigger, rr.Replica,
				rr.Started.UTC().Format(time.RFC3339Nano), rr.Outcome)
			if seen[k] && !w.listed[k] {
				w.listed[k] = true
				w.h.Listed = append(w.h.Listed, stamp(now)+": "+k)
			}
			seen[k] = true
		}
	}
}

// restart starts a fresh runtime for replica i with its releases.
func (w *world) restart(i int) {
	w.killed(i)
	w.mu.Lock()
	w.starting = i
	w.mu.Unlock()
	w.c.Restart(i)
}

// killed silences replica i's runtime, which crontest is about to kill.
func (w *world) killed(i int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if dead := w.alive[fmt.Sprintf("replica-%d", i)]; dead != nil {
		dead.Store(true)
	}
}

// probe reads every job's record.
func (w *world) probe(ctx context.Context, rdb *redis.Client) {
	now := time.Now()
	// One round trip for every 8 jobs' records and their TTLs, but for a
	// crowd's (see Job.Crowd): more in one pipeline would fill the
	// in-memory connection (net.Pipe, no buffer) both ways and wait out
	// its write timeout.
	jobs := slices.DeleteFunc(slices.Clone(w.sc.Jobs), func(j Job) bool { return j.Crowd })
	fields := make([]*redis.MapStringStringCmd, len(jobs))
	ttls := make([]*redis.DurationCmd, len(jobs))
	for from := 0; from < len(jobs); from += 8 {
		_, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i, j := range jobs[from:min(from+8, len(jobs))] {
				key := recordfmt.Key(leases.Key(j.Name))
				fields[from+i], ttls[from+i] = p.HGetAll(ctx, key), p.PTTL(ctx, key)
			}
			return nil
		})
		if err != nil {
			w.tb.Errorf("cronsim: reading the records: %v", err)
			return
		}
	}
	for i, j := range jobs {
		p := Probe{At: now, Job: j.Name}
		if f := fields[i].Val(); len(f) > 0 {
			slot := recordfmt.ParseSlot(f["slot"])
			p.Exists, p.TTL, p.Slot, p.State = true, ttls[i].Val(), slot.ID, slot.State
			if ms, err := strconv.ParseInt(slot.At, 10, 64); err == nil {
				p.SlotAt = time.UnixMilli(ms).UTC()
			}
		}
		w.h.Probes = append(w.h.Probes, p)
	}
	w.readHistories(ctx)
}

// leases names the jobs' leases as the runtime does ([cron.LeaseNamespace]):
// a job's lease key gives its record its key.
var leases = lock.New[string](cron.LeaseNamespace, time.Second)

// collect copies the runs and log records into the history, in an order
// that does not depend on the goroutines' scheduling.
func (w *world) collect() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, r := range w.c.Runs() {
		run := Run{Job: r.Job, Replica: r.Replica, Tick: r.Tick, Start: r.Start, End: r.End, Err: r.Err, Number: -1}
		if s := w.runs[runKey{r.Replica, r.Job, r.Tick.Run, r.Tick.Started.UnixNano()}]; s != nil {
			run.Number, run.Version, run.Cancelled, run.Cause = s.number, s.version, s.cancelled, s.cause
		}
		w.h.Runs = append(w.h.Runs, run)
	}
	slices.SortStableFunc(w.h.Runs, func(a, b Run) int {
		if n := a.Start.Compare(b.Start); n != 0 {
			return n
		}
		if a.Replica != b.Replica {
			return a.Replica - b.Replica
		}
		return cmpStrings(a.Job, b.Job)
	})
	w.h.Logs = slices.Clone(w.logs)
	slices.SortStableFunc(w.h.Logs, func(a, b LogRecord) int {
		if n := a.At.Compare(b.At); n != 0 {
			return n
		}
		return cmpStrings(a.Replica+a.Job+a.Msg, b.Replica+b.Job+b.Msg)
	})
	w.h.End = time.Now()
	for _, op := range w.shutdowns {
		w.h.Shutdowns = append(w.h.Shutdowns, *op)
	}
	w.h.AfterShutdown = w.c.AfterShutdown()
	w.h.Resent = slices.Clone(w.resent)
	w.h.Skips = w.c.Skips()
	w.h.Reasons = slices.Sorted(maps.Keys(w.reasons))
	w.h.Applied = slices.Sorted(maps.Keys(w.applied))
	w.h.AfterRunLooks = w.afterRunLooks
	w.h.AfterErrorLooks = w.afterErrorLooks
	w.h.CompletionsFirst = int(w.completionsFirst.Load())
	w.qmu.Lock()
	w.h.Starved = slices.Clone(w.starved)
	w.qmu.Unlock()
}

func cmpStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func earlier(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// recorder is the testing.TB that the cluster reports to: it keeps the
// errors in the history instead of failing the test, so that a shrinking
// run that fails is not a failed test.
type recorder struct {
	testing.TB
	mu sync.Mutex
	h  *History
}

func (r *recorder) Helper() {}

func (r *recorder) Error(args ...any) { r.add(fmt.Sprint(args...)) }

func (r *recorder) Errorf(format string, args ...any) { r.add(fmt.Sprintf(format, args...)) }

// Fatal and Fatalf record the failure and end the run: the simulation
// recovers errFatal.
func (r *recorder) Fatal(args ...any) {
	r.add(fmt.Sprint(args...))
	panic(errFatal)
}

func (r *recorder) Fatalf(format string, args ...any) {
	r.add(fmt.Sprintf(format, args...))
	panic(errFatal)
}

func (r *recorder) add(msg string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.h.Harness = append(r.h.Harness, msg)
}

var errFatal = errors.New("cronsim: the cluster failed")

// logSink is the runtimes' slog.Handler: it keeps their Warn and Error
// records, but for those of a runtime that crontest killed, which a dead
// process would not have written.
type logSink struct {
	w     *world
	attrs []slog.Attr
	dead  *atomic.Bool // the runtime's, which set its "replica" attribute
}

// Enabled takes Debug records too, for their skip reasons (see
// History.Reasons); the history keeps those at Warn and above.
func (s *logSink) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelDebug }

// WithAttrs is called by each runtime as it starts, with its "replica"
// attribute: the handler it returns is that runtime's.
func (s *logSink) WithAttrs(attrs []slog.Attr) slog.Handler {
	child := &logSink{w: s.w, attrs: append(slices.Clone(s.attrs), attrs...), dead: s.dead}
	for _, a := range attrs {
		if a.Key == "replica" {
			child.dead = new(atomic.Bool)
			s.w.mu.Lock()
			s.w.alive[a.Value.String()] = child.dead
			s.w.mu.Unlock()
		}
	}
	return child
}

func (s *logSink) WithGroup(string) slog.Handler { return s }

func (s *logSink) Handle(_ context.Context, r slog.Record) error {
	if s.dead != nil && s.dead.Load() {
		return nil
	}
	rec := LogRecord{At: time.Now(), Level: r.Level, Msg: r.Message}
	read := func(a slog.Attr) bool {
		switch a.Key {
		case "replica":
			rec.Replica = a.Value.String()
		case "job":
			rec.Job = a.Value.String()
		case "reason":
			rec.Reason = a.Value.String()
		case "scheduled":
			rec.Scheduled = a.Value.Time()
		case "error":
			rec.Err = a.Value.String()
		case "slot":
			rec.Slot = a.Value.String()
		}
		return true
	}
	for _, a := range s.attrs {
		read(a)
	}
	r.Attrs(read)
	s.w.mu.Lock()
	if rec.Reason != "" {
		s.w.reasons[rec.Reason] = true
	}
	if r.Level >= slog.LevelWarn {
		s.w.logs = append(s.w.logs, rec)
	}
	switch r.Message {
	case msgResent:
		s.w.resent = append(s.w.resent, rec)
	case msgLookAfterRun:
		s.w.afterRunLooks++
	case msgLookAfterRunError:
		s.w.afterErrorLooks++
	}
	s.w.mu.Unlock()
	return nil
}
