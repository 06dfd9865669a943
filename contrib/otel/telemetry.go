// Package otel reports a wakuwaku cron runtime and its lock operations to
// OpenTelemetry: instruments on the metric API, and a span per run.
//
// [New] makes a [Telemetry] for one replica. Its [Telemetry.Observer] is
// the [cron.Observer] to start the runtime with, and its
// [Telemetry.ObserveLock] the hook of a [lock.DB]:
//
//	tel, err := otel.New("web-1") // the name given to cron.WithReplica
//	db := lock.NewDB(client, lock.WithObserver(tel.ObserveLock))
//	rt, err := cron.Start(jobs, cron.WithReplica("web-1"), cron.WithObserver(tel.Observer()))
//
// Its name is that of the OpenTelemetry API's root package: import one of
// the two under another name, as the example does.
//
// # Metrics
//
// The instruments are those of the Prometheus adapter
// (github.com/wakuwaku-go/wakuwaku/contrib/prometheus), named and measured
// as OpenTelemetry expects:
//
//	wakuwaku.cron.runs                   counter, {run}: runs that finished; wakuwaku.job, wakuwaku.outcome (ok, error, panic, timeout)
//	wakuwaku.cron.run.duration           histogram, s: how long Process took; wakuwaku.job
//	wakuwaku.cron.schedule.lag           histogram, s: a scheduled run's start minus when it was due; wakuwaku.job
//	wakuwaku.cron.skipped                counter, {tick}: ticks whose slot this replica knows was not run; wakuwaku.job, wakuwaku.reason
//	wakuwaku.cron.ticks.elsewhere        counter, {tick}: ticks that found the slot in another replica's hands; wakuwaku.job, wakuwaku.reason
//	wakuwaku.cron.admission.errors       counter, {tick}: ticks skipped because the admission (a leased job's claim in Redis) failed; wakuwaku.job
//	wakuwaku.cron.active_runs            up-down counter, {run}: runs in Process now; wakuwaku.job
//	wakuwaku.cron.last_success.timestamp gauge, s: Unix time at which the last successful run finished; wakuwaku.job
//	wakuwaku.cron.clock.skew             gauge, s: how far the replica's clock is ahead of Redis's
//	wakuwaku.lock.operations             counter, {operation}: wakuwaku.lock.kind, .namespace, .operation, .result
//	wakuwaku.lock.operation.duration     histogram, s: the same attributes
//
// wakuwaku.lock.result is a [lock.Event]'s Result. The slot, the run number
// and the replica are never metric attributes: the first two would make a
// series per run, and the replica is the resource's (service.instance.id)
// to say. The histograms advise the buckets of the Prometheus adapter.
//
// The outcomes are the words of the CLI, the status page and the record's
// history. A tick that did not run counts once: in wakuwaku.cron.ticks.elsewhere
// if another replica has the slot (reasons lease_held, running,
// retry_wait and skipped_elsewhere: how every replica but one sees every
// slot of a leased job),
// else in wakuwaku.cron.skipped, a slot not run as far as this replica
// knows, which is what to alert on.
//
// wakuwaku.reason is a short word for the runtime's reason, the Prometheus
// adapter's label value; the sentence (a cron.Reason constant) stays in
// the runtime's log records:
//
//	lease_held        cron.ReasonLeaseHeld: another replica ran the slot
//	running           cron.ReasonRunning: a run of the job was in progress on another replica
//	paused            cron.ReasonPaused: an operator paused the job (a leased job's slot: counted by the one replica that recorded it skipped)
//	retry_wait        cron.ReasonRetryWait: the slot's failed run waits out its back-off
//	attempts_used_up  cron.ReasonAttemptsUsedUp: the slot failed every attempt it had
//	too_late          cron.ReasonTooLate: the tick came after its slot's lease ended
//	still_running     cron.ReasonStillRunning: a previous run of a Cron job was going at the slot's tick (leased: counted by the one replica that recorded it skipped)
//	too_many_runs     cron.ReasonTooManyRuns: an AfterStart job had its limit of runs going
//	admission_failed  cron.ReasonAdmissionFailed: the admission (a leased job's claim in Redis) failed
//	not_admitted      cron.ReasonNotAdmitted: an Admission refused without a reason
//	not_replicated    cron.ReasonNotReplicated: no replica acknowledged the claim (lock.WithReplicas)
//	skipped_elsewhere cron.ReasonSkippedElsewhere: another replica recorded the slot skipped, and counted it
//	other             any other reason: an Admission's own, or one that a later runtime adds
//
// An Admission's own reason is free text, so it counts as other: an
// attribute value per sentence would make a series per sentence. Look for
// the sentence in the logs.
//
// The lock instruments count what a [lock.DB] made with
// lock.WithObserver(tel.ObserveLock) sends to Redis, one operation each, as
// [lock.Event] describes: every acquire (TryLock, a FencedLock's TryLock,
// TryRead, TryWrite, each name of a TryLockMany, each attempt of a waiting
// Lock), release and extension (WhileHeld's included) of its locks and
// tokens. They do not count an operation refused before anything was sent
// (a done context, lock.ErrNotPermitted), the read-only queries of a
// lock.ReadOnlyDB (Held, Inspect), nor the cron runtime's own leases: a
// [cron.Leased] job's slot lease and run lease are kept by the runtime's
// scripts in the job's record, beneath the DB's observer, and show in the
// cron instruments instead (runs, and ticks skipped as lease_held or
// running). A job that takes a lock itself, on a DB with the hook, is
// counted.
//
// A job's counters of runs (one per outcome but timeout, which only a job
// with a run deadline has) and of admission errors, and its active runs,
// have data points at 0 from its first tick on the replica, run or
// skipped, so that a job that never succeeded has an ok count that
// stays at 0. Every other data point appears with its first
// event, since it has no value before: a job that never succeeded has no
// last success, a replica without leased jobs no clock skew.
//
// # Spans
//
// Each run is a span named "cron " and the job's name, from
// [cron.Observer.RunStarted] to [cron.Observer.RunFinished]: the time
// Process took. It carries wakuwaku.job, wakuwaku.run, wakuwaku.slot,
// wakuwaku.replica, wakuwaku.trigger, wakuwaku.attempt and, at its end,
// wakuwaku.outcome; a run that failed has status Error and its error as an
// exception event, with the stack of a panic. The context Process gets
// carries the run's span ([cron.Observer.RunContext]), so the spans the job
// starts from it are the run's children, and a trace shows what the run
// did.
package otel

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	global "go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/wakuwaku-go/wakuwaku/cron"
	"github.com/wakuwaku-go/wakuwaku/lock"
)

