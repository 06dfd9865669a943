package crontest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/wakuwaku-go/wakuwaku/cron"
	"github.com/wakuwaku-go/wakuwaku/internal/sharedlua"
)

// ErrKilled is the error of a run that [Cluster.Kill] cut short, and of
// every Redis command that the killed replica's client is asked for
// afterwards.
var ErrKilled = errors.New("crontest: replica killed")

// errRedisDown is the error of every Redis command while Redis is down.
var errRedisDown = errors.New("crontest: redis is unreachable")

// Cluster is N replicas of a service's cron jobs over one Redis, on the fake
// time of a testing/synctest bubble. [New] makes one. Its methods must be
// called from inside the bubble; they are safe for concurrent use.
type Cluster struct {
	tb       testing.TB
	jobs     func(rdb *redis.Client) []cron.Job
	cronOpts []cron.Option
	redis    *miniredis.Miniredis
	lua      *sharedlua.Engine // nil with WAKUWAKU_CRONTEST_LUA=fresh

	mu         sync.Mutex
	replicas   []*replica
	started    []*incarnation // every runtime started, for the cleanup
	runs       []*Run
	skips      map[slotOf][]string // why replicas skipped a slot, for messages
	skipped    []Skip              // every RunSkipped, in order
	after      []Sent              // commands sent after their runtime's Shutdown returned
	downUntil  time.Time           // Redis fails every command before it
	stallUntil time.Time           // Redis holds every command until it
	loseUntil  time.Time           // Redis's replies are lost before it
	jobIndex   map[string]cron.Job // the first copy of each job, by name
	observer   *redis.Client       // Client's, made at its first call

	repl replication // the replica that RedisFailover promotes
}

// replica is one replica: its clock and the runtime that runs it now.
type replica struct {
	index   int
	offset  atomic.Int64  // what its clock reads ahead of the bubble's
	latency time.Duration // how long its commands take to reach Redis
	cur     *incarnation  // nil while it is down
	frozen  time.Time     // Freeze holds its commands until then; guarded by Cluster.mu
	start   *time.Timer   // a start that WithStartDelays put off

	// What Add and Remove did to its jobs, in order, which a start
	// applies to New's jobs. Guarded by Cluster.mu.
	changes []change
}

// change is an Add (build), a Replace (build, replace) or a Remove (name)
// of one replica's job.
type change struct {
	build   func(rdb *redis.Client) cron.Job
	replace bool
	remove  string
}

// incarnation is one runtime of a replica, from its start to its kill or
// the test's end.
type incarnation struct {
	rt      *cron.Runtime
	client  *redis.Client
	dead    atomic.Bool
	running map[runOf]*Run // guarded by Cluster.mu
	// shut is set once a Shutdown of it returned, and clean if it
	// returned nil: from then on a command of its client is one sent
	// after Shutdown, and after a clean one, one on its way too (see
	// Cluster.AfterShutdown).
	shut, clean atomic.Bool
}

// runOf names a run of one runtime: its job and its tick's number.
type runOf struct {
	job string
	run uint64
}

// slotOf names a slot of a job.
type slotOf struct {
	job, slot string
}

// Run is one run of a job, as the cluster recorded it.
type Run struct {
	// Job is the job's name.
	Job string
	// Replica is the index of the replica that ran it, from 0.
	Replica int
	// Tick is what the job was handed: Tick.Slot is the slot the run
	// belongs to, Tick.Scheduled and Tick.Started are read on the
	// replica's clock, and Tick.Fence is a leased run's fencing number
	// (the cluster's Redis clock, the bubble's, in µs at its claim).
	Tick cron.Tick
	// Start and End are when the run began and returned, by the bubble's
	// clock; End is zero while the run is in progress.
	Start, End time.Time
	// Err is what the run returned: nil, the job's error, a
	// *cron.PanicError, or ErrKilled for a run whose replica was killed.
	Err error
}

// Option configures a [Cluster]. [New] fails the test on an invalid one.
type Option func(*options) error

