package prometheus_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/wakuwaku-go/wakuwaku/cron"
	"github.com/wakuwaku-go/wakuwaku/internal/redistest"
	"github.com/wakuwaku-go/wakuwaku/interval"
	"github.com/wakuwaku-go/wakuwaku/lock"

	wprom "github.com/wakuwaku-go/wakuwaku/contrib/prometheus"
)

// newMetrics returns metrics registered with a pedantic registry of their
// own, which checks them as it gathers.
func newMetrics(t *testing.T) (*wprom.Metrics, *prometheus.Registry) {
	t.Helper()
	m := wprom.New()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(m)
	return m, reg
}

// series returns the series of the family name whose labels include want,
// failing the test if there is not exactly one.
func series(t *testing.T, reg *prometheus.Registry, name string, want map[string]string) *dto.Metric {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatalf("Gather() = %v", err)
	}
	var found []*dto.Metric
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	metrics:
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			for k, v := range want {
				if labels[k] != v {
					continue metrics
				}
			}
			found = append(found, m)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%s%v: %d series, want 1", name, want, len(found))
	}
	return found[0]
}

// TestCronRuns starts two replicas of three leased jobs over a real
// redis-server: the first runs them (a success, an error, a panic), the
// second finds their leases held and skips them; and reads every cron
// metric back.
func TestCronRuns(t *testing.T) {
	srv := redistest.Start(t)
	m, reg := newMetrics(t)
	ev := newEvents()
	before := time.Now()
	rt := start(t, threeJobs(lock.NewDB(srv.Client(t))), m.Observer(ev.observer()))
	wait(t, ev.finished, 3, "runs finished")
	wait(t, ev.skew, 1, "clock skew measured")
	after := time.Now()
	if err := rt.Shutdown(context.Background()); err != nil {
		t.Fatalf("Shutdown() = %v", err)
	}

	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP wakuwaku_cron_runs_total Runs of a cron job that finished, by outcome: ok, error, panic or timeout.
# TYPE wakuwaku_cron_runs_total counter
wakuwaku_cron_runs_total{cron_job="fails",outcome="error"} 1
wakuwaku_cron_runs_total{cron_job="fails",outcome="panic"} 0
wakuwaku_cron_runs_total{cron_job="fails",outcome="ok"} 0
wakuwaku_cron_runs_total{cron_job="panics",outcome="error"} 0
wakuwaku_cron_runs_total{cron_job="panics",outcome="panic"} 1
wakuwaku_cron_runs_total{cron_job="panics",outcome="ok"} 0
wakuwaku_cron_runs_total{cron_job="succeeds",outcome="error"} 0
wakuwaku_cron_runs_total{cron_job="succeeds",outcome="panic"} 0
wakuwaku_cron_runs_total{cron_job="succeeds",outcome="ok"} 1
# HELP wakuwaku_cron_admission_errors_total Ticks of a cron job skipped because its admission failed: for a leased job, Redis or its lease could not be reached.
# TYPE wakuwaku_cron_admission_errors_total counter
wakuwaku_cron_admission_errors_total{cron_job="fails"} 0
wakuwaku_cron_admission_errors_total{cron_job="panics"} 0
wakuwaku_cron_admission_errors_total{cron_job="succeeds"} 0
# HELP wakuwaku_cron_runs_in_progress Runs of a cron job in progress on this replica.
# TYPE wakuwaku_cron_runs_in_progress gauge
wakuwaku_cron_runs_in_progress{cron_job="fails"} 0
wakuwaku_cron_runs_in_progress{cron_job="panics"} 0
wakuwaku_cron_runs_in_progress{cron_job="succeeds"} 0
`), "wakuwaku_cron_runs_total", "wakuwaku_cron_runs_in_progress", "wakuwaku_cron_skipped_total", "wakuwaku_cron_admission_errors_total"); err != nil {
		t.Errorf("after the first replica's runs:\n%v", err)
	}
	// Only the success has a last success, when it finished.
	if n := testutil.CollectAndCount(m, "wakuwaku_cron_last_success_timestamp_seconds"); n != 1 {
		t.Errorf("wakuwaku_cron_last_success_timestamp_seconds has %d series, want 1 (succeeds)", n)
	}
	last := series(t, reg, "wakuwaku_cron_last_success_timestamp_seconds", map[string]string{"cron_job": "succeeds"}).GetGauge().GetValue()
	if lo, hi := float64(before.UnixMilli())/1e3, float64(after.UnixMilli())/1e3; last < lo || last > hi {
		t.Errorf("wakuwaku_cron_last_success_timestamp_seconds{cron_job=succeeds} = %f, want within [%f, %f]", last, lo, hi)
	}
	for _, job := range []string{"succeeds", "fails", "panics"} {
		for _, name := range []string{"wakuwaku_cron_run_duration_seconds", "wakuwaku_cron_schedule_lag_seconds"} {
			h := series(t, reg, name, map[string]string{"cron_job": job}).GetHistogram()
			// The startup run is due at the runtime's start, and runs
			// then: its lag is a goroutine's start, not a second.
			if h.GetSampleCount() != 1 || h.GetSampleSum() < 0 || h.GetSampleSum() > 1 {
				t.Errorf("%s{cron_job=%q}: %d samples summing to %fs, want one within [0, 1s]", name, job, h.GetSampleCount(), h.GetSampleSum())
			}
		}
	}
	if skew := series(t, reg, "wakuwaku_cron_clock_skew_seconds", nil).GetGauge().GetValue(); skew < -1 || skew > 1 {
		t.Errorf("wakuwaku_cron_clock_skew_seconds = %f, want within a second of 0: Redis runs on this machine", skew)
	}

	// A second replica's startup ticks find the slots taken: succeeds's
	// lease held, the failed slots of fails and panics out of attempts.
	start(t, threeJobs(lock.NewDB(srv.Client(t))), m.Observer(ev.observer()))
	wait(t, ev.skipped, 3, "ticks skipped")
	// The lease held is a tick that found the slot run elsewhere, apart
	// from the slots not run.
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP wakuwaku_cron_skipped_total Ticks of a cron job whose slot, as far as this replica knows, was not run, by reason.
# TYPE wakuwaku_cron_skipped_total counter
wakuwaku_cron_skipped_total{cron_job="fails",reason="attempts_used_up"} 1
wakuwaku_cron_skipped_total{cron_job="panics",reason="attempts_used_up"} 1
# HELP wakuwaku_cron_ticks_elsewhere_total Ticks of a cron job that found its slot in another replica's hands: run or running there, waiting for a retry, or recorded skipped there, by reason.
# TYPE wakuwaku_cron_ticks_elsewhere_total counter
wakuwaku_cron_ticks_elsewhere_total{cron_job="succeeds",reason="lease_held"} 1
`), "wakuwaku_cron_skipped_total", "wakuwaku_cron_ticks_elsewhere_total"); err != nil {
		t.Errorf("after the second replica's skips:\n%v", err)
	}
	if got := testutil.ToFloat64(counterOf(t, reg, "wakuwaku_cron_runs_total", map[string]string{"cron_job": "succeeds", "outcome": "ok"})); got != 1 {
		t.Errorf("wakuwaku_cron_runs_total{cron_job=succeeds,outcome=ok} = %v after the skips, want still 1", got)
	}
}

