package otel_test

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/wakuwaku-go/wakuwaku/cron"
	"github.com/wakuwaku-go/wakuwaku/internal/redistest"
	"github.com/wakuwaku-go/wakuwaku/interval"
	"github.com/wakuwaku-go/wakuwaku/lock"

	wotel "github.com/wakuwaku-go/wakuwaku/contrib/otel"
)

// rig is a Telemetry over an SDK meter provider with a manual reader and an
// SDK tracer provider with a span recorder, to read back what it recorded.
type rig struct {
	tel     *wotel.Telemetry
	reader  *sdkmetric.ManualReader
	spans   *tracetest.SpanRecorder
	tracers *sdktrace.TracerProvider
}

func newRig(t *testing.T) *rig {
	t.Helper()
	r := &rig{reader: sdkmetric.NewManualReader(), spans: tracetest.NewSpanRecorder()}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(r.reader))
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(r.spans))
	t.Cleanup(func() {
		mp.Shutdown(context.Background())
		tp.Shutdown(context.Background())
	})
	tel, err := wotel.New("r1", wotel.WithMeterProvider(mp), wotel.WithTracerProvider(tp))
	if err != nil {
		t.Fatalf("New() = %v", err)
	}
	r.tel, r.tracers = tel, tp
	return r
}

// point is a data point read back: a sum's or a gauge's value, or a
// histogram's count and sum.
type point struct {
	value float64
	count uint64
}

// collect reads every instrument, and returns each one's unit and its data
// points keyed by their attributes, "k=v,k=v".
func (r *rig) collect(t *testing.T) map[string]map[string]point {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.reader.Collect(t.Context(), &rm); err != nil {
		t.Fatalf("Collect() = %v", err)
	}
	got := map[string]map[string]point{}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != "github.com/wakuwaku-go/wakuwaku/contrib/otel" {
			t.Errorf("scope %q, want the module's path", sm.Scope.Name)
		}
		for _, m := range sm.Metrics {
			points := map[string]point{}
			key := func(s attribute.Set) string { return s.Encoded(attribute.DefaultEncoder()) }
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					points[key(p.Attributes)] = point{value: float64(p.Value)}
				}
			case metricdata.Gauge[float64]:
				for _, p := range d.DataPoints {
					points[key(p.Attributes)] = point{value: p.Value}
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					points[key(p.Attributes)] = point{value: p.Sum, count: p.Count}
				}
			default:
				t.Fatalf("%s: data of type %T", m.Name, m.Data)
			}
			got[m.Name+" ("+m.Unit+")"] = points
		}
	}
	return got
}

// values returns the values of points, for comparing sums and gauges.
func values(points map[string]point) map[string]float64 {
	v := map[string]float64{}
	for k, p := range points {
		v[k] = p.value
	}
	return v
}

func checkValues(t *testing.T, got map[string]map[string]point, name string, want map[string]float64) {
	t.Helper()
	if g := values(got[name]); !maps.Equal(g, want) {
		t.Errorf("%s = %v, want %v", name, g, want)
	}
}

