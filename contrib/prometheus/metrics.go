// Package prometheus exports the metrics of a wakuwaku cron runtime and of
// its lock operations to Prometheus, through
// github.com/prometheus/client_golang.
//
// [New] makes a [Metrics], a prometheus.Collector to register. Its
// [Metrics.Observer] is the [cron.Observer] to start a runtime with, and its
// [Metrics.ObserveLock] the hook of a [lock.DB]:
//
//	m := prometheus.New()
//	registry.MustRegister(m)
//	db := lock.NewDB(client, lock.WithObserver(m.ObserveLock))
//	rt, err := cron.Start(jobs, cron.WithObserver(m.Observer()))
//
// Its name is client_golang's package's: import one of the two under
// another name, as the example does.
//
// # Metrics
//
//	wakuwaku_cron_runs_total{cron_job,outcome}            counter: runs that finished; outcome ok, error, panic or timeout
//	wakuwaku_cron_run_duration_seconds{cron_job}          histogram: how long Process took
//	wakuwaku_cron_schedule_lag_seconds{cron_job}          histogram: a scheduled run's start minus when it was due
//	wakuwaku_cron_skipped_total{cron_job,reason}          counter: ticks whose slot this replica knows was not run, by the runtime's reason
//	wakuwaku_cron_ticks_elsewhere_total{cron_job,reason}  counter: ticks that found the slot in another replica's hands (lease_held, running, retry_wait, skipped_elsewhere)
//	wakuwaku_cron_admission_errors_total{cron_job}        counter: ticks skipped because the admission (a leased job's claim in Redis) failed
//	wakuwaku_cron_runs_in_progress{cron_job}              gauge: runs in Process now
//	wakuwaku_cron_last_success_timestamp_seconds{cron_job} gauge: Unix time at which the last successful run finished
//	wakuwaku_cron_clock_skew_seconds                      gauge: how far the replica's clock is ahead of Redis's
//	wakuwaku_lock_operations_total{kind,lock_namespace,operation,result}           counter
//	wakuwaku_lock_operation_duration_seconds{kind,lock_namespace,operation,result} histogram
//
// The label is cron_job, not job, because Prometheus gives every series the
// target's own job label: a scraped job label would be renamed exported_job.
// For the same reason the lock family's namespace is lock_namespace, since
// Kubernetes service discovery commonly adds a namespace label. result is
// a [lock.Event]'s Result. The slot and the run number are never labels:
// they would make a series per run.
//
// The outcomes are the words of the CLI, the status page and the record's
// history. A tick that did not run is counted once, in one of two
// counters: ticks_elsewhere_total if another replica has the slot (it ran
// it, is running it, a retry of it waits, or it recorded the slot
// skipped), which is how every replica but one sees every slot of a leased
// job; skipped_total otherwise, a slot not run as far as this replica
// knows, which is what to alert on: a leased job's skipped slot counts
// there once, on the replica that recorded it, so that its sum over the
// replicas is the slots skipped.
//
// reason is a short word for the runtime's reason, whose sentence (a
// cron.Reason constant) stays in the runtime's log records:
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
// An Admission's own reason is free text, so it counts as other: a label
// value per sentence would make a series per sentence. Look for the
// sentence in the logs.
//
// # Lock operations
//
// The lock metrics count what a [lock.DB] made with
// lock.WithObserver(m.ObserveLock) sends to Redis, one operation each, as
// [lock.Event] describes: every acquire (TryLock, a FencedLock's TryLock,
// TryRead, TryWrite, each name of a TryLockMany, each attempt of a waiting
// Lock), release and extension (WhileHeld's included) of its locks and
// tokens. They do not count an operation refused before anything was sent
// (a done context, lock.ErrNotPermitted), the read-only queries of a
// lock.ReadOnlyDB (Held, Inspect), nor the cron runtime's own leases: a
// [cron.Leased] job's slot lease and run lease are kept by the runtime's
// scripts in the job's record, beneath the DB's observer, and show in the
// cron metrics instead (runs, and ticks skipped as lease_held or running).
// A job that takes a lock itself, on a DB with the hook, is counted.
//
// A job's counters of runs (one per outcome but timeout, which only a job
// with a run deadline has) and of admission errors, and its runs in
// progress, appear at 0 with its first tick on the replica, run or
// skipped, so that increase() and rate() see a job's first run and a job
// that never succeeded has an ok counter that stays at 0. Every
// other series appears with its first event, since it has no value
// before: a job that never succeeded has no last-success series, a replica
// without leased jobs, which never measures its clock, no clock-skew
// series.
//
// The histograms have classic buckets, in seconds: run durations from 10ms
// to an hour (0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 1800, 3600),
// schedule lags from a millisecond to ten minutes (0.001, 0.005, 0.01, 0.05,
// 0.1, 0.5, 1, 5, 30, 60, 600), lock operations from half a millisecond to a
// second (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
// 1). They are native histograms too, whose resolution does not depend on
// those buckets, for a Prometheus that scrapes native histograms.
package prometheus