// TestCronRetry runs a leased job whose slot gets two attempts and whose
// first run fails, on a real redis-server: the retry counts as a run, but
// not as a scheduled run's lag.
func TestCronRetry(t *testing.T) {
	srv := redistest.Start(t)
	m, reg := newMetrics(t)
	ev := newEvents()
	start(t, []cron.Job{flaky(lock.NewDB(srv.Client(t)))}, m.Observer(ev.observer()))
	wait(t, ev.finished, 2, "the run and its retry finished")
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP wakuwaku_cron_runs_total Runs of a cron job that finished, by outcome: ok, error, panic or timeout.
# TYPE wakuwaku_cron_runs_total counter
wakuwaku_cron_runs_total{cron_job="flaky",outcome="error"} 1
wakuwaku_cron_runs_total{cron_job="flaky",outcome="panic"} 0
wakuwaku_cron_runs_total{cron_job="flaky",outcome="ok"} 1
`), "wakuwaku_cron_runs_total"); err != nil {
		t.Error(err)
	}
	for name, want := range map[string]uint64{"wakuwaku_cron_run_duration_seconds": 2, "wakuwaku_cron_schedule_lag_seconds": 1} {
		if n := series(t, reg, name, map[string]string{"cron_job": "flaky"}).GetHistogram().GetSampleCount(); n != want {
			t.Errorf("%s{cron_job=flaky} has %d samples, want %d", name, n, want)
		}
	}
}

// counterOf wraps one gathered series as a collector, for testutil.ToFloat64.
func counterOf(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) prometheus.Collector {
	t.Helper()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "copy"})
	c.Add(series(t, reg, name, labels).GetCounter().GetValue())
	return c
}

// TestCronAdmissionErrors starts a leased job whose Redis does not answer:
// its startup tick is skipped as an admission error.
func TestCronAdmissionErrors(t *testing.T) {
	m, reg := newMetrics(t)
	ev := newEvents()
	db := lock.NewDB(deadClient(t))
	start(t, threeJobs(db)[:1], m.Observer(ev.observer()))
	wait(t, ev.skipped, 1, "ticks skipped")
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP wakuwaku_cron_admission_errors_total Ticks of a cron job skipped because its admission failed: for a leased job, Redis or its lease could not be reached.
# TYPE wakuwaku_cron_admission_errors_total counter
wakuwaku_cron_admission_errors_total{cron_job="succeeds"} 1
# HELP wakuwaku_cron_skipped_total Ticks of a cron job whose slot, as far as this replica knows, was not run, by reason.
# TYPE wakuwaku_cron_skipped_total counter
wakuwaku_cron_skipped_total{cron_job="succeeds",reason="admission_failed"} 1
# HELP wakuwaku_cron_runs_total Runs of a cron job that finished, by outcome: ok, error, panic or timeout.
# TYPE wakuwaku_cron_runs_total counter
wakuwaku_cron_runs_total{cron_job="succeeds",outcome="error"} 0
wakuwaku_cron_runs_total{cron_job="succeeds",outcome="panic"} 0
wakuwaku_cron_runs_total{cron_job="succeeds",outcome="ok"} 0
`), "wakuwaku_cron_admission_errors_total", "wakuwaku_cron_skipped_total", "wakuwaku_cron_runs_total", "wakuwaku_cron_clock_skew_seconds"); err != nil {
		t.Error(err)
	}
}

