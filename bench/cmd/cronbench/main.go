// Command cronbench runs one cron scheduler with many jobs that do nothing,
// each once a second, for a while, and prints what it cost as JSON: the CPU
// time the process used, the heap it holds per job, and how late the runs
// started.
//
// It runs one scheduler per process, so that each is measured alone:
//
//	cronbench -lib ours|gocron|robfig [-jobs 10000] [-for 30s]
//
// Every scheduler gets the same work: jobs on the six-field cron spec
// "* * * * * *" (every second, on the second), each run recording how late
// it started and returning.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"github.com/wakuwaku-go/wakuwaku/bench/cronresult"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-co-op/gocron/v2"
	robfig "github.com/robfig/cron/v3"

	"github.com/wakuwaku-go/wakuwaku/cron"
	"github.com/wakuwaku-go/wakuwaku/interval"
)

// spec is every job's schedule, in all three schedulers.
const spec = "* * * * * *"

// recorder keeps every run's lateness in a slice made before the baseline
// is measured, so that it is not counted as the scheduler's heap.
type recorder struct {
	late    []int64
	n       atomic.Int64
	startup atomic.Int64
}

func (r *recorder) add(late time.Duration) {
	if i := r.n.Add(1) - 1; i < int64(len(r.late)) {
		r.late[i] = int64(late)
	}
}

// sinceSecond is how late a run of a job due on every second started, for a
// scheduler that doesn't say when the run was due: the time since the last
// whole second. It is right as long as runs are less than a second late.
func sinceSecond() time.Duration {
	now := time.Now()
	return now.Sub(now.Truncate(time.Second))
}

// everySecond is our runtime's policy for every job, a package-level value
// as the interval package suggests.
var everySecond = interval.MustCron(spec)

// ourJob is a job of our runtime. Each needs a name of its own, so each is
// a value of its own; robfig's and gocron's jobs share one func.
type ourJob struct {
	name string
}

func (j *ourJob) Name() string                { return j.name }
func (j *ourJob) Interval() interval.Interval { return everySecond }
func (j *ourJob) Process(_ context.Context, t cron.Tick) error {
	if t.Run == 1 {
		rec.startup.Add(1)
		return nil
	}
	rec.add(time.Since(t.Scheduled))
	return nil
}

// rec records the runs of every scheduler's jobs.
var rec recorder

// start starts lib's scheduler with n jobs and returns how to stop it.
func start(lib string, n int) (stop func() error, err error) {
	switch lib {
	case "ours":
		jobs := make([]cron.Job, n)
		for i := range jobs {
			jobs[i] = &ourJob{name: "job-" + strconv.Itoa(i)}
		}
		rt, err := cron.Start(jobs)
		if err != nil {
			return nil, err
		}
		return func() error { return rt.Shutdown(context.Background()) }, nil
	case "gocron":
		s, err := gocron.NewScheduler()
		if err != nil {
			return nil, err
		}
		task := func() { rec.add(sinceSecond()) }
		for range n {
			if _, err := s.NewJob(gocron.CronJob(spec, true), gocron.NewTask(task)); err != nil {
				return nil, err
			}
		}
		s.Start()
		return s.Shutdown, nil
	case "robfig":
		c := robfig.New(robfig.WithSeconds())
		task := func() { rec.add(sinceSecond()) }
		for range n {
			if _, err := c.AddFunc(spec, task); err != nil {
				return nil, err
			}
		}
		c.Start()
		return func() error { <-c.Stop().Done(); return nil }, nil
	}
	return nil, fmt.Errorf("unknown -lib %q (want ours, gocron or robfig)", lib)
}

func main() {
	lib := flag.String("lib", "ours", "the scheduler: ours, gocron or robfig")
	n := flag.Int("jobs", 10_000, "how many jobs")
	dur := flag.Duration("for", 30*time.Second, "how long the jobs run")
	flag.StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the run to this file")
	flag.StringVar(&memProfile, "memprofile", "", "write a heap profile, taken when the heap is measured, to this file")
	flag.Parse()
	if memProfile != "" {
		runtime.MemProfileRate = 1
	}
	if err := run(*lib, *n, *dur); err != nil {
		fmt.Fprintln(os.Stderr, "cronbench:", err)
		os.Exit(1)
	}
}

var cpuProfile, memProfile string

func run(lib string, n int, dur time.Duration) error {
	rec.late = make([]int64, n*(int(dur/time.Second)+3))
	// Start on a half second, so that the measurements at the end fall
	// between two ticks too.
	begin := time.Now().Truncate(time.Second).Add(1500 * time.Millisecond)
	time.Sleep(time.Until(begin))
	base := memStats()
	goroutines := runtime.NumGoroutine()
	cpu0 := cpuTime()
	if cpuProfile != "" {
		f, err := os.Create(cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
	}

	stop, err := start(lib, n)
	if err != nil {
		return err
	}
	time.Sleep(time.Until(begin.Add(dur)))
	cpu1 := cpuTime()
	pprof.StopCPUProfile()
	end := memStats()
	if memProfile != "" {
		f, err := os.Create(memProfile)
		if err != nil {
			return err
		}
		err = pprof.Lookup("heap").WriteTo(f, 0)
		f.Close()
		if err != nil {
			return err
		}
	}
	g := runtime.NumGoroutine() - goroutines
	began := time.Now()
	if err := stop(); err != nil {
		return err
	}
	stopped := time.Since(began)

	recorded := min(rec.n.Load(), int64(len(rec.late)))
	late := slices.Clone(rec.late[:recorded])
	slices.Sort(late)
	res := cronresult.Result{
		Lib: lib, Jobs: n, For: dur.Seconds(),
		UserS:           cpu1.user - cpu0.user,
		SysS:            cpu1.sys - cpu0.sys,
		HeapInusePerJob: float64(int64(end.HeapInuse)-int64(base.HeapInuse)) / float64(n),
		HeapAllocPerJob: float64(int64(end.HeapAlloc)-int64(base.HeapAlloc)) / float64(n),
		StackPerJob:     float64(int64(end.StackInuse)-int64(base.StackInuse)) / float64(n),
		Goroutines:      g,
		Runs:            rec.n.Load() + rec.startup.Load(),
		Startup:         rec.startup.Load(),
		LateP50:         quantile(late, 0.50),
		LateP99:         quantile(late, 0.99),
		Dropped:         rec.n.Load() - recorded,
		StopS:           stopped.Seconds(),
	}
	if len(late) > 0 {
		res.LateMax = float64(late[len(late)-1]) / 1e3
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(res)
}

// memStats returns the memory statistics after a full collection.
func memStats() runtime.MemStats {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m
}

type cpu struct{ user, sys float64 }

func cpuTime() cpu {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return cpu{
		user: float64(ru.Utime.Sec) + float64(ru.Utime.Usec)/1e6,
		sys:  float64(ru.Stime.Sec) + float64(ru.Stime.Usec)/1e6,
	}
}

// quantile returns the q quantile of sorted durations in µs (nearest rank).
func quantile(sorted []int64, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.5) - 1
	i = max(0, min(i, len(sorted)-1))
	return float64(sorted[i]) / 1e3
}
