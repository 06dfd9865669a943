package otel_test

import (
	"context"
	"fmt"
	"log"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/wakuwaku-go/wakuwaku/cron"
	"github.com/wakuwaku-go/wakuwaku/interval"

	wotel "github.com/wakuwaku-go/wakuwaku/contrib/otel"
)

// This example traces what a run does: the job starts a span from the
// context Process gets, and that span is a child of the run's.
func ExampleTelemetry_Observer_trace() {
	spans := tracetest.NewSpanRecorder()
	tracers := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	defer tracers.Shutdown(context.Background())
	tel, err := wotel.New("web-1", wotel.WithTracerProvider(tracers))
	if err != nil {
		log.Fatal(err)
	}
	tracer := tracers.Tracer("reports")
	done := make(chan struct{})
	job := cron.Func("report", interval.AtLeast(time.Hour), func(ctx context.Context, t cron.Tick) error {
		_, span := tracer.Start(ctx, "build report") // a child of the run's span
		span.End()
		return nil
	})
	rt, err := cron.Start([]cron.Job{job}, cron.WithObserver(tel.Observer(cron.Observer{
		RunFinished: func(cron.Tick, error, time.Duration) { close(done) },
	})))
	if err != nil {
		log.Fatal(err)
	}
	defer rt.Shutdown(context.Background())
	<-done

	ids := map[string]string{}
	for _, s := range spans.Ended() {
		ids[s.Name()] = s.SpanContext().SpanID().String()
		if s.Parent().IsValid() {
			ids[s.Name()+"'s parent"] = s.Parent().SpanID().String()
		}
	}
	fmt.Println(ids["build report's parent"] == ids["cron report"])
	// Output: true
}