type options struct {
	offsets, delays, latencies []time.Duration
	cron                       []cron.Option
}

// WithClockOffsets sets the replicas' clocks: replica i's reads the
// bubble's time plus offsets[i] (a negative offset is a clock behind). The
// replicas without an offset read the bubble's time.
func WithClockOffsets(offsets ...time.Duration) Option {
	return func(o *options) error {
		o.offsets = offsets
		return nil
	}
}

// WithStartDelays starts replica i delays[i] after [New] rather than at
// once, as replicas of a rolling deploy start. A delay must not be negative.
func WithStartDelays(delays ...time.Duration) Option {
	return func(o *options) error {
		for i, d := range delays {
			if d < 0 {
				return fmt.Errorf("crontest: WithStartDelays: replica %d's delay %v is negative", i, d)
			}
		}
		o.delays = delays
		return nil
	}
}

// WithRedisLatency sets how long the replicas' Redis commands take to
// reach Redis: replica i's take latencies[i], and a nanosecond more per
// byte of their arguments; the others take none, and neither does a new
// connection's handshake. The replies come back at once. A latency must
// not be negative.
//
// Besides modelling a replica far from Redis, distinct latencies make a
// test exactly repeatable: replicas that act at one instant of the bubble's
// clock (all of them hear a run-now request at once, or start together)
// reach Redis one after the other, in the order of their latencies, rather
// than in the order the Go scheduler happens to run them; and so do, by
// their sizes, two commands that one replica sends at one instant.
func WithRedisLatency(latencies ...time.Duration) Option {
	return func(o *options) error {
		for i, d := range latencies {
			if d < 0 {
				return fmt.Errorf("crontest: WithRedisLatency: replica %d's latency %v is negative", i, d)
			}
		}
		o.latencies = latencies
		return nil
	}
}

// WithCronOptions adds opts to the options that every replica's runtime is
// started with, such as cron.WithLogger. The cluster sets the clock, the
// replica's name ("replica-<i>") and the observer itself; an observer or
// clock given here is overridden.
func WithCronOptions(opts ...cron.Option) Option {
	return func(o *options) error {
		o.cron = append(o.cron, opts...)
		return nil
	}
}

// New starts a cluster of replicas replicas, each running the jobs that
// jobs returns when called with the replica's own Redis client. jobs is
// called again for each restart: each runtime gets fresh copies.
//
// New must be called inside a testing/synctest bubble (synctest.Test),
// with the bubble's t, or the cluster runs on real time. The bubble's time
// when New is called is where the record begins. New fails tb if replicas
// is below 1, if an option is invalid or if cron.Start refuses the jobs.
// tb's cleanup shuts every runtime down, waits for their runs, killed ones
// included, and closes Redis.
func New(tb testing.TB, replicas int, jobs func(rdb *redis.Client) []cron.Job, opts ...Option) *Cluster {
	tb.Helper()
	var o options
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			tb.Fatal(err)
		}
	}
	if replicas < 1 {
		tb.Fatalf("crontest: New(%d replicas): want at least 1", replicas)
	}
	m := miniredis.NewMiniRedis()
	// Keys expire by time.Now() at each command, which in the bubble is
	// its fake clock: exact, and the same in every run of the test.
	m.ClockTTL(true)
	// Dial starts the server without a listener; the replicas' clients
	// then connect through memPipe (conn.go).
	boot, err := m.Dial()
	if err != nil {
		tb.Fatalf("crontest: starting Redis: %v", err)
	}
	_ = boot.Close()
	var lua *sharedlua.Engine
	if os.Getenv("WAKUWAKU_CRONTEST_LUA") != "fresh" {
		// One Lua state for every script, as Redis keeps one VM;
		// WAKUWAKU_CRONTEST_LUA=fresh gives each script miniredis's own
		// fresh state instead, to compare.
		lua = sharedlua.Install(m)
	}
	c := &Cluster{
		lua:      lua,
		tb:       tb,
		jobs:     jobs,
		cronOpts: o.cron,
		redis:    m,
		skips:    make(map[slotOf][]string),
		jobIndex: make(map[string]cron.Job),
	}
	tb.Cleanup(c.close)
	for i := range replicas {
		r := &replica{index: i}
		if i < len(o.offsets) {
			r.offset.Store(int64(o.offsets[i]))
		}
		if i < len(o.latencies) {
			r.latency = o.latencies[i]
		}
		c.replicas = append(c.replicas, r)
	}
	for i, r := range c.replicas {
		if i < len(o.delays) && o.delays[i] > 0 {
			c.mu.Lock()
			r.start = time.AfterFunc(o.delays[i], func() { c.delayedStart(r) })
			c.mu.Unlock()
			continue
		}
		if err := c.start(r); err != nil {
			tb.Fatal(err)
		}
	}
	return c
}

