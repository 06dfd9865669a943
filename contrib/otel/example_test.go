package otel_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/wakuwaku-go/wakuwaku/cron"
	"github.com/wakuwaku-go/wakuwaku/interval"
	"github.com/wakuwaku-go/wakuwaku/lock"

	wotel "github.com/wakuwaku-go/wakuwaku/contrib/otel"
)

// This example records a lock DB's operations and a cron runtime's runs,
// with the SDK's providers. A service would give its own, with exporters,
// or set the global ones and call New without options. The runtime's
// observer is chained with one of the service's own, which here waits for
// the startup run.
func Example() {
	reader := sdkmetric.NewManualReader()
	meters := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	spans := tracetest.NewSpanRecorder()
	tracers := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	ctx := context.Background()
	defer meters.Shutdown(ctx)
	defer tracers.Shutdown(ctx)

	const replica = "web-1"
	tel, err := wotel.New(replica, wotel.WithMeterProvider(meters), wotel.WithTracerProvider(tracers))
	if err != nil {
		log.Fatal(err)
	}

	// An embedded Redis, for the example; a service gives its own client.
	mr, err := miniredis.Run()
	if err != nil {
		log.Fatal(err)
	}
	defer mr.Close()
	db := lock.NewDB(redis.NewClient(&redis.Options{Addr: mr.Addr()}), lock.WithObserver(tel.ObserveLock))
	if tok, err := lock.New[int]("invoice", time.Minute).TryLock(ctx, db, 42); err == nil && tok != nil {
		tok.Release(ctx)
	}

	finished := make(chan struct{})
	mine := cron.Observer{RunFinished: func(cron.Tick, error, time.Duration) { close(finished) }}
	report := cron.Func("report", interval.AtLeast(time.Hour), func(context.Context, cron.Tick) error { return nil })
	rt, err := cron.Start([]cron.Job{report}, cron.WithReplica(replica), cron.WithObserver(tel.Observer(mine)))
	if err != nil {
		log.Fatal(err)
	}
	<-finished
	if err := rt.Shutdown(ctx); err != nil {
		log.Fatal(err)
	}

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		log.Fatal(err)
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if sum, ok := m.Data.(metricdata.Sum[int64]); ok && (m.Name == "wakuwaku.cron.runs" || m.Name == "wakuwaku.lock.operations") {
				for _, p := range sum.DataPoints {
					fmt.Println(m.Name, p.Attributes.Encoded(attribute.DefaultEncoder()), p.Value, m.Unit)
				}
			}
		}
	}
	for _, s := range spans.Ended() {
		for _, kv := range s.Attributes() {
			if kv.Key == "wakuwaku.outcome" || kv.Key == "wakuwaku.replica" {
				fmt.Println(s.Name(), kv.Key, kv.Value.String())
			}
		}
	}
	// Unordered output:
	// wakuwaku.lock.operations wakuwaku.lock.kind=Lock,wakuwaku.lock.namespace=invoice,wakuwaku.lock.operation=lock,wakuwaku.lock.result=acquired 1 {operation}
	// wakuwaku.lock.operations wakuwaku.lock.kind=Lock,wakuwaku.lock.namespace=invoice,wakuwaku.lock.operation=release,wakuwaku.lock.result=released 1 {operation}
	// wakuwaku.cron.runs wakuwaku.job=report,wakuwaku.outcome=ok 1 {run}
	// wakuwaku.cron.runs wakuwaku.job=report,wakuwaku.outcome=error 0 {run}
	// wakuwaku.cron.runs wakuwaku.job=report,wakuwaku.outcome=panic 0 {run}
	// cron report wakuwaku.replica web-1
	// cron report wakuwaku.outcome ok
}
