package prometheus_test

import (
	"testing"
	"time"

	"github.com/wakuwaku-go/wakuwaku/cron"
	"github.com/wakuwaku-go/wakuwaku/lock"

	wprom "github.com/wakuwaku-go/wakuwaku/contrib/prometheus"
)

// BenchmarkObserveLock is the cost the hook adds to a lock operation.
func BenchmarkObserveLock(b *testing.B) {
	m := wprom.New()
	e := lock.Event{Kind: "Lock", Namespace: "invoice", Op: "lock", Result: "acquired", Latency: 300 * time.Microsecond}
	for b.Loop() {
		m.ObserveLock(e)
	}
}

// BenchmarkObserverRun is the cost the observer adds to a run: its start
// and its end.
func BenchmarkObserverRun(b *testing.B) {
	o := wprom.New().Observer()
	now := time.Now()
	t := cron.Tick{Job: "report", Run: 1, Attempt: 1, Scheduled: now, Started: now.Add(time.Millisecond)}
	for b.Loop() {
		o.RunStarted(t)
		o.RunFinished(t, nil, time.Second)
	}
}