// delayedStart starts a replica whose start WithStartDelays put off, unless
// Kill or Restart came first.
func (c *Cluster) delayedStart(r *replica) {
	c.mu.Lock()
	due := r.start != nil
	r.start = nil
	c.mu.Unlock()
	if !due {
		return
	}
	if err := c.start(r); err != nil {
		c.tb.Error(err) // not the test's goroutine: no Fatal
	}
}

// start starts a fresh runtime for r.
func (c *Cluster) start(r *replica) error {
	inc := &incarnation{running: make(map[runOf]*Run)}
	inc.client = redis.NewClient(&redis.Options{
		// In memory, inside the bubble (conn.go): no socket, whose I/O
		// would keep the bubble's clock from moving.
		Dialer:     func(context.Context, string, string) (net.Conn, error) { return c.dial() },
		MaxRetries: -1, // a failed command fails the run's admission, as a real outage's last retry does
		// Off, or NewClient resolves Addr's host name: network I/O
		// from the bubble.
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
	})
	inc.client.AddHook(faults{c: c, r: r, inc: inc, latency: r.latency})
	c.mu.Lock()
	changes := slices.Clone(r.changes)
	c.mu.Unlock()
	jobs := c.jobs(inc.client)
	for _, ch := range changes {
		if ch.replace {
			j := ch.build(inc.client)
			if k := slices.IndexFunc(jobs, func(o cron.Job) bool { return cron.JobName(o) == cron.JobName(j) }); k >= 0 {
				jobs[k] = j
			}
		} else if ch.build != nil {
			jobs = append(jobs, ch.build(inc.client))
		} else {
			jobs = slices.DeleteFunc(jobs, func(j cron.Job) bool { return cron.JobName(j) == ch.remove })
		}
	}
	c.mu.Lock()
	for _, j := range jobs {
		c.index(j)
	}
	c.mu.Unlock()
	clock := func() time.Time { return time.Now().Add(time.Duration(r.offset.Load())) }
	opts := append(slices.Clone(c.cronOpts),
		cron.WithClock(clock),
		cron.WithReplica(fmt.Sprintf("replica-%d", r.index)),
		cron.WithObserver(cron.Observer{
			RunStarted:  func(t cron.Tick) { c.runStarted(r.index, inc, t) },
			RunFinished: func(t cron.Tick, err error, _ time.Duration) { c.runFinished(inc, t, err) },
			RunSkipped:  func(t cron.Tick, reason string, err error) { c.runSkipped(r.index, inc, t, reason, err) },
		}))
	// The incarnation is the replica's before its first run can start.
	c.mu.Lock()
	r.cur = inc
	r.frozen = time.Time{}
	c.started = append(c.started, inc)
	c.mu.Unlock()
	rt, err := cron.Start(jobs, opts...)
	if err != nil {
		c.mu.Lock()
		r.cur = nil
		c.mu.Unlock()
		inc.dead.Store(true)
		_ = inc.client.Close()
		return fmt.Errorf("crontest: starting replica %d: %w", r.index, err)
	}
	c.mu.Lock()
	inc.rt = rt
	killed := inc.dead.Load() // by a Kill while cron.Start ran
	c.mu.Unlock()
	if killed {
		halt(rt)
	}
	return nil
}

