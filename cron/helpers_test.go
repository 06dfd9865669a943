package cron_test

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/wakuwaku-go/wakuwaku/cron"
	"github.com/wakuwaku-go/wakuwaku/interval"
)

// testJob is a job whose name, policy and work a test chooses.
type testJob struct {
	name    string
	every   interval.Interval
	process func(ctx context.Context, t cron.Tick) error
}

func (j *testJob) Name() string                { return j.name }
func (j *testJob) Interval() interval.Interval { return j.every }

func (j *testJob) Process(ctx context.Context, t cron.Tick) error {
	if j.process == nil {
		return nil
	}
	return j.process(ctx, t)
}

// sleeper returns work that takes d, and records when each run began by
// the bubble's clock and with what tick.
func sleeper(rec *runs, d time.Duration) func(context.Context, cron.Tick) error {
	return func(ctx context.Context, t cron.Tick) error {
		rec.begin(t)
		defer rec.end()
		time.Sleep(d)
		return nil
	}
}

// runs records the runs of a job as the job saw them.
type runs struct {
	mu        sync.Mutex
	starts    []time.Time
	ticks     []cron.Tick
	active    int
	maxActive int
}

func (r *runs) begin(t cron.Tick) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.starts = append(r.starts, time.Now())
	r.ticks = append(r.ticks, t)
	r.active++
	r.maxActive = max(r.maxActive, r.active)
}

func (r *runs) end() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.active--
}

func (r *runs) snapshot() ([]time.Time, []cron.Tick, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]time.Time(nil), r.starts...), append([]cron.Tick(nil), r.ticks...), r.maxActive
}

// event is one call of the observer.
type event struct {
	kind   string // "started", "finished" or "skipped"
	tick   cron.Tick
	err    error
	reason string
	took   time.Duration
}

// events records what an Observer is told.
type events struct {
	mu   sync.Mutex
	list []event
}

func (ev *events) add(e event) {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	ev.list = append(ev.list, e)
}

func (ev *events) observer() cron.Observer {
	return cron.Observer{
		RunStarted: func(t cron.Tick) { ev.add(event{kind: "started", tick: t}) },
		RunFinished: func(t cron.Tick, err error, took time.Duration) {
			ev.add(event{kind: "finished", tick: t, err: err, took: took})
		},
		RunSkipped: func(t cron.Tick, reason string, err error) {
			ev.add(event{kind: "skipped", tick: t, reason: reason, err: err})
		},
	}
}

// of returns the events of one kind, in the order they came.
func (ev *events) of(kind string) []event {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	var out []event
	for _, e := range ev.list {
		if e.kind == kind {
			out = append(out, e)
		}
	}
	return out
}

// records is an slog.Handler that keeps what it is given.
type records struct {
	mu   sync.Mutex
	list []slog.Record
}

func (h *records) Enabled(context.Context, slog.Level) bool { return true }
func (h *records) WithGroup(string) slog.Handler            { return h }

func (h *records) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &recordsWith{h: h, attrs: attrs}
}

func (h *records) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.list = append(h.list, r.Clone())
	return nil
}

// recordsWith is records after Logger.With: it adds attrs to each record.
type recordsWith struct {
	h     *records
	attrs []slog.Attr
}

func (w *recordsWith) Enabled(context.Context, slog.Level) bool { return true }
func (w *recordsWith) WithGroup(string) slog.Handler            { return w }

func (w *recordsWith) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &recordsWith{h: w.h, attrs: append(append([]slog.Attr(nil), w.attrs...), attrs...)}
}

func (w *recordsWith) Handle(ctx context.Context, r slog.Record) error {
	r = r.Clone()
	r.AddAttrs(w.attrs...)
	return w.h.Handle(ctx, r)
}

// find returns the records with the message msg.
func (h *records) find(msg string) []slog.Record {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []slog.Record
	for _, r := range h.list {
		if r.Message == msg {
			out = append(out, r)
		}
	}
	return out
}

// all returns every record, in the order they came.
func (h *records) all() []slog.Record {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]slog.Record(nil), h.list...)
}

// attr returns the value of a record's attribute.
func attr(r slog.Record, key string) slog.Value {
	var v slog.Value
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == key {
			v = a.Value
			return false
		}
		return true
	})
	return v
}

// wantTimes checks observed times against offsets from t0.
func wantTimes(t *testing.T, what string, t0 time.Time, got []time.Time, want []time.Duration) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%d %ss at %v, want %d at %v", len(got), what, since(t0, got), len(want), want)
	}
	for i := range min(len(got), len(want)) {
		if d := got[i].Sub(t0); d != want[i] {
			t.Errorf("%s[%d] = +%v, want +%v", what, i, d, want[i])
		}
	}
}

func since(t0 time.Time, times []time.Time) []time.Duration {
	out := make([]time.Duration, len(times))
	for i, at := range times {
		out[i] = at.Sub(t0)
	}
	return out
}

func scheduled(ticks []cron.Tick) []time.Time {
	out := make([]time.Time, len(ticks))
	for i, t := range ticks {
		out[i] = t.Scheduled
	}
	return out
}

func runNumbers(ticks []cron.Tick) []uint64 {
	out := make([]uint64, len(ticks))
	for i, t := range ticks {
		out[i] = t.Run
	}
	return out
}

func eventTicks(list []event) []cron.Tick {
	out := make([]cron.Tick, len(list))
	for i, e := range list {
		out[i] = e.tick
	}
	return out
}

// start starts jobs and shuts the runtime down when the test ends, for
// tests that do not stop it themselves.
func start(t *testing.T, jobs []cron.Job, opts ...cron.Option) *cron.Runtime {
	t.Helper()
	rt, err := cron.Start(jobs, opts...)
	if err != nil {
		t.Fatalf("Start = %v", err)
	}
	t.Cleanup(func() {
		if err := rt.Shutdown(context.Background()); err != nil {
			t.Errorf("Shutdown = %v", err)
		}
	})
	return rt
}

// list is a slice that goroutines append to while a test reads it.
type list[T any] struct {
	mu    sync.Mutex
	items []T
}

func (l *list[T]) add(v T) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.items = append(l.items, v)
}

func (l *list[T]) get() []T {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]T(nil), l.items...)
}