// TestCronRuns starts two replicas of three leased jobs over a real
// redis-server: the first runs them (a success, an error, a panic), the
// second finds their leases held and skips them; and reads back every cron
// instrument and the runs' spans.
func TestCronRuns(t *testing.T) {
	srv := redistest.Start(t)
	r := newRig(t)
	ev := newEvents()
	before := time.Now()
	rt := start(t, threeJobs(lock.NewDB(srv.Client(t))), r.tel.Observer(ev.observer()))
	ticks := map[string]cron.Tick{}
	for _, tick := range wait(t, ev.finished, 3, "runs finished") {
		ticks[tick.Job] = tick
	}
	wait(t, ev.skew, 1, "clock skew measured")
	after := time.Now()
	if err := rt.Shutdown(context.Background()); err != nil {
		t.Fatalf("Shutdown() = %v", err)
	}

	got := r.collect(t)
	checkValues(t, got, "wakuwaku.cron.runs ({run})", map[string]float64{
		"wakuwaku.job=fails,wakuwaku.outcome=error":    1,
		"wakuwaku.job=fails,wakuwaku.outcome=panic":    0,
		"wakuwaku.job=fails,wakuwaku.outcome=ok":       0,
		"wakuwaku.job=panics,wakuwaku.outcome=error":   0,
		"wakuwaku.job=panics,wakuwaku.outcome=panic":   1,
		"wakuwaku.job=panics,wakuwaku.outcome=ok":      0,
		"wakuwaku.job=succeeds,wakuwaku.outcome=error": 0,
		"wakuwaku.job=succeeds,wakuwaku.outcome=panic": 0,
		"wakuwaku.job=succeeds,wakuwaku.outcome=ok":    1,
	})
	checkValues(t, got, "wakuwaku.cron.admission.errors ({tick})", map[string]float64{
		"wakuwaku.job=fails": 0, "wakuwaku.job=panics": 0, "wakuwaku.job=succeeds": 0,
	})
	checkValues(t, got, "wakuwaku.cron.active_runs ({run})", map[string]float64{
		"wakuwaku.job=fails": 0, "wakuwaku.job=panics": 0, "wakuwaku.job=succeeds": 0,
	})
	if _, ok := got["wakuwaku.cron.skipped ({tick})"]; ok {
		t.Errorf("wakuwaku.cron.skipped = %v before any skip, want no data", got["wakuwaku.cron.skipped ({tick})"])
	}
	last := got["wakuwaku.cron.last_success.timestamp (s)"]
	if len(last) != 1 {
		t.Errorf("wakuwaku.cron.last_success.timestamp = %v, want succeeds's only", last)
	}
	if v, lo, hi := last["wakuwaku.job=succeeds"].value, float64(before.UnixMilli())/1e3, float64(after.UnixMilli())/1e3; v < lo || v > hi {
		t.Errorf("wakuwaku.cron.last_success.timestamp{succeeds} = %f, want within [%f, %f]", v, lo, hi)
	}
	for _, name := range []string{"wakuwaku.cron.run.duration (s)", "wakuwaku.cron.schedule.lag (s)"} {
		for _, job := range []string{"succeeds", "fails", "panics"} {
			// The startup run is due at the runtime's start, and runs then.
			if p := got[name]["wakuwaku.job="+job]; p.count != 1 || p.value < 0 || p.value > 1 {
				t.Errorf("%s{%s}: %d samples summing to %fs, want one within [0, 1s]", name, job, p.count, p.value)
			}
		}
	}
	if skew := got["wakuwaku.cron.clock.skew (s)"][""].value; skew < -1 || skew > 1 {
		t.Errorf("wakuwaku.cron.clock.skew = %f, want within a second of 0: Redis runs on this machine", skew)
	}

	// A span per run, ended.
	ended := r.spans.Ended()
	if len(ended) != 3 || len(r.spans.Started()) != 3 {
		t.Fatalf("%d spans started, %d ended; want 3 and 3", len(r.spans.Started()), len(ended))
	}
	for _, span := range ended {
		attrs := map[attribute.Key]string{}
		for _, kv := range span.Attributes() {
			attrs[kv.Key] = kv.Value.String()
		}
		job := attrs["wakuwaku.job"]
		tick, ok := ticks[job]
		if !ok || span.Name() != "cron "+job {
			t.Errorf("span %q of job %q, want one of %v", span.Name(), job, ticks)
			continue
		}
		outcome := map[string]string{"succeeds": "ok", "fails": "error", "panics": "panic"}[job]
		want := map[attribute.Key]string{
			"wakuwaku.job": job, "wakuwaku.run": "1", "wakuwaku.slot": tick.Slot.String(), "wakuwaku.replica": "r1",
			"wakuwaku.trigger": "schedule", "wakuwaku.attempt": "1", "wakuwaku.outcome": outcome,
		}
		if !maps.Equal(attrs, want) {
			t.Errorf("span %q: attributes %v, want %v", span.Name(), attrs, want)
		}
		if tick.Slot.String() == "" {
			t.Errorf("tick of %s has an empty slot", job)
		}
		if d := span.EndTime().Sub(span.StartTime()); d < 0 || d > time.Second {
			t.Errorf("span %q lasted %v, want the run's time", span.Name(), d)
		}
		status, events := span.Status(), span.Events()
		switch job {
		case "succeeds":
			if status.Code != codes.Unset || len(events) != 0 {
				t.Errorf("span %q: status %v, events %v; want unset, none", span.Name(), status, events)
			}
		default:
			if status.Code != codes.Error || status.Description == "" || len(events) != 1 || events[0].Name != "exception" {
				t.Errorf("span %q: status %v, events %v; want Error with the error, and an exception", span.Name(), status, events)
				continue
			}
			ex := map[attribute.Key]string{}
			for _, kv := range events[0].Attributes {
				ex[kv.Key] = kv.Value.String()
			}
			hasStack := strings.Contains(ex["exception.stacktrace"], "panic(")
			if (job == "panics") != hasStack || ex["exception.message"] != status.Description {
				t.Errorf("span %q: exception %v; want the error's message, and a stack for a panic only", span.Name(), ex)
			}
		}
	}

	// A second replica's startup ticks find the slots taken: succeeds's
	// lease held, the failed slots of fails and panics out of attempts.
	start(t, threeJobs(lock.NewDB(srv.Client(t))), r.tel.Observer(ev.observer()))
	wait(t, ev.skipped, 3, "ticks skipped")
	got = r.collect(t)
	// The lease held is a tick that found the slot run elsewhere, apart
	// from the slots not run.
	checkValues(t, got, "wakuwaku.cron.skipped ({tick})", map[string]float64{
		"wakuwaku.job=fails,wakuwaku.reason=attempts_used_up":  1,
		"wakuwaku.job=panics,wakuwaku.reason=attempts_used_up": 1,
	})
	checkValues(t, got, "wakuwaku.cron.ticks.elsewhere ({tick})", map[string]float64{
		"wakuwaku.job=succeeds,wakuwaku.reason=lease_held": 1,
	})
	checkValues(t, got, "wakuwaku.cron.admission.errors ({tick})", map[string]float64{
		"wakuwaku.job=fails": 0, "wakuwaku.job=panics": 0, "wakuwaku.job=succeeds": 0,
	})
	if n := len(r.spans.Started()); n != 3 {
		t.Errorf("%d spans after the skips, want still 3: a skipped tick is no run", n)
	}
}