// index notes j as the first copy of its name, for the assertions. c.mu is
// held.
func (c *Cluster) index(j cron.Job) {
	if name := cron.JobName(j); name != "" {
		if _, ok := c.jobIndex[name]; !ok {
			c.jobIndex[name] = j
		}
	}
}

// Add adds the job that job builds, called with each replica's own Redis
// client, to the running replicas listed (every replica if none is), with
// cron.Runtime.Add, and to what they start with from then on: a
// Restart keeps it, and a replica that is down or not started yet gets it
// when it starts. Adding a leased job to some replicas and later to the
// others is a rolling deploy of it. Add fails the test if a runtime
// refuses the job.
func (c *Cluster) Add(job func(rdb *redis.Client) cron.Job, replicas ...int) {
	c.tb.Helper()
	for _, r := range c.pick(replicas) {
		c.mu.Lock()
		r.changes = append(r.changes, change{build: job})
		inc := r.cur
		c.mu.Unlock()
		if inc == nil || inc.rt == nil {
			continue // its start adds it
		}
		j := job(inc.client)
		c.mu.Lock()
		c.index(j)
		c.mu.Unlock()
		if err := inc.rt.Add(j); err != nil && !errors.Is(err, cron.ErrShutdown) {
			c.tb.Fatalf("crontest: adding %q to replica %d: %v", cron.JobName(j), r.index, err)
		}
	}
}

// Replace puts the job that job builds, called with each replica's own
// Redis client, in the place of the job of the same name on the running
// replicas listed (every replica if none is), with cron.Runtime.Replace,
// and in what they start with from then on, as Add does. Replace fails
// the test if a running replica refuses the job.
func (c *Cluster) Replace(job func(rdb *redis.Client) cron.Job, replicas ...int) {
	c.tb.Helper()
	for _, r := range c.pick(replicas) {
		c.mu.Lock()
		r.changes = append(r.changes, change{build: job, replace: true})
		inc := r.cur
		c.mu.Unlock()
		if inc == nil || inc.rt == nil {
			continue // its start replaces it
		}
		j := job(inc.client)
		if err := inc.rt.Replace(j); err != nil && !errors.Is(err, cron.ErrShutdown) {
			c.tb.Fatalf("crontest: replacing %q on replica %d: %v", cron.JobName(j), r.index, err)
		}
	}
}

// Remove removes the job named name from the running replicas listed
// (every replica if none is), with cron.Runtime.Remove, which waits for
// its runs in progress there, and from what they start with from then on.
// Remove fails the test if a running replica has no such job.
func (c *Cluster) Remove(name string, replicas ...int) {
	c.tb.Helper()
	for _, r := range c.pick(replicas) {
		c.mu.Lock()
		r.changes = append(r.changes, change{remove: name})
		inc := r.cur
		c.mu.Unlock()
		if inc == nil || inc.rt == nil {
			continue
		}
		if err := inc.rt.Remove(context.Background(), name); err != nil && !errors.Is(err, cron.ErrShutdown) {
			c.tb.Fatalf("crontest: removing %q from replica %d: %v", name, r.index, err)
		}
	}
}

// pick returns the replicas listed, or every replica if none is.
func (c *Cluster) pick(indices []int) []*replica {
	c.tb.Helper()
	if len(indices) == 0 {
		return c.replicas
	}
	out := make([]*replica, len(indices))
	for i, n := range indices {
		out[i] = c.replica(n)
	}
	return out
}

func (c *Cluster) runStarted(replica int, inc *incarnation, t cron.Tick) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if inc.dead.Load() {
		return
	}
	run := &Run{Job: t.Job, Replica: replica, Tick: t, Start: time.Now()}
	c.runs = append(c.runs, run)
	inc.running[runOf{t.Job, t.Run}] = run
}