import (
	"errors"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/wakuwaku-go/wakuwaku/cron"
	"github.com/wakuwaku-go/wakuwaku/lock"
)

// The classic buckets of the histograms (the package doc lists them). A
// cron job may take 10ms or an hour; a tick is ordinarily a millisecond late
// and minutes late on a replica that stalled; a lock operation is a round
// trip to Redis.
var (
	runBuckets  = []float64{0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 1800, 3600}
	lagBuckets  = []float64{0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 30, 60, 600}
	lockBuckets = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1}
)

// The outcomes of a run, the values of the outcome label.
const (
	outcomeOK      = "ok"
	outcomeError   = "error"
	outcomePanic   = "panic"
	outcomeTimeout = "timeout" // past its deadline (cron.ErrRunDeadline)
)

// Metrics is a prometheus.Collector of the metrics of cron runtimes and
// lock DBs: register it once, and give its [Metrics.Observer] to every
// runtime and its [Metrics.ObserveLock] to every DB whose operations it
// should count (the package doc lists the metrics). Its methods are safe
// for concurrent use. Make one with [New]; the zero Metrics is not usable.
type Metrics struct {
	runs          *prometheus.CounterVec
	runDuration   *prometheus.HistogramVec
	lag           *prometheus.HistogramVec
	skipped       *prometheus.CounterVec
	elsewhere     *prometheus.CounterVec
	admissionErrs *prometheus.CounterVec
	inProgress    *prometheus.GaugeVec
	lastSuccess   *prometheus.GaugeVec
	skew          *prometheus.GaugeVec // no labels: a vector so that it appears only once measured
	lockOps       *prometheus.CounterVec
	lockDuration  *prometheus.HistogramVec

	jobs sync.Map // the names of the jobs seen, whose series are at 0 or more
}

// New returns the metrics, each with no series yet. Register the result
// with a prometheus.Registerer; it can be registered once per registry.
func New() *Metrics {
	job := []string{"cron_job"}
	lockLabels := []string{"kind", "lock_namespace", "operation", "result"}
	return &Metrics{
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wakuwaku_cron_runs_total",
			Help: "Runs of a cron job that finished, by outcome: ok, error, panic or timeout.",
		}, []string{"cron_job", "outcome"}),
		runDuration: histogram("wakuwaku_cron_run_duration_seconds",
			"How long a cron job's runs took, in seconds.", runBuckets, job),
		lag: histogram("wakuwaku_cron_schedule_lag_seconds",
			"How late a cron job's scheduled runs started after they were due, in seconds.", lagBuckets, job),
		skipped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wakuwaku_cron_skipped_total",
			Help: "Ticks of a cron job whose slot, as far as this replica knows, was not run, by reason.",
		}, []string{"cron_job", "reason"}),
		elsewhere: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wakuwaku_cron_ticks_elsewhere_total",
			Help: "Ticks of a cron job that found its slot in another replica's hands: run or running there, waiting for a retry, or recorded skipped there, by reason.",
		}, []string{"cron_job", "reason"}),
		admissionErrs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wakuwaku_cron_admission_errors_total",
			Help: "Ticks of a cron job skipped because its admission failed: for a leased job, Redis or its lease could not be reached.",
		}, job),
		inProgress: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "wakuwaku_cron_runs_in_progress",
			Help: "Runs of a cron job in progress on this replica.",
		}, job),
		lastSuccess: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "wakuwaku_cron_last_success_timestamp_seconds",
			Help: "When the last successful run of a cron job on this replica finished, in seconds since the Unix epoch.",
		}, job),
		skew: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "wakuwaku_cron_clock_skew_seconds",
			Help: "How far this replica's clock is ahead of the Redis server's (negative: behind), in seconds, as last measured.",
		}, nil),
		lockOps: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wakuwaku_lock_operations_total",
			Help: "Lock operations sent to Redis, by lock kind, namespace, operation and result.",
		}, lockLabels),
		lockDuration: histogram("wakuwaku_lock_operation_duration_seconds",
			"How long lock operations took, from sending the command to its reply, in seconds.", lockBuckets, lockLabels),
	}
}

func histogram(name, help string, buckets []float64, labels []string) *prometheus.HistogramVec {
	return prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    name,
		Help:    help,
		Buckets: buckets,
		// A native histogram too, for a Prometheus that scrapes them: its
		// resolution does not depend on the classic buckets guessing the
		// jobs' durations right.
		NativeHistogramBucketFactor:     1.1,
		NativeHistogramMaxBucketNumber:  100,
		NativeHistogramMinResetDuration: time.Hour,
	}, labels)
}

func (m *Metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.runs, m.runDuration, m.lag, m.skipped, m.elsewhere, m.admissionErrs,
		m.inProgress, m.lastSuccess, m.skew, m.lockOps, m.lockDuration}
}

// Describe sends the descriptors of every metric, as prometheus.Collector
// asks.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range m.collectors() {
		c.Describe(ch)
	}
}

// Collect sends the current value of every series, as prometheus.Collector
// asks.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	for _, c := range m.collectors() {
		c.Collect(ch)
	}
}

