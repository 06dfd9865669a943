package prometheus_test

import (
	"bufio"
	"context"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"
	"github.com/wakuwaku-go/wakuwaku/cron"
	"github.com/wakuwaku-go/wakuwaku/interval"
	"github.com/wakuwaku-go/wakuwaku/lock"

	wprom "github.com/wakuwaku-go/wakuwaku/contrib/prometheus"
)

// This example counts a lock DB's operations and a cron runtime's runs,
// and serves them on /metrics. The runtime's observer is chained with one
// of the service's own, which here waits for the startup run.
func Example() {
	metrics := wprom.New()
	registry := prometheus.NewRegistry()
	registry.MustRegister(metrics)

	// An embedded Redis, for the example; a service gives its own client.
	mr, err := miniredis.Run()
	if err != nil {
		log.Fatal(err)
	}
	defer mr.Close()
	db := lock.NewDB(redis.NewClient(&redis.Options{Addr: mr.Addr()}), lock.WithObserver(metrics.ObserveLock))

	ctx := context.Background()
	invoices := lock.New[int]("invoice", time.Minute)
	if tok, err := invoices.TryLock(ctx, db, 42); err == nil && tok != nil {
		tok.Release(ctx)
	}

	finished := make(chan struct{})
	mine := cron.Observer{RunFinished: func(cron.Tick, error, time.Duration) { close(finished) }}
	report := cron.Func("report", interval.AtLeast(time.Hour), func(context.Context, cron.Tick) error { return nil })
	rt, err := cron.Start([]cron.Job{report}, cron.WithObserver(metrics.Observer(mine)))
	if err != nil {
		log.Fatal(err)
	}
	<-finished
	if err := rt.Shutdown(ctx); err != nil {
		log.Fatal(err)
	}

	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(registry, promhttp.HandlerOpts{}))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		log.Fatal(err)
	}
	defer resp.Body.Close()
	lines := bufio.NewScanner(resp.Body)
	for lines.Scan() {
		if l := lines.Text(); strings.HasPrefix(l, "wakuwaku_cron_runs_total") || strings.HasPrefix(l, "wakuwaku_lock_operations_total") {
			fmt.Println(l)
		}
	}
	// Output:
	// wakuwaku_cron_runs_total{cron_job="report",outcome="error"} 0
	// wakuwaku_cron_runs_total{cron_job="report",outcome="ok"} 1
	// wakuwaku_cron_runs_total{cron_job="report",outcome="panic"} 0
	// wakuwaku_lock_operations_total{kind="Lock",lock_namespace="invoice",operation="lock",result="acquired"} 1
	// wakuwaku_lock_operations_total{kind="Lock",lock_namespace="invoice",operation="release",result="released"} 1
}
