package cron_test

import (
	"context"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wakuwaku-go/wakuwaku/cron"
	"github.com/wakuwaku-go/wakuwaku/interval"
)

// idleJob does nothing, on a schedule.
type idleJob struct {
	name  string
	every interval.Interval
}

func (j *idleJob) Name() string                             { return j.name }
func (j *idleJob) Interval() interval.Interval              { return j.every }
func (j *idleJob) Process(context.Context, cron.Tick) error { return nil }

func idleJobs(n int, every interval.Interval) []cron.Job {
	jobs := make([]cron.Job, n)
	for i := range jobs {
		jobs[i] = &idleJob{name: "job-" + strconv.Itoa(i), every: every}
	}
	return jobs
}

// countRuns returns an observer that counts finished runs and closes done
// when there have been n.
func countRuns(n int64, done chan<- struct{}) cron.Observer {
	var count atomic.Int64
	return cron.Observer{RunFinished: func(cron.Tick, error, time.Duration) {
		if count.Add(1) == n {
			close(done)
		}
	}}
}

// BenchmarkIdleJobs measures what 10,000 jobs cost while they wait for
// their next run: the heap and stack the runtime holds for them once their
// startup runs are over, per job, beside the jobs themselves, and the
// runtime's goroutines (its scheduler and workers).
func BenchmarkIdleJobs(b *testing.B) {
	const n = 10_000
	jobs := idleJobs(n, interval.AtLeast(time.Hour))
	var heap, stack, goroutines float64
	for b.Loop() {
		done := make(chan struct{})
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		g := runtime.NumGoroutine()

		rt, err := cron.Start(jobs, cron.WithObserver(countRuns(n, done)))
		if err != nil {
			b.Fatal(err)
		}
		<-done
		// Let the goroutines that took over from stragglers (on a busy
		// machine) return before measuring: the scheduler and the workers
		// stay.
		for range 100 {
			if runtime.NumGoroutine() <= g+1+max(2, runtime.GOMAXPROCS(0)) {
				break
			}
			time.Sleep(time.Millisecond)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		heap = float64(after.HeapAlloc) - float64(before.HeapAlloc)
		stack = float64(after.StackInuse) - float64(before.StackInuse)
		goroutines = float64(runtime.NumGoroutine() - g)

		if err := rt.Shutdown(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(heap/n, "heap-B/job")
	b.ReportMetric(stack/n, "stack-B/job")
	b.ReportMetric(goroutines, "goroutines")
}

// BenchmarkRun measures the runtime's cost of one run: 1,000 jobs due
// every millisecond, each op one run of one of them, from the tick through
// the worker and the report to the next tick's scheduling.
func BenchmarkRun(b *testing.B) {
	const n = 1_000
	jobs := idleJobs(n, interval.AfterStart(time.Millisecond))
	done := make(chan struct{})
	b.ReportAllocs()
	b.ResetTimer()
	rt, err := cron.Start(jobs, cron.WithObserver(countRuns(int64(max(b.N, n)), done)),
		cron.WithMaxOverlap(1))
	if err != nil {
		b.Fatal(err)
	}
	<-done
	b.StopTimer()
	if err := rt.Shutdown(context.Background()); err != nil {
		b.Fatal(err)
	}
}

// countingJob counts its runs and closes done at the n-th.
type countingJob struct {
	name  string
	every interval.Interval
	runs  *atomic.Int64
	n     int64
	done  chan struct{}
}

func (j *countingJob) Name() string                { return j.name }
func (j *countingJob) Interval() interval.Interval { return j.every }
func (j *countingJob) Process(context.Context, cron.Tick) error {
	if j.runs.Add(1) == j.n {
		close(j.done)
	}
	return nil
}

// BenchmarkRunQuiet is BenchmarkRun without an observer or a logger, as a
// service that only runs its jobs has it: each op one run, and its
// allocations are the runtime's alone (the tick, the worker's hand-off and
// the next tick's scheduling).
func BenchmarkRunQuiet(b *testing.B) {
	const n = 1_000
	var count atomic.Int64
	done := make(chan struct{})
	jobs := make([]cron.Job, n)
	for i := range jobs {
		jobs[i] = &countingJob{name: "job-" + strconv.Itoa(i), every: interval.AfterStart(time.Millisecond),
			runs: &count, n: int64(max(b.N, n)), done: done}
	}
	b.ReportAllocs()
	b.ResetTimer()
	rt, err := cron.Start(jobs, cron.WithMaxOverlap(1))
	if err != nil {
		b.Fatal(err)
	}
	<-done
	b.StopTimer()
	if err := rt.Shutdown(context.Background()); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkAddRemove measures jobs that change while the runtime runs:
// on a runtime of 100,000 idle jobs, each op adds 10,000 jobs, one at a
// time, then removes them. It reports the time of one Add and of one
// Remove, and the heap the runtime holds per job once they are gone,
// beside the jobs themselves, which shows that a removed job leaves
// nothing behind.
func BenchmarkAddRemove(b *testing.B) {
	const n, k = 100_000, 10_000
	every := interval.MustCron("0 3 * * *").WithoutStartupRun()
	rt, err := cron.Start(idleJobs(n, every))
	if err != nil {
		b.Fatal(err)
	}
	defer rt.Shutdown(context.Background())
	extra := make([]cron.Job, k)
	for i := range extra {
		extra[i] = &idleJob{name: "extra-" + strconv.Itoa(i), every: every}
	}
	ctx := context.Background()
	var add, remove time.Duration
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	b.ReportAllocs()
	for b.Loop() {
		began := time.Now()
		for _, j := range extra {
			if err := rt.Add(j); err != nil {
				b.Fatal(err)
			}
		}
		mid := time.Now()
		for _, j := range extra {
			if err := rt.Remove(ctx, j.(*idleJob).name); err != nil {
				b.Fatal(err)
			}
		}
		add += mid.Sub(began)
		remove += time.Since(mid)
	}
	b.StopTimer()
	var after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&after)
	ops := float64(b.N * k)
	b.ReportMetric(float64(add.Nanoseconds())/ops, "ns/add")
	b.ReportMetric(float64(remove.Nanoseconds())/ops, "ns/remove")
	b.ReportMetric((float64(after.HeapAlloc)-float64(before.HeapAlloc))/n, "heap-growth-B/job")
}