func (c *Cluster) runFinished(inc *incarnation, t cron.Tick, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if inc.dead.Load() {
		return
	}
	if run := inc.running[runOf{t.Job, t.Run}]; run != nil {
		run.End, run.Err = time.Now(), err
		delete(inc.running, runOf{t.Job, t.Run})
	}
}

func (c *Cluster) runSkipped(replica int, inc *incarnation, t cron.Tick, reason string, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if inc.dead.Load() {
		return
	}
	c.skipped = append(c.skipped, Skip{Job: t.Job, Replica: replica, Tick: t, Reason: reason, Err: err, At: time.Now()})
	why := fmt.Sprintf("replica %d skipped it: %s", replica, reason)
	if err != nil {
		why += ": " + err.Error()
	}
	k := slotOf{t.Job, t.Slot.String()}
	c.skips[k] = append(c.skips[k], why)
}

// replica returns replica i, failing the test if there is none.
func (c *Cluster) replica(i int) *replica {
	c.tb.Helper()
	if i < 0 || i >= len(c.replicas) {
		c.tb.Fatalf("crontest: no replica %d: the cluster has replicas 0 to %d", i, len(c.replicas)-1)
	}
	return c.replicas[i]
}

// Kill stops replica i as a crash does: no cron.Runtime.Shutdown, no
// waiting. Its runs in progress end now, recorded with [ErrKilled]; its
// Redis client fails every command from now on, so its leases stay in Redis
// until they expire; nothing it does afterwards is recorded. The runs'
// contexts are cancelled (cause cron.ErrShutdown) so that their goroutines,
// which a test can't kill, end; the cleanup waits for them. Killing a
// replica that is down, or whose delayed start has not come, keeps it down.
func (c *Cluster) Kill(i int) {
	c.tb.Helper()
	r := c.replica(i)
	c.mu.Lock()
	r.cancelStart()
	inc := r.cur
	r.cur = nil
	if inc != nil {
		inc.dead.Store(true)
		now := time.Now()
		for k, run := range inc.running {
			run.End, run.Err = now, ErrKilled
			delete(inc.running, k)
		}
	}
	var rt *cron.Runtime
	if inc != nil {
		rt = inc.rt // nil if its start has not returned: start shuts it down
	}
	c.mu.Unlock()
	if rt == nil {
		return
	}
	halt(rt)
}

// halt stops the scheduling of a killed runtime and cancels its runs,
// without waiting for them: Shutdown with a context that is already done.
func halt(rt *cron.Runtime) {
	done, cancel := context.WithCancel(context.Background())
	cancel()
	_ = rt.Shutdown(done)
}

// ErrShutDown is the error of every Redis command that a replica's client
// is asked for after [Cluster.Shutdown] of its runtime returned: the
// process has exited, so the command goes nowhere.
var ErrShutDown = errors.New("crontest: replica shut down")

// Shutdown stops replica i gracefully, as a deploy's SIGTERM does: it calls
// cron.Runtime.Shutdown(ctx) and returns its error. While it waits, the
// replica's runs go on and its commands reach Redis as before; once it
// returned, the replica is down (a later [Cluster.Restart] starts it
// again), and its client sends nothing more, as an exited process: each
// command it is asked for fails with [ErrShutDown], and is listed by
// [Cluster.AfterShutdown], since a runtime whose Shutdown returned has no
// business sending one. A run that Shutdown gave up waiting for goes on
// until it returns (its end is recorded), as its goroutine would in a
// process that lingers. Shutdown of a replica that is down does nothing.
func (c *Cluster) Shutdown(ctx context.Context, i int) error {
	c.tb.Helper()
	r := c.replica(i)
	c.mu.Lock()
	r.cancelStart()
	inc := r.cur
	c.mu.Unlock()
	if inc == nil || inc.rt == nil {
		return nil
	}
	err := inc.rt.Shutdown(ctx)
	c.mu.Lock()
	inc.clean.Store(err == nil)
	inc.shut.Store(true)
	if r.cur == inc {
		r.cur = nil
	}
	c.mu.Unlock()
	return err
}