// TestLockOperations counts the operations of a DB with the hook, on a real
// redis-server, one of each result, and one on a Redis that is down.
func TestLockOperations(t *testing.T) {
	srv := redistest.Start(t)
	m, reg := newMetrics(t)
	ctx := t.Context()
	db := lock.NewDB(srv.Client(t), lock.WithObserver(m.ObserveLock))
	invoices := lock.New[string]("invoice", time.Minute)
	tok, err := invoices.TryLock(ctx, db, "1")
	if err != nil || tok == nil {
		t.Fatalf("TryLock(%q) = %v, %v; want a token", "1", tok, err)
	}
	if busy, err := invoices.TryLock(ctx, db, "1"); busy != nil || err != nil {
		t.Fatalf("TryLock(%q) again = %v, %v; want busy", "1", busy, err)
	}
	if ok, err := tok.Extend(ctx); !ok || err != nil {
		t.Fatalf("Extend() = %v, %v; want true", ok, err)
	}
	if ok, err := tok.Release(ctx); !ok || err != nil {
		t.Fatalf("Release() = %v, %v; want true", ok, err)
	}
	if ok, err := tok.Release(ctx); ok || err != nil {
		t.Fatalf("Release() again = %v, %v; want false", ok, err)
	}
	indexes := lock.NewRW[string]("index", time.Minute)
	if r, err := indexes.TryRead(ctx, db, "a"); r == nil || err != nil {
		t.Fatalf("TryRead(%q) = %v, %v; want a token", "a", r, err)
	}
	if w, err := indexes.TryWrite(ctx, db, "a"); w != nil || err != nil {
		t.Fatalf("TryWrite(%q) = %v, %v; want busy", "a", w, err)
	}
	down := lock.NewDB(deadClient(t), lock.WithObserver(m.ObserveLock))
	if tok, err := invoices.TryLock(ctx, down, "2"); tok != nil || err == nil {
		t.Fatalf("TryLock(%q) on a Redis that is down = %v, %v; want an error", "2", tok, err)
	}

	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP wakuwaku_lock_operations_total Lock operations sent to Redis, by lock kind, namespace, operation and result.
# TYPE wakuwaku_lock_operations_total counter
wakuwaku_lock_operations_total{kind="Lock",lock_namespace="invoice",operation="extend",result="extended"} 1
wakuwaku_lock_operations_total{kind="Lock",lock_namespace="invoice",operation="lock",result="acquired"} 1
wakuwaku_lock_operations_total{kind="Lock",lock_namespace="invoice",operation="lock",result="busy"} 1
wakuwaku_lock_operations_total{kind="Lock",lock_namespace="invoice",operation="lock",result="error"} 1
wakuwaku_lock_operations_total{kind="Lock",lock_namespace="invoice",operation="release",result="lost"} 1
wakuwaku_lock_operations_total{kind="Lock",lock_namespace="invoice",operation="release",result="released"} 1
wakuwaku_lock_operations_total{kind="RwLock",lock_namespace="index",operation="read",result="acquired"} 1
wakuwaku_lock_operations_total{kind="RwLock",lock_namespace="index",operation="write",result="busy"} 1
`), "wakuwaku_lock_operations_total"); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(m, "wakuwaku_lock_operation_duration_seconds"); n != 8 {
		t.Errorf("wakuwaku_lock_operation_duration_seconds has %d series, want 8, one per operation and result", n)
	}
	h := series(t, reg, "wakuwaku_lock_operation_duration_seconds", map[string]string{"operation": "lock", "result": "acquired"}).GetHistogram()
	if h.GetSampleCount() != 1 || h.GetSampleSum() <= 0 || h.GetSampleSum() > 1 {
		t.Errorf("wakuwaku_lock_operation_duration_seconds{lock, acquired}: %d samples summing to %fs, want one round trip", h.GetSampleCount(), h.GetSampleSum())
	}
}

// TestObserverChains checks that Observer hands every event to the
// observers it chains, in order, after recording it.
func TestObserverChains(t *testing.T) {
	m, reg := newMetrics(t)
	var got []string
	record := func(name string) cron.Observer {
		return cron.Observer{
			RunStarted:  func(t cron.Tick) { got = append(got, name+" started "+t.Job) },
			RunFinished: func(t cron.Tick, _ error, _ time.Duration) { got = append(got, name+" finished "+t.Job) },
			RunSkipped:  func(t cron.Tick, reason string, _ error) { got = append(got, name+" skipped "+reason) },
			ClockSkew:   func(d time.Duration) { got = append(got, name+" skew "+d.String()) },
		}
	}
	o := m.Observer(record("a"), cron.Observer{}, record("b"))
	tick := cron.Tick{Job: "j", Run: 1, Attempt: 1}
	o.RunStarted(tick)
	o.RunFinished(tick, nil, time.Second)
	o.RunSkipped(tick, cron.ReasonPaused, nil)
	o.ClockSkew(-time.Second)
	want := []string{"a started j", "b started j", "a finished j", "b finished j", "a skipped paused", "b skipped paused", "a skew -1s", "b skew -1s"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("chained observers saw\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if skew := series(t, reg, "wakuwaku_cron_clock_skew_seconds", nil).GetGauge().GetValue(); skew != -1 {
		t.Errorf("wakuwaku_cron_clock_skew_seconds = %v, want -1", skew)
	}
	if n := testutil.CollectAndCount(m, "wakuwaku_cron_skipped_total"); n != 1 {
		t.Errorf("wakuwaku_cron_skipped_total has %d series, want 1", n)
	}
}

// TestAdmissionReasonIsOther skips a job's runs with an Admission's own
// reason, free text: it counts under reason="other", not as a series of
// its own.
func TestAdmissionReasonIsOther(t *testing.T) {
	m, reg := newMetrics(t)
	ev := newEvents()
	job := cron.Func("report", interval.AtLeast(time.Hour), func(context.Context, cron.Tick) error { return nil })
	rt, err := cron.Start([]cron.Job{job}, cron.WithObserver(m.Observer(ev.observer())),
		cron.WithAdmission("report", func(context.Context, cron.Tick) (bool, string, error) {
			return false, "outside business hours (09:00-17:00 Europe/Paris)", nil
		}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Shutdown(context.Background()) })
	wait(t, ev.skipped, 1, "ticks skipped")
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP wakuwaku_cron_skipped_total Ticks of a cron job whose slot, as far as this replica knows, was not run, by reason.
# TYPE wakuwaku_cron_skipped_total counter
wakuwaku_cron_skipped_total{cron_job="report",reason="other"} 1
`), "wakuwaku_cron_skipped_total"); err != nil {
		t.Error(err)
	}
}