// scope is the instrumentation scope of the meter and the tracer.
const scope = "github.com/wakuwaku-go/wakuwaku/contrib/otel"

// The explicit bucket boundaries the histograms advise, in seconds: those
// of the Prometheus adapter. A cron job may take 10ms or an hour; a tick is
// ordinarily a millisecond late and minutes late on a replica that
// stalled; a lock operation is a round trip to Redis.
var (
	runBuckets  = []float64{0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 1800, 3600}
	lagBuckets  = []float64{0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 30, 60, 600}
	lockBuckets = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1}
)

// The attributes' keys.
const (
	keyJob        = attribute.Key("wakuwaku.job")
	keyRun        = attribute.Key("wakuwaku.run")
	keySlot       = attribute.Key("wakuwaku.slot")
	keyReplica    = attribute.Key("wakuwaku.replica")
	keyTrigger    = attribute.Key("wakuwaku.trigger")
	keyAttempt    = attribute.Key("wakuwaku.attempt")
	keyOutcome    = attribute.Key("wakuwaku.outcome")
	keyReason     = attribute.Key("wakuwaku.reason")
	keyLockKind   = attribute.Key("wakuwaku.lock.kind")
	keyLockNs     = attribute.Key("wakuwaku.lock.namespace")
	keyLockOp     = attribute.Key("wakuwaku.lock.operation")
	keyLockResult = attribute.Key("wakuwaku.lock.result")
)

// Option configures a [Telemetry]. [New] refuses an invalid one.
type Option func(*config) error

type config struct {
	meters  metric.MeterProvider
	tracers trace.TracerProvider
}

// WithMeterProvider makes the instruments with p instead of the global
// meter provider (go.opentelemetry.io/otel.GetMeterProvider). p must not
// be nil.
func WithMeterProvider(p metric.MeterProvider) Option {
	return func(c *config) error {
		if p == nil {
			return errors.New("otel: WithMeterProvider(nil)")
		}
		c.meters = p
		return nil
	}
}

// WithTracerProvider starts the runs' spans with p instead of the global
// tracer provider (go.opentelemetry.io/otel.GetTracerProvider). p must not
// be nil.
func WithTracerProvider(p trace.TracerProvider) Option {
	return func(c *config) error {
		if p == nil {
			return errors.New("otel: WithTracerProvider(nil)")
		}
		c.tracers = p
		return nil
	}
}