// Sent is a Redis command that a replica's client was asked for after
// [Cluster.Shutdown] of its runtime returned, or that was on its way when
// a Shutdown returned nil.
type Sent struct {
	Replica int
	At      time.Time // by the bubble's clock
	Command string    // its name and first argument, as "evalsha 1f3c…"
}

// AfterShutdown returns the commands that replicas' clients were asked for
// after their runtime's [Cluster.Shutdown] returned, and those that were
// on their way to Redis when a Shutdown returned nil, in order. (A
// Shutdown whose context ended first may leave a command on its way, as
// cron.Runtime.Shutdown says.) A test that
// shuts replicas down expects none: a runtime's Shutdown returns only when
// nothing of it can send a command again. (A job's own code that keeps
// using the client it was built with after its run returned is the job's
// business, and shows here too.)
func (c *Cluster) AfterShutdown() []Sent {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.after)
}

func (c *Cluster) sentAfterShutdown(r *replica, cmds []redis.Cmder) {
	if handshake(cmds) {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, cmd := range cmds {
		name := cmd.Name()
		if args := cmd.Args(); len(args) > 1 {
			name += " " + fmt.Sprint(args[1])
		}
		c.after = append(c.after, Sent{Replica: r.index, At: time.Now(), Command: name})
	}
}

// Skip is a tick that a replica's runtime reported skipped
// (cron.Observer.RunSkipped).
type Skip struct {
	Job     string
	Replica int
	Tick    cron.Tick
	Reason  string
	Err     error
	At      time.Time // by the bubble's clock
}

// Skips returns every tick the replicas reported skipped, in the order
// they did: a killed replica's reports after its kill are not kept.
func (c *Cluster) Skips() []Skip {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.skipped)
}

// cancelStart stops a start that WithStartDelays put off, if one is to
// come. Cluster.mu is held.
func (r *replica) cancelStart() {
	if r.start != nil {
		r.start.Stop()
		r.start = nil
	}
}

// Restart starts a fresh runtime for replica i, with fresh jobs from New's
// function and a new Redis client, as a restarted process has; its clock
// keeps its offset. A replica that is up is killed first (see
// [Cluster.Kill]). Restart fails the test if cron.Start refuses the jobs.
func (c *Cluster) Restart(i int) {
	c.tb.Helper()
	c.Kill(i)
	if err := c.start(c.replica(i)); err != nil {
		c.tb.Fatal(err)
	}
}

// RedisDown makes Redis unreachable to every replica for d from now: each
// command fails with an error, as when the server or the network is down,
// and succeeds again once d has passed. Keys keep expiring meanwhile. A
// later call can lengthen the outage, not shorten it.
func (c *Cluster) RedisDown(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if until := time.Now().Add(d); until.After(c.downUntil) {
		c.downUntil = until
	}
}

// RedisStall makes Redis hold every command of every replica for d from
// now, as a server that is busy (a slow command, a fork for a snapshot) or
// a network that stops delivering does: a command that reaches Redis before
// d has passed waits until then and is served afterwards, in the order of
// the replicas' latencies (see [WithRedisLatency]); one whose context ends
// first fails with the context's error. Keys keep expiring meanwhile. A
// later call can lengthen the stall, not shorten it. Pub/Sub messages and
// [Cluster.Client] are not held.
func (c *Cluster) RedisStall(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if until := time.Now().Add(d); until.After(c.stallUntil) {
		c.stallUntil = until
	}
}

// RedisRestart restarts Redis without persistence, as a crash or a
// failover to a replica that had not caught up does: every key and every
// cached script is lost now, and Redis is down for down (see
// [Cluster.RedisDown]; 0 for a restart the replicas don't notice). The
// replicas' Pub/Sub subscriptions survive it.
func (c *Cluster) RedisRestart(down time.Duration) {
	c.tb.Helper()
	c.redis.FlushAll()
	if err := c.Client().ScriptFlush(context.Background()).Err(); err != nil {
		c.tb.Errorf("crontest: RedisRestart: flushing the scripts: %v", err)
	}
	c.RedisDown(down)
}

