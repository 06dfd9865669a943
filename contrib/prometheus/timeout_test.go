package prometheus_test

import (
	"context"
	"testing"
	"time"

	"github.com/wakuwaku-go/wakuwaku/cron"
	"github.com/wakuwaku-go/wakuwaku/interval"
)

// TestRunTimeout counts a run that outlasted its deadline as a timeout.
func TestRunTimeout(t *testing.T) {
	m, reg := newMetrics(t)
	ev := newEvents()
	job := cron.Func("bounded", interval.AtLeast(time.Hour), func(ctx context.Context, _ cron.Tick) error {
		<-ctx.Done()
		return context.Cause(ctx)
	}, cron.WithRunDeadline(time.Millisecond))
	start(t, []cron.Job{job}, m.Observer(ev.observer()))
	wait(t, ev.finished, 1, "the run")
	for outcome, want := range map[string]float64{"timeout": 1, "error": 0, "ok": 0} {
		got := series(t, reg, "wakuwaku_cron_runs_total", map[string]string{"cron_job": "bounded", "outcome": outcome})
		if v := got.GetCounter().GetValue(); v != want {
			t.Errorf("wakuwaku_cron_runs_total{outcome=%q} = %v, want %v", outcome, v, want)
		}
	}
}