// TestCronRetry runs a leased job whose slot gets two attempts and whose
// first run fails, on a real redis-server: the retry is a run with a span
// of its own, trigger retry and attempt 2, but no scheduled run's lag.
func TestCronRetry(t *testing.T) {
	srv := redistest.Start(t)
	r := newRig(t)
	ev := newEvents()
	start(t, []cron.Job{flaky(lock.NewDB(srv.Client(t)))}, r.tel.Observer(ev.observer()))
	wait(t, ev.finished, 2, "the run and its retry finished")
	got := r.collect(t)
	checkValues(t, got, "wakuwaku.cron.runs ({run})", map[string]float64{
		"wakuwaku.job=flaky,wakuwaku.outcome=error": 1,
		"wakuwaku.job=flaky,wakuwaku.outcome=panic": 0,
		"wakuwaku.job=flaky,wakuwaku.outcome=ok":    1,
	})
	for name, want := range map[string]uint64{"wakuwaku.cron.run.duration (s)": 2, "wakuwaku.cron.schedule.lag (s)": 1} {
		if n := got[name]["wakuwaku.job=flaky"].count; n != want {
			t.Errorf("%s{flaky} has %d samples, want %d", name, n, want)
		}
	}
	var spans []string
	for _, s := range r.spans.Ended() {
		attrs := map[attribute.Key]string{}
		for _, kv := range s.Attributes() {
			attrs[kv.Key] = kv.Value.String()
		}
		spans = append(spans, fmt.Sprintf("%s %s %s", attrs["wakuwaku.trigger"], attrs["wakuwaku.attempt"], attrs["wakuwaku.outcome"]))
	}
	if want := []string{"schedule 1 error", "retry 2 ok"}; strings.Join(spans, ", ") != strings.Join(want, ", ") {
		t.Errorf("spans (trigger, attempt, outcome) = %v, want %v", spans, want)
	}
}