// Telemetry records the runs of cron runtimes and the operations of lock
// DBs as OpenTelemetry metrics and spans (the package doc lists them). Its
// methods are safe for concurrent use. Make one with [New]; the zero
// Telemetry is not usable.
type Telemetry struct {
	replica attribute.KeyValue
	tracer  trace.Tracer

	runs          metric.Int64Counter
	runDuration   metric.Float64Histogram
	lag           metric.Float64Histogram
	skipped       metric.Int64Counter
	elsewhere     metric.Int64Counter
	admissionErrs metric.Int64Counter
	active        metric.Int64UpDownCounter
	lastSuccess   metric.Float64Gauge
	skew          metric.Float64Gauge
	lockOps       metric.Int64Counter
	lockDuration  metric.Float64Histogram

	mu    sync.Mutex
	spans map[runKey]trace.Span // the runs in Process

	lockAttrs sync.Map // lockKey -> *lockOpts
	jobs      sync.Map // the names of the jobs seen, whose counters have data points
}

// runKey names a run: a job's run number, and its start, since two
// runtimes of one process that share a Telemetry number their runs alike.
type runKey struct {
	job     string
	run     uint64
	started int64
}

type lockKey struct{ kind, ns, op, result string }

// lockOpts are the measurement options of one family, operation and
// result, made once: passed as they are, they cost a lock operation no
// allocation.
type lockOpts struct {
	add    []metric.AddOption
	record []metric.RecordOption
}

// New returns the telemetry of the replica named replica, the name the
// runs' spans carry: give the runtime the same with [cron.WithReplica].
// Without options it uses the global meter and tracer providers. It
// returns an error for an empty replica, an invalid option, or an
// instrument the meter provider refused.
func New(replica string, opts ...Option) (*Telemetry, error) {
	if replica == "" {
		return nil, errors.New("otel: New(\"\"): the replica needs a name")
	}
	c := config{meters: global.GetMeterProvider(), tracers: global.GetTracerProvider()}
	for _, o := range opts {
		if err := o(&c); err != nil {
			return nil, err
		}
	}
	meter := c.meters.Meter(scope)
	t := &Telemetry{
		replica: keyReplica.String(replica),
		tracer:  c.tracers.Tracer(scope),
		spans:   make(map[runKey]trace.Span),
	}
	var err, e error
	add := func(e error) { err = errors.Join(err, e) }
	t.runs, e = meter.Int64Counter("wakuwaku.cron.runs", metric.WithUnit("{run}"),
		metric.WithDescription("Runs of a cron job that finished, by outcome: ok, error, panic or timeout."))
	add(e)
	t.runDuration, e = meter.Float64Histogram("wakuwaku.cron.run.duration", metric.WithUnit("s"),
		metric.WithDescription("How long a cron job's runs took."), metric.WithExplicitBucketBoundaries(runBuckets...))
	add(e)
	t.lag, e = meter.Float64Histogram("wakuwaku.cron.schedule.lag", metric.WithUnit("s"),
		metric.WithDescription("How late a cron job's scheduled runs started after they were due."), metric.WithExplicitBucketBoundaries(lagBuckets...))
	add(e)
	t.skipped, e = meter.Int64Counter("wakuwaku.cron.skipped", metric.WithUnit("{tick}"),
		metric.WithDescription("Ticks of a cron job whose slot, as far as this replica knows, was not run, by reason."))
	add(e)
	t.elsewhere, e = meter.Int64Counter("wakuwaku.cron.ticks.elsewhere", metric.WithUnit("{tick}"),
		metric.WithDescription("Ticks of a cron job that found its slot in another replica's hands: run or running there, waiting for a retry, or recorded skipped there, by reason."))
	add(e)
	t.admissionErrs, e = meter.Int64Counter("wakuwaku.cron.admission.errors", metric.WithUnit("{tick}"),
		metric.WithDescription("Ticks of a cron job skipped because its admission failed: for a leased job, Redis or its lease could not be reached."))
	add(e)
	t.active, e = meter.Int64UpDownCounter("wakuwaku.cron.active_runs", metric.WithUnit("{run}"),
		metric.WithDescription("Runs of a cron job in progress on this replica."))
	add(e)
	t.lastSuccess, e = meter.Float64Gauge("wakuwaku.cron.last_success.timestamp", metric.WithUnit("s"),
		metric.WithDescription("When the last successful run of a cron job on this replica finished, in seconds since the Unix epoch."))
	add(e)
	t.skew, e = meter.Float64Gauge("wakuwaku.cron.clock.skew", metric.WithUnit("s"),
		metric.WithDescription("How far this replica's clock is ahead of the Redis server's (negative: behind), as last measured."))
	add(e)
	t.lockOps, e = meter.Int64Counter("wakuwaku.lock.operations", metric.WithUnit("{operation}"),
		metric.WithDescription("Lock operations sent to Redis, by lock kind, namespace, operation and result."))
	add(e)
	t.lockDuration, e = meter.Float64Histogram("wakuwaku.lock.operation.duration", metric.WithUnit("s"),
		metric.WithDescription("How long lock operations took, from sending the command to its reply."), metric.WithExplicitBucketBoundaries(lockBuckets...))
	add(e)
	if err != nil {
		return nil, fmt.Errorf("otel: making the instruments: %w", err)
	}
	return t, nil
}