// Client returns a client of the cluster's Redis that no fault reaches:
// for the test's own reads, and for an operator's commands
// (cron.NewAdmin(lock.NewDB(c.Client()))). Every call returns the same
// client, which the cluster closes at tb's cleanup. Its WAITs are
// answered as the replicas' are (see [Cluster.RedisFailover]).
func (c *Cluster) Client() *redis.Client {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.observer == nil {
		c.observer = redis.NewClient(&redis.Options{
			Dialer:                   func(context.Context, string, string) (net.Conn, error) { return c.dial() },
			MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
		})
		c.observer.AddHook(acks{c})
	}
	return c.observer
}

// LoseReplies makes Redis lose its replies to the replicas for d from
// now: each command, or pipeline, that reaches Redis meanwhile is
// executed, its reply lost, and sent again at once with the same
// arguments, as go-redis does after a read error or a timeout
// (Options.MaxRetries); the caller gets the second execution's reply. A
// later call can lengthen it, not shorten it.
func (c *Cluster) LoseReplies(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if until := time.Now().Add(d); until.After(c.loseUntil) {
		c.loseUntil = until
	}
}

// Freeze stops replica i's process for d from now, as a long garbage
// collection or a paused virtual machine does, as far as Redis can tell:
// every command it sends meanwhile waits until d has passed, and its
// Redis leases may run out. Its goroutines and timers go on (a test can't
// stop them), so its runs' contexts still end on time. A later call can
// lengthen the freeze, not shorten it; a restart ends it.
func (c *Cluster) Freeze(i int, d time.Duration) {
	c.tb.Helper()
	r := c.replica(i)
	c.mu.Lock()
	defer c.mu.Unlock()
	if until := time.Now().Add(d); until.After(r.frozen) {
		r.frozen = until
	}
}

// StepClock steps replica i's clock by d (back if d is negative), as an NTP
// correction or a machine waking from suspend does. The step lasts: it
// survives a restart. The runtime's timers wait on the monotonic clock, as
// a real process's do, so the replica's next tick still comes when it was
// due by the bubble's clock, and the tick after it by the new reading.
func (c *Cluster) StepClock(i int, d time.Duration) {
	c.tb.Helper()
	c.replica(i).offset.Add(int64(d))
}

// Runs returns the runs recorded so far, by start, then by replica.
func (c *Cluster) Runs() []Run {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]Run, len(c.runs))
	for i, r := range c.runs {
		out[i] = *r
	}
	slices.SortStableFunc(out, func(a, b Run) int {
		if n := a.Start.Compare(b.Start); n != 0 {
			return n
		}
		return a.Replica - b.Replica
	})
	return out
}

// close shuts down every runtime, the killed ones included, waits for their
// runs, and closes the clients and Redis.
func (c *Cluster) close() {
	c.mu.Lock()
	for _, r := range c.replicas {
		if r.start != nil {
			r.start.Stop()
			r.start = nil
		}
	}
	started := slices.Clone(c.started)
	c.mu.Unlock()
	for _, inc := range started {
		if inc.rt != nil {
			if err := inc.rt.Shutdown(context.Background()); err != nil {
				c.tb.Errorf("crontest: shutting a runtime down: %v", err)
			}
		}
		_ = inc.client.Close()
	}
	c.mu.Lock()
	observer, raw := c.observer, c.repl.raw
	c.mu.Unlock()
	if observer != nil {
		_ = observer.Close()
	}
	if raw != nil {
		_ = raw.Close()
	}
	c.redis.Close()
}