// TestCronAdmissionErrors starts a leased job whose Redis does not answer:
// its startup tick is skipped as an admission error.
func TestCronAdmissionErrors(t *testing.T) {
	r := newRig(t)
	ev := newEvents()
	start(t, threeJobs(lock.NewDB(deadClient(t)))[:1], r.tel.Observer(ev.observer()))
	wait(t, ev.skipped, 1, "ticks skipped")
	got := r.collect(t)
	checkValues(t, got, "wakuwaku.cron.admission.errors ({tick})", map[string]float64{"wakuwaku.job=succeeds": 1})
	checkValues(t, got, "wakuwaku.cron.skipped ({tick})", map[string]float64{"wakuwaku.job=succeeds,wakuwaku.reason=admission_failed": 1})
	checkValues(t, got, "wakuwaku.cron.runs ({run})", map[string]float64{
		"wakuwaku.job=succeeds,wakuwaku.outcome=error": 0,
		"wakuwaku.job=succeeds,wakuwaku.outcome=panic": 0,
		"wakuwaku.job=succeeds,wakuwaku.outcome=ok":    0,
	})
	if n := len(r.spans.Started()); n != 0 {
		t.Errorf("%d spans, want none", n)
	}
}

// TestLockOperations counts the operations of a DB with the hook, on a real
// redis-server, one of each result, and one on a Redis that is down.
func TestLockOperations(t *testing.T) {
	srv := redistest.Start(t)
	r := newRig(t)
	ctx := t.Context()
	db := lock.NewDB(srv.Client(t), lock.WithObserver(r.tel.ObserveLock))
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
	if rd, err := indexes.TryRead(ctx, db, "a"); rd == nil || err != nil {
		t.Fatalf("TryRead(%q) = %v, %v; want a token", "a", rd, err)
	}
	if w, err := indexes.TryWrite(ctx, db, "a"); w != nil || err != nil {
		t.Fatalf("TryWrite(%q) = %v, %v; want busy", "a", w, err)
	}
	down := lock.NewDB(deadClient(t), lock.WithObserver(r.tel.ObserveLock))
	if tok, err := invoices.TryLock(ctx, down, "2"); tok != nil || err == nil {
		t.Fatalf("TryLock(%q) on a Redis that is down = %v, %v; want an error", "2", tok, err)
	}

	want := map[string]float64{}
	for _, op := range []string{"Lock invoice extend extended", "Lock invoice lock acquired", "Lock invoice lock busy", "Lock invoice lock error",
		"Lock invoice release lost", "Lock invoice release released", "RwLock index read acquired", "RwLock index write busy"} {
		var kind, ns, o, res string
		fmt.Sscan(op, &kind, &ns, &o, &res)
		want["wakuwaku.lock.kind="+kind+",wakuwaku.lock.namespace="+ns+",wakuwaku.lock.operation="+o+",wakuwaku.lock.result="+res] = 1
	}
	got := r.collect(t)
	checkValues(t, got, "wakuwaku.lock.operations ({operation})", want)
	durations := got["wakuwaku.lock.operation.duration (s)"]
	if len(durations) != len(want) {
		t.Errorf("wakuwaku.lock.operation.duration has %d data points, want %d", len(durations), len(want))
	}
	for k := range want {
		if p := durations[k]; p.count != 1 || p.value <= 0 || p.value > 1 {
			t.Errorf("wakuwaku.lock.operation.duration{%s}: %d samples summing to %fs, want one round trip", k, p.count, p.value)
		}
	}
}

