package otel_test

import (
	"context"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/wakuwaku-go/wakuwaku/cron"
	"github.com/wakuwaku-go/wakuwaku/lock"

	wotel "github.com/wakuwaku-go/wakuwaku/contrib/otel"
)

// newBenchTelemetry returns a Telemetry over the SDK's providers, which
// aggregate what it records as an exporting service's would.
func newBenchTelemetry(b *testing.B) *wotel.Telemetry {
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	tp := sdktrace.NewTracerProvider()
	b.Cleanup(func() {
		mp.Shutdown(context.Background())
		tp.Shutdown(context.Background())
	})
	tel, err := wotel.New("r1", wotel.WithMeterProvider(mp), wotel.WithTracerProvider(tp))
	if err != nil {
		b.Fatal(err)
	}
	return tel
}

// BenchmarkObserveLock is the cost the hook adds to a lock operation.
func BenchmarkObserveLock(b *testing.B) {
	m := newBenchTelemetry(b)
	e := lock.Event{Kind: "Lock", Namespace: "invoice", Op: "lock", Result: "acquired", Latency: 300 * time.Microsecond}
	for b.Loop() {
		m.ObserveLock(e)
	}
}

// BenchmarkObserverRun is the cost the observer adds to a run: its start
// and its end.
func BenchmarkObserverRun(b *testing.B) {
	o := newBenchTelemetry(b).Observer()
	now := time.Now()
	t := cron.Tick{Job: "report", Run: 1, Attempt: 1, Scheduled: now, Started: now.Add(time.Millisecond)}
	for b.Loop() {
		o.RunStarted(t)
		o.RunFinished(t, nil, time.Second)
	}
}