// Observer returns the observer to start a runtime with
// ([cron.WithObserver]). A runtime has one observer, so Observer chains:
// the observer it returns records each event, then hands it to each
// observer in also, in order, so that the metrics go along with a
// service's own observer or another adapter's:
//
//	cron.WithObserver(m.Observer(mine, otelAdapter.Observer()))
//
// Several runtimes may share one Metrics; their jobs then add up under
// their names, and the clock skew is the last one measured.
//
// Runs count when they finish, by outcome: a nil error is ok, a
// *cron.PanicError (errors.As) is panic, an error that is
// cron.ErrRunDeadline (errors.Is) is timeout, any other error is error. A run's
// schedule lag is its Tick.Started minus its Tick.Scheduled, both read from
// the runtime's clock (so a [cron.WithClock] clock is honoured): how late
// the runtime began the run, before any admission or lease claim. It is
// recorded for runs of the job's schedule only: a retry, a catch-up or an
// operator's request is late by design. A negative lag (a clock stepped
// back between the two) is recorded as 0. The last success is the time, by the
// replica's own clock, at which the successful run finished, so that it
// compares with PromQL's time().
func (m *Metrics) Observer(also ...cron.Observer) cron.Observer {
	also = append([]cron.Observer(nil), also...)
	return cron.Observer{
		RunStarted: func(t cron.Tick) {
			m.runStarted(t)
			for _, o := range also {
				if o.RunStarted != nil {
					o.RunStarted(t)
				}
			}
		},
		RunFinished: func(t cron.Tick, err error, took time.Duration) {
			m.runFinished(t, err, took)
			for _, o := range also {
				if o.RunFinished != nil {
					o.RunFinished(t, err, took)
				}
			}
		},
		RunSkipped: func(t cron.Tick, reason string, err error) {
			m.runSkipped(t, reason)
			for _, o := range also {
				if o.RunSkipped != nil {
					o.RunSkipped(t, reason, err)
				}
			}
		},
		ClockSkew: func(skew time.Duration) {
			m.skew.WithLabelValues().Set(skew.Seconds())
			for _, o := range also {
				if o.ClockSkew != nil {
					o.ClockSkew(skew)
				}
			}
		},
	}
}

// seen makes the series of a job that exist from its first tick, at 0.
func (m *Metrics) seen(job string) {
	if _, ok := m.jobs.Load(job); ok {
		return
	}
	if _, loaded := m.jobs.LoadOrStore(job, struct{}{}); loaded {
		return
	}
	for _, o := range []string{outcomeOK, outcomeError, outcomePanic} {
		m.runs.WithLabelValues(job, o)
	}
	m.admissionErrs.WithLabelValues(job)
	m.inProgress.WithLabelValues(job)
}

func (m *Metrics) runStarted(t cron.Tick) {
	m.seen(t.Job)
	m.inProgress.WithLabelValues(t.Job).Inc()
	if t.Trigger == cron.TriggerSchedule {
		m.lag.WithLabelValues(t.Job).Observe(max(t.Started.Sub(t.Scheduled), 0).Seconds())
	}
}

func (m *Metrics) runFinished(t cron.Tick, err error, took time.Duration) {
	m.seen(t.Job)
	m.inProgress.WithLabelValues(t.Job).Dec()
	m.runDuration.WithLabelValues(t.Job).Observe(took.Seconds())
	m.runs.WithLabelValues(t.Job, outcome(err)).Inc()
	if err == nil {
		m.lastSuccess.WithLabelValues(t.Job).Set(float64(time.Now().UnixMilli()) / 1e3)
	}
}

func (m *Metrics) runSkipped(t cron.Tick, reason string) {
	m.seen(t.Job)
	if elsewhere(reason) {
		m.elsewhere.WithLabelValues(t.Job, reasonLabel(reason)).Inc()
	} else {
		m.skipped.WithLabelValues(t.Job, reasonLabel(reason)).Inc()
	}
	if reason == cron.ReasonAdmissionFailed {
		m.admissionErrs.WithLabelValues(t.Job).Inc()
	}
}

// outcome returns the outcome label of a run that finished with err.
func outcome(err error) string {
	var p *cron.PanicError
	switch {
	case err == nil:
		return outcomeOK
	case errors.As(err, &p):
		return outcomePanic
	case errors.Is(err, cron.ErrRunDeadline):
		return outcomeTimeout
	}
	return outcomeError
}

// ObserveLock counts one lock operation and its latency. It is the hook to
// give [lock.WithObserver]:
//
//	db := lock.NewDB(client, lock.WithObserver(m.ObserveLock))
//
// To keep a hook of your own as well, call both from one function.
func (m *Metrics) ObserveLock(e lock.Event) {
	m.lockOps.WithLabelValues(e.Kind, e.Namespace, e.Op, e.Result).Inc()
	m.lockDuration.WithLabelValues(e.Kind, e.Namespace, e.Op, e.Result).Observe(e.Latency.Seconds())
}