// TestRuntimeLeasesNotCounted runs leased jobs over a DB with the lock hook,
// on a real redis-server, in two replicas: the runtime's leases, taken and
// found held, are no lock operations; a lock the test takes on the same DB
// is one.
func TestRuntimeLeasesNotCounted(t *testing.T) {
	srv := redistest.Start(t)
	m, reg := newMetrics(t)
	ev := newEvents()
	db := lock.NewDB(srv.Client(t), lock.WithObserver(m.ObserveLock))
	start(t, threeJobs(db), m.Observer(ev.observer()))
	wait(t, ev.finished, 3, "runs finished")
	start(t, threeJobs(db), m.Observer(ev.observer()))
	wait(t, ev.skipped, 3, "ticks skipped")
	if n := testutil.CollectAndCount(m, "wakuwaku_lock_operations_total"); n != 0 {
		t.Errorf("wakuwaku_lock_operations_total has %d series after the runtime's leases, want 0", n)
	}
	if tok, err := lock.New[string]("invoice", time.Minute).TryLock(t.Context(), db, "1"); tok == nil || err != nil {
		t.Fatalf("TryLock = %v, %v; want a token", tok, err)
	}
	if got := testutil.ToFloat64(counterOf(t, reg, "wakuwaku_lock_operations_total", map[string]string{"lock_namespace": "invoice", "result": "acquired"})); got != 1 {
		t.Errorf("wakuwaku_lock_operations_total{invoice, acquired} = %v, want 1", got)
	}
}
