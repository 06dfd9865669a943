package cron_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/wakuwaku-go/wakuwaku/cron"
	"github.com/wakuwaku-go/wakuwaku/interval"
)

// This example changes a running runtime's jobs, as a service whose
// schedules live in a database does: it adds a job per row, reschedules
// one and removes another.
func ExampleRuntime_Add() {
	rt, err := cron.Start(nil)
	if err != nil {
		log.Fatal(err)
	}
	defer rt.Shutdown(context.Background())
	export := func(ctx context.Context, t cron.Tick) error { return nil }
	for _, row := range []struct{ tenant, spec string }{
		{"tenant-7", "0 3 * * *"},
		{"tenant-42", "0 3 * * *"}, // the same text: one parsed spec for both
		{"tenant-99", "every day"},
	} {
		every, err := interval.Cron(row.spec)
		if err != nil {
			fmt.Println("skipped:", err)
			continue
		}
		if err := rt.Add(cron.Func("export:"+row.tenant, every.WithoutStartupRun(), export)); err != nil {
			log.Fatal(err)
		}
	}
	if err := rt.Replace(cron.Func("export:tenant-42", interval.MustCron("30 4 * * *").WithoutStartupRun(), export)); err != nil {
		log.Fatal(err)
	}
	if err := rt.Remove(context.Background(), "export:tenant-7"); err != nil {
		log.Fatal(err)
	}
	if err := rt.Remove(context.Background(), "export:tenant-7"); errors.Is(err, cron.ErrUnknownJob) {
		fmt.Println("removed twice:", err)
	}
	for _, j := range rt.Jobs() {
		fmt.Println(j.Name, j.Interval, j.HasNext)
	}
	// Output:
	// skipped: interval: invalid cron spec "every day": expected 5 to 6 fields, found 2: [every day]
	// removed twice: cron: no such job "export:tenant-7": Remove: the runtime has no job of that name
	// export:tenant-42 cron "30 4 * * *", no startup run true
}

// This example bounds a run's time: the run's context ends at its
// deadline, and the run is reported as a timeout.
func ExampleWithRunDeadline() {
	done := make(chan error, 1)
	job := cron.Func("reindex", interval.AtLeast(time.Hour), func(ctx context.Context, t cron.Tick) error {
		<-ctx.Done()
		return context.Cause(ctx)
	}, cron.WithRunDeadline(10*time.Millisecond))
	rt, err := cron.Start([]cron.Job{job}, cron.WithObserver(cron.Observer{
		RunFinished: func(t cron.Tick, err error, took time.Duration) { done <- err },
	}))
	if err != nil {
		log.Fatal(err)
	}
	defer rt.Shutdown(context.Background())
	err = <-done
	fmt.Println(errors.Is(err, cron.ErrRunDeadline), err)
	// Output: true cron: run deadline exceeded
}