// TestObserverChains checks that Observer hands every event to the
// observers it chains, in order, after recording it, and that a run's span
// is found by its job and run number when runs of one job overlap.
func TestObserverChains(t *testing.T) {
	r := newRig(t)
	var got []string
	record := func(name string) cron.Observer {
		return cron.Observer{
			RunStarted: func(t cron.Tick) { got = append(got, fmt.Sprintf("%s started %s/%d", name, t.Job, t.Run)) },
			RunFinished: func(t cron.Tick, _ error, _ time.Duration) {
				got = append(got, fmt.Sprintf("%s finished %s/%d", name, t.Job, t.Run))
			},
			RunSkipped: func(t cron.Tick, reason string, _ error) { got = append(got, name+" skipped "+reason) },
			ClockSkew:  func(d time.Duration) { got = append(got, name+" skew "+d.String()) },
		}
	}
	o := r.tel.Observer(record("a"), cron.Observer{}, record("b"))
	now := time.Now()
	first := cron.Tick{Job: "j", Run: 1, Attempt: 1, Scheduled: now, Started: now}
	second := cron.Tick{Job: "j", Run: 2, Attempt: 1, Scheduled: now, Started: now.Add(time.Millisecond)}
	o.RunStarted(first)
	o.RunStarted(second)
	o.RunFinished(first, nil, time.Second)
	o.RunSkipped(first, cron.ReasonPaused, nil)
	o.ClockSkew(-time.Second)
	want := []string{"a started j/1", "b started j/1", "a started j/2", "b started j/2", "a finished j/1", "b finished j/1",
		"a skipped paused", "b skipped paused", "a skew -1s", "b skew -1s"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("chained observers saw\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	ended := r.spans.Ended()
	if len(ended) != 1 {
		t.Fatalf("%d spans ended, want run 1's", len(ended))
	}
	for _, kv := range ended[0].Attributes() {
		if kv.Key == "wakuwaku.run" && kv.Value.AsInt64() != 1 {
			t.Errorf("the span that ended is run %d's, want run 1's", kv.Value.AsInt64())
		}
	}
	m := r.collect(t)
	checkValues(t, m, "wakuwaku.cron.clock.skew (s)", map[string]float64{"": -1})
	checkValues(t, m, "wakuwaku.cron.active_runs ({run})", map[string]float64{"wakuwaku.job=j": 1})
}

// TestNewRefuses checks the constructor's checks.
func TestNewRefuses(t *testing.T) {
	for _, tc := range []struct {
		name    string
		replica string
		opts    []wotel.Option
	}{
		{"empty replica", "", nil},
		{"nil meter provider", "r1", []wotel.Option{wotel.WithMeterProvider(nil)}},
		{"nil tracer provider", "r1", []wotel.Option{wotel.WithTracerProvider(nil)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tel, err := wotel.New(tc.replica, tc.opts...); tel != nil || err == nil {
				t.Errorf("New(%q, ...) = %v, %v; want an error", tc.replica, tel, err)
			}
		})
	}
}

// TestAdmissionReasonIsOther skips a job's runs with an Admission's own
// reason, free text: it counts under wakuwaku.reason=other, not as a data
// point of its own.
func TestAdmissionReasonIsOther(t *testing.T) {
	r := newRig(t)
	ev := newEvents()
	job := cron.Func("report", interval.AtLeast(time.Hour), func(context.Context, cron.Tick) error { return nil })
	rt, err := cron.Start([]cron.Job{job}, cron.WithObserver(r.tel.Observer(ev.observer())),
		cron.WithAdmission("report", func(context.Context, cron.Tick) (bool, string, error) {
			return false, "outside business hours (09:00-17:00 Europe/Paris)", nil
		}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Shutdown(context.Background()) })
	wait(t, ev.skipped, 1, "ticks skipped")
	checkValues(t, r.collect(t), "wakuwaku.cron.skipped ({tick})", map[string]float64{"wakuwaku.job=report,wakuwaku.reason=other": 1})
}

// TestRuntimeLeasesNotCounted runs leased jobs over a DB with the lock hook,
// on a real redis-server, in two replicas: the runtime's leases, taken and
// found held, are no lock operations; a lock the test takes on the same DB
// is one.
func TestRuntimeLeasesNotCounted(t *testing.T) {
	srv := redistest.Start(t)
	r := newRig(t)
	ev := newEvents()
	db := lock.NewDB(srv.Client(t), lock.WithObserver(r.tel.ObserveLock))
	start(t, threeJobs(db), r.tel.Observer(ev.observer()))
	wait(t, ev.finished, 3, "runs finished")
	start(t, threeJobs(db), r.tel.Observer(ev.observer()))
	wait(t, ev.skipped, 3, "ticks skipped")
	if got := r.collect(t)["wakuwaku.lock.operations ({operation})"]; len(got) != 0 {
		t.Errorf("wakuwaku.lock.operations = %v after the runtime's leases, want no data point", values(got))
	}
	if tok, err := lock.New[string]("invoice", time.Minute).TryLock(t.Context(), db, "1"); tok == nil || err != nil {
		t.Fatalf("TryLock = %v, %v; want a token", tok, err)
	}
	checkValues(t, r.collect(t), "wakuwaku.lock.operations ({operation})", map[string]float64{
		"wakuwaku.lock.kind=Lock,wakuwaku.lock.namespace=invoice,wakuwaku.lock.operation=lock,wakuwaku.lock.result=acquired": 1,
	})
}
