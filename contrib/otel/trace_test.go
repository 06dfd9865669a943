package otel_test

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/wakuwaku-go/wakuwaku/cron"
	"github.com/wakuwaku-go/wakuwaku/interval"
)

// TestRunSpanIsParent runs a job that starts a span of its own in Process,
// from the context it is given: the span's parent is the run's span, in
// the run's trace.
func TestRunSpanIsParent(t *testing.T) {
	r := newRig(t)
	tracer := r.tracers.Tracer("job")
	ev := newEvents()
	job := cron.Func("traced", interval.AtLeast(time.Hour), func(ctx context.Context, _ cron.Tick) error {
		_, span := tracer.Start(ctx, "write report")
		span.End()
		return nil
	})
	rt, err := cron.Start([]cron.Job{job}, cron.WithObserver(r.tel.Observer(ev.observer())))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Shutdown(context.Background()) })
	wait(t, ev.finished, 1, "the run")

	spans := map[string]trace.SpanContext{}
	parents := map[string]trace.SpanContext{}
	for _, s := range r.spans.Ended() {
		spans[s.Name()] = s.SpanContext()
		parents[s.Name()] = s.Parent()
	}
	run, ok := spans["cron traced"]
	if !ok {
		t.Fatalf("spans %v, want the run's, cron traced", spans)
	}
	child, ok := parents["write report"]
	if !ok {
		t.Fatalf("spans %v, want the job's, write report", spans)
	}
	if child.SpanID() != run.SpanID() || child.TraceID() != run.TraceID() {
		t.Errorf("the job's span has parent %v in trace %v, want the run's span %v in trace %v",
			child.SpanID(), child.TraceID(), run.SpanID(), run.TraceID())
	}
}

// TestRunTimeout counts a run that outlasted its deadline as a timeout.
func TestRunTimeout(t *testing.T) {
	r := newRig(t)
	ev := newEvents()
	job := cron.Func("bounded", interval.AtLeast(time.Hour), func(ctx context.Context, _ cron.Tick) error {
		<-ctx.Done()
		return context.Cause(ctx)
	}, cron.WithRunDeadline(time.Millisecond))
	rt, err := cron.Start([]cron.Job{job}, cron.WithObserver(r.tel.Observer(ev.observer())))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Shutdown(context.Background()) })
	wait(t, ev.finished, 1, "the run")
	checkValues(t, r.collect(t), "wakuwaku.cron.runs ({run})", map[string]float64{
		"wakuwaku.job=bounded,wakuwaku.outcome=ok":      0,
		"wakuwaku.job=bounded,wakuwaku.outcome=error":   0,
		"wakuwaku.job=bounded,wakuwaku.outcome=panic":   0,
		"wakuwaku.job=bounded,wakuwaku.outcome=timeout": 1,
	})
}