// redisErr returns the error a command of inc's client fails with now, if
// any.
func (c *Cluster) redisErr(inc *incarnation) error {
	if inc.dead.Load() {
		return ErrKilled
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if time.Now().Before(c.downUntil) {
		return errRedisDown
	}
	return nil
}

// transit takes a command of inc's client to Redis: it waits out a stall,
// then the replica's latency (none for a connection's handshake), and
// returns the error the command fails with when it arrives, if any. A
// killed replica's command goes nowhere.
func (c *Cluster) transit(ctx context.Context, r *replica, inc *incarnation, latency time.Duration, cmds ...redis.Cmder) error {
	if inc.dead.Load() {
		return ErrKilled
	}
	if inc.shut.Load() {
		c.sentAfterShutdown(r, cmds)
		return ErrShutDown
	}
	for {
		c.mu.Lock()
		stall := time.Until(c.stallUntil)
		if r != nil && r.cur == inc {
			stall = max(stall, time.Until(r.frozen))
		}
		c.mu.Unlock()
		if stall <= 0 {
			break
		}
		if err := wait(ctx, stall); err != nil {
			return err
		}
	}
	if latency > 0 && !handshake(cmds) {
		if err := wait(ctx, latency+size(cmds)); err != nil {
			return err
		}
	}
	if inc.clean.Load() && !inc.dead.Load() {
		// On its way when Shutdown returned nil, which it must not be.
		c.sentAfterShutdown(r, cmds)
		return ErrShutDown
	}
	return c.redisErr(inc)
}

// losing reports whether Redis's replies are lost now (LoseReplies).
func (c *Cluster) losing() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Before(c.loseUntil)
}

// size is how long cmds take to send beside the latency: a nanosecond per
// byte of their arguments. Two commands that a replica sends at one instant
// (its runtime's goroutines may) then reach Redis in an order of their own,
// not in the order the Go scheduler happened to run their goroutines.
func size(cmds []redis.Cmder) time.Duration {
	n := 0
	for _, cmd := range cmds {
		for _, a := range cmd.Args() {
			switch v := a.(type) {
			case string:
				n += len(v)
			case []byte:
				n += len(v)
			default:
				n += len(fmt.Sprint(v))
			}
		}
	}
	return time.Duration(n)
}

// handshake reports whether cmds are a new connection's handshake (HELLO,
// CLIENT SETINFO), which go-redis sends through the hooks too: it takes no
// time, so that whether a command finds a connection in the pool or dials
// one does not change when it reaches Redis.
func handshake(cmds []redis.Cmder) bool {
	for _, cmd := range cmds {
		if n := cmd.Name(); n != "hello" && n != "client" {
			return false
		}
	}
	return len(cmds) > 0
}

// wait waits d, or until ctx ends and returns its error.
func wait(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// faults is the go-redis hook that takes each command of a replica to
// Redis through the cluster's faults (see transit): a killed replica's,
// and every command while Redis is down, fail before they are sent.
type faults struct {
	c       *Cluster
	r       *replica
	inc     *incarnation
	latency time.Duration
}

func (f faults) DialHook(next redis.DialHook) redis.DialHook { return next }

func (f faults) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if err := f.c.transit(ctx, f.r, f.inc, f.latency, cmd); err != nil {
			cmd.SetErr(err)
			return err
		}
		before := f.c.failovers()
		err := next(ctx, cmd)
		if f.c.losing() && !handshake([]redis.Cmder{cmd}) {
			cmd.SetErr(nil)
			err = next(ctx, cmd)
		}
		f.c.acknowledge(before, []redis.Cmder{cmd})
		return err
	}
}

func (f faults) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if err := f.c.transit(ctx, f.r, f.inc, f.latency, cmds...); err != nil {
			for _, cmd := range cmds {
				cmd.SetErr(err)
			}
			return err
		}
		before := f.c.failovers()
		err := next(ctx, cmds)
		if f.c.losing() && !handshake(cmds) {
			for _, cmd := range cmds {
				cmd.SetErr(nil)
			}
			err = next(ctx, cmds)
		}
		f.c.acknowledge(before, cmds)
		return err
	}
}