// Observer returns the observer to start the replica's runtime with
// ([cron.WithObserver]). A runtime has one observer, so Observer chains:
// the observer it returns records each event, then hands it to each
// observer in also, in order, so that the telemetry goes along with a
// service's own observer or another adapter's:
//
//	cron.WithObserver(tel.Observer(mine, promMetrics.Observer()))
//
// Runs count when they finish, by outcome: a nil error is ok, a
// *cron.PanicError (errors.As) is panic, an error that is
// cron.ErrRunDeadline (errors.Is) is timeout, any other error is error. A run's
// schedule lag is its Tick.Started minus its Tick.Scheduled, both read from
// the runtime's clock (so a [cron.WithClock] clock is honoured): how late
// the runtime began the run, before any admission or lease claim. It is
// recorded for runs of the job's schedule only: a retry, a catch-up or an
// operator's request is late by design. A negative lag (a clock stepped
// back between the two) is recorded as 0.
// The last success is the time, by the replica's own clock, at which the
// successful run finished.
func (t *Telemetry) Observer(also ...cron.Observer) cron.Observer {
	also = append([]cron.Observer(nil), also...)
	return cron.Observer{
		RunStarted: func(tick cron.Tick) {
			t.runStarted(tick)
			for _, o := range also {
				if o.RunStarted != nil {
					o.RunStarted(tick)
				}
			}
		},
		RunContext: func(ctx context.Context, tick cron.Tick) context.Context {
			ctx = t.runContext(ctx, tick)
			for _, o := range also {
				if o.RunContext != nil {
					ctx = o.RunContext(ctx, tick)
				}
			}
			return ctx
		},
		RunFinished: func(tick cron.Tick, err error, took time.Duration) {
			t.runFinished(tick, err, took)
			for _, o := range also {
				if o.RunFinished != nil {
					o.RunFinished(tick, err, took)
				}
			}
		},
		RunSkipped: func(tick cron.Tick, reason string, err error) {
			t.runSkipped(tick, reason)
			for _, o := range also {
				if o.RunSkipped != nil {
					o.RunSkipped(tick, reason, err)
				}
			}
		},
		ClockSkew: func(skew time.Duration) {
			t.skew.Record(context.Background(), skew.Seconds())
			for _, o := range also {
				if o.ClockSkew != nil {
					o.ClockSkew(skew)
				}
			}
		},
	}
}

func keyOf(tick cron.Tick) runKey {
	return runKey{job: tick.Job, run: tick.Run, started: tick.Started.UnixNano()}
}

func jobAttr(tick cron.Tick) metric.MeasurementOption {
	return metric.WithAttributeSet(attribute.NewSet(keyJob.String(tick.Job)))
}

// seen gives a job's counters that have data points from its first tick
// their data points, at 0.
func (t *Telemetry) seen(ctx context.Context, job string) {
	if _, ok := t.jobs.Load(job); ok {
		return
	}
	if _, loaded := t.jobs.LoadOrStore(job, struct{}{}); loaded {
		return
	}
	for _, o := range []string{"ok", "error", "panic"} {
		t.runs.Add(ctx, 0, metric.WithAttributeSet(attribute.NewSet(keyJob.String(job), keyOutcome.String(o))))
	}
	t.admissionErrs.Add(ctx, 0, metric.WithAttributeSet(attribute.NewSet(keyJob.String(job))))
	t.active.Add(ctx, 0, metric.WithAttributeSet(attribute.NewSet(keyJob.String(job))))
}

func (t *Telemetry) runStarted(tick cron.Tick) {
	ctx := context.Background()
	t.seen(ctx, tick.Job)
	job := jobAttr(tick)
	t.active.Add(ctx, 1, job)
	if tick.Trigger == cron.TriggerSchedule {
		t.lag.Record(ctx, max(tick.Started.Sub(tick.Scheduled), 0).Seconds(), job)
	}
	_, span := t.tracer.Start(ctx, "cron "+tick.Job, trace.WithAttributes(
		keyJob.String(tick.Job),
		keyRun.Int64(int64(tick.Run)),
		keySlot.String(tick.Slot.String()),
		t.replica,
		keyTrigger.String(tick.Trigger.String()),
		keyAttempt.Int(tick.Attempt),
	))
	t.mu.Lock()
	t.spans[keyOf(tick)] = span
	t.mu.Unlock()
}

// runContext returns ctx with the span of the run of tick, which
// runStarted started, as its current span.
func (t *Telemetry) runContext(ctx context.Context, tick cron.Tick) context.Context {
	t.mu.Lock()
	span, ok := t.spans[keyOf(tick)]
	t.mu.Unlock()
	if !ok {
		return ctx
	}
	return trace.ContextWithSpan(ctx, span)
}

func (t *Telemetry) runFinished(tick cron.Tick, err error, took time.Duration) {
	ctx := context.Background()
	t.seen(ctx, tick.Job)
	job := jobAttr(tick)
	outcome := outcomeOf(err)
	t.active.Add(ctx, -1, job)
	t.runDuration.Record(ctx, took.Seconds(), job)
	t.runs.Add(ctx, 1, metric.WithAttributeSet(attribute.NewSet(keyJob.String(tick.Job), keyOutcome.String(outcome))))
	if err == nil {
		t.lastSuccess.Record(ctx, float64(time.Now().UnixMilli())/1e3, job)
	}

	k := keyOf(tick)
	t.mu.Lock()
	span, ok := t.spans[k]
	delete(t.spans, k)
	t.mu.Unlock()
	if !ok { // the run started before the observer was given to the runtime: cannot happen
		return
	}
	span.SetAttributes(keyOutcome.String(outcome))
	if err != nil {
		var p *cron.PanicError
		if errors.As(err, &p) {
			span.RecordError(err, trace.WithAttributes(attribute.String("exception.stacktrace", string(p.Stack))))
		} else {
			span.RecordError(err)
		}
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

func (t *Telemetry) runSkipped(tick cron.Tick, reason string) {
	ctx := context.Background()
	t.seen(ctx, tick.Job)
	attrs := metric.WithAttributeSet(attribute.NewSet(keyJob.String(tick.Job), keyReason.String(reasonLabel(reason))))
	if elsewhere(reason) {
		t.elsewhere.Add(ctx, 1, attrs)
	} else {
		t.skipped.Add(ctx, 1, attrs)
	}
	if reason == cron.ReasonAdmissionFailed {
		t.admissionErrs.Add(ctx, 1, jobAttr(tick))
	}
}

// outcomeOf returns the outcome attribute of a run that finished with err.
func outcomeOf(err error) string {
	var p *cron.PanicError
	switch {
	case err == nil:
		return "ok"
	case errors.As(err, &p):
		return "panic"
	case errors.Is(err, cron.ErrRunDeadline):
		return "timeout"
	}
	return "error"
}

// ObserveLock counts one lock operation and records its latency. It is the
// hook to give [lock.WithObserver]:
//
//	db := lock.NewDB(client, lock.WithObserver(tel.ObserveLock))
//
// To keep a hook of your own as well, call both from one function.
func (t *Telemetry) ObserveLock(e lock.Event) {
	k := lockKey{e.Kind, e.Namespace, e.Op, e.Result}
	v, ok := t.lockAttrs.Load(k)
	if !ok {
		set := metric.WithAttributeSet(attribute.NewSet(
			keyLockKind.String(e.Kind), keyLockNs.String(e.Namespace), keyLockOp.String(e.Op), keyLockResult.String(e.Result)))
		v, _ = t.lockAttrs.LoadOrStore(k, &lockOpts{add: []metric.AddOption{set}, record: []metric.RecordOption{set}})
	}
	opts := v.(*lockOpts)
	ctx := context.Background()
	t.lockOps.Add(ctx, 1, opts.add...)
	t.lockDuration.Record(ctx, e.Latency.Seconds(), opts.record...)
}
