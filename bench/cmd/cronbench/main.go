// Command cronbench runs one cron scheduler with many jobs that do nothing
// and prints what it cost as JSON: the CPU time the process used, the heap
// it holds per job, and how late the runs started.
//
// It runs one scheduler per process, so that each is measured alone:
//
//	cronbench -lib ours|gocron|robfig [-mode second|idle|burst|churn|leased] [-jobs 10000] [-for 30s]
//
// The modes:
//
//   - second: every job on the six-field spec "* * * * * *" (every second,
//     on the second) for -for, each run recording how late it started;
//   - idle: every job on one daily spec due about 12 hours from now (ours
//     without its startup run), for -idle-for (125 s, so that the Go
//     runtime's forced collection every 2 minutes falls in it): the heap
//     per job and the CPU time, scaled to an idle hour;
//   - burst: -due of the jobs on "*/5 * * * * *" (every 5 seconds, all at
//     once), the others on the daily spec, for -for: how late each run of
//     a burst started after its instant, and how many started early.
//   - churn: the jobs idle as in idle mode, then -change more added and
//     -change of the first removed, one at a time, while the scheduler
//     runs: the time per Add and per Remove, and the heap per job after
//     each step.
//   - leased (ours only): -due of the jobs leased, on "*/5 * * * * *"
//     spread over -spread of each slot (none by default), over a
//     redis-server of its own, the others on the daily spec, for -for:
//     how late each run began Process, its claim included, how many
//     ticks were skipped, and the server's CPU time, in all and in its
//     busiest second.
//
// -parse-each gives each of ours' jobs, in modes idle and churn, an
// Interval parsed from its own spec text, as jobs read from a database
// have, rather than one package-level Interval.
//
// Ours runs each job once at startup, as documented, except in idle mode;
// those runs are left out of the lateness.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-co-op/gocron/v2"
	robfig "github.com/robfig/cron/v3"

	"github.com/wakuwaku-go/wakuwaku/bench/cronresult"
	"github.com/wakuwaku-go/wakuwaku/cron"
	"github.com/wakuwaku-go/wakuwaku/interval"
)

// everySecond is the second mode's spec, in all three schedulers.
const everySecond = "* * * * * *"

// burstSpec is the burst mode's spec for the jobs due together, and
// burstEvery how far apart its instants are.
const (
	burstSpec  = "*/5 * * * * *"
	burstEvery = 5 * time.Second
)

// dailySpec returns a six-field spec due once a day, about 12 hours after
// now in the local zone, as all three schedulers read it.
func dailySpec(now time.Time) string {
	t := now.Add(12 * time.Hour)
	return fmt.Sprintf("%d %d %d * * *", t.Second(), t.Minute(), t.Hour())
}

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

// sinceBurst is how late a run of a burst started, for a scheduler that
// doesn't say when the run was due: the time since the nearest instant of
// burstSpec, negative if it started before it. Right while runs are less
// than half of burstEvery off.
func sinceBurst() time.Duration {
	now := time.Now()
	return now.Sub(now.Round(burstEvery))
}

// Our runtime's policies, package-level values as the interval package
// suggests: each job's Interval returns one of them.
var ourEvery, ourBurst interval.Interval

// ourJob is a job of our runtime on ourEvery. Each needs a name of its own,
// so each is a value of its own; robfig's and gocron's jobs share one func.
type ourJob struct {
	name string
}

func (j *ourJob) Name() string                { return j.name }
func (j *ourJob) Interval() interval.Interval { return ourEvery }
func (j *ourJob) Process(_ context.Context, t cron.Tick) error {
	return record(t)
}

// burstJob is a job of our runtime on ourBurst.
type burstJob struct {
	name string
}

func (j *burstJob) Name() string                { return j.name }
func (j *burstJob) Interval() interval.Interval { return ourBurst }
func (j *burstJob) Process(_ context.Context, t cron.Tick) error {
	return record(t)
}

// record records a run of ours: its startup run apart, the others' lateness.
func record(t cron.Tick) error {
	if t.Run == 1 && !noStartup {
		rec.startup.Add(1)
		return nil
	}
	rec.add(time.Since(t.Scheduled))
	return nil
}

// noStartup is set when ours runs without startup runs (idle mode).
var noStartup bool

// rec records the runs of every scheduler's jobs.
var rec recorder

// plan is the jobs a mode starts: n of them, the first due on burst (if
// not ""), the others on every.
type plan struct {
	n, due       int
	every, burst string
	late         func() time.Duration // robfig's and gocron's lateness
}

// start starts lib's scheduler with p's jobs and returns how to stop it.
func start(lib string, p plan) (stop func() error, err error) {
	specOf := func(i int) string {
		if i < p.due {
			return p.burst
		}
		return p.every
	}
	switch lib {
	case "ours":
		jobs := make([]cron.Job, p.n)
		for i := range jobs {
			name := "job-" + strconv.Itoa(i)
			switch {
			case i < p.due:
				jobs[i] = &burstJob{name: name}
			case parseEach:
				jobs[i] = &specJob{name: name, every: interval.MustCron(strings.Clone(p.every)).WithoutStartupRun()}
			default:
				jobs[i] = &ourJob{name: name}
			}
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
		task := func() { rec.add(p.late()) }
		for i := range p.n {
			if _, err := s.NewJob(gocron.CronJob(specOf(i), true), gocron.NewTask(task)); err != nil {
				return nil, err
			}
		}
		s.Start()
		return s.Shutdown, nil
	case "robfig":
		c := robfig.New(robfig.WithSeconds())
		task := func() { rec.add(p.late()) }
		for i := range p.n {
			if _, err := c.AddFunc(specOf(i), task); err != nil {
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
	mode := flag.String("mode", "second", "what to measure: second, idle or burst")
	n := flag.Int("jobs", 10_000, "how many jobs")
	due := flag.Int("due", 10_000, "burst mode: how many of the jobs are due at once")
	dur := flag.Duration("for", 30*time.Second, "how long the jobs run (modes second, burst and leased)")
	change := flag.Int("change", 10_000, "churn mode: how many jobs are added, then removed")
	spread := flag.Duration("spread", 0, "leased mode: the spread of the jobs' starts over each slot")
	flag.BoolVar(&parseEach, "parse-each", false, "modes idle and churn: each of ours' jobs parses its own spec")
	idleFor := flag.Duration("idle-for", 125*time.Second, "how long the jobs wait (mode idle)")
	flag.StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the run to this file")
	flag.StringVar(&memProfile, "memprofile", "", "write a heap profile, taken when the heap is measured, to this file")
	flag.Parse()
	if memProfile != "" {
		runtime.MemProfileRate = 1
	}
	var err error
	switch *mode {
	case "second":
		err = runSecond(*lib, *n, *dur)
	case "idle":
		err = runIdle(*lib, *n, *idleFor)
	case "burst", "leased":
		switch {
		case *due > *n:
			err = fmt.Errorf("-due %d is more than -jobs %d", *due, *n)
		case *mode == "burst":
			err = runBurst(*lib, *n, *due, *dur)
		case *lib != "ours":
			err = fmt.Errorf("-mode leased measures ours only, not %q", *lib)
		default:
			err = runLeased(*n, *due, *spread, *dur)
		}
	case "churn":
		if *change > *n {
			err = fmt.Errorf("-change %d is more than -jobs %d", *change, *n)
			break
		}
		err = runChurn(*lib, *n, *change, parseEach)
	default:
		err = fmt.Errorf("unknown -mode %q (want second, idle, burst, churn or leased)", *mode)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "cronbench:", err)
		os.Exit(1)
	}
}

var cpuProfile, memProfile string

// parseEach is -parse-each.
var parseEach bool

// startProfile starts the CPU profile, if asked for, and returns how to
// stop it.
func startProfile() (stop func(), err error) {
	if cpuProfile == "" {
		return func() {}, nil
	}
	f, err := os.Create(cpuProfile)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

// writeHeapProfile writes the heap profile, if asked for.
func writeHeapProfile() error {
	if memProfile == "" {
		return nil
	}
	f, err := os.Create(memProfile)
	if err != nil {
		return err
	}
	defer f.Close()
	return pprof.Lookup("heap").WriteTo(f, 0)
}

// heapPerJob sets res's heap figures from the statistics before and after.
func heapPerJob(res *cronresult.Result, base, end runtime.MemStats, n int) {
	res.HeapInusePerJob = float64(int64(end.HeapInuse)-int64(base.HeapInuse)) / float64(n)
	res.HeapAllocPerJob = float64(int64(end.HeapAlloc)-int64(base.HeapAlloc)) / float64(n)
	res.StackPerJob = float64(int64(end.StackInuse)-int64(base.StackInuse)) / float64(n)
}

// lateness sets res's lateness figures from the recorded runs.
func lateness(res *cronresult.Result) {
	recorded := min(rec.n.Load(), int64(len(rec.late)))
	late := slices.Clone(rec.late[:recorded])
	slices.Sort(late)
	res.Runs = rec.n.Load() + rec.startup.Load()
	res.Startup = rec.startup.Load()
	res.LateP50 = quantile(late, 0.50)
	res.LateP99 = quantile(late, 0.99)
	res.Dropped = rec.n.Load() - recorded
	if len(late) > 0 {
		res.LateMax = float64(late[len(late)-1]) / 1e3
	}
	for _, l := range late {
		if l >= 0 {
			break
		}
		res.Early++
	}
}

func emit(res cronresult.Result) error {
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(res)
}

// runIdle starts n jobs due in about 12 hours and measures what they cost
// while they wait.
func runIdle(lib string, n int, idleFor time.Duration) error {
	now := time.Now()
	spec := dailySpec(now)
	ourEvery, noStartup = interval.MustCron(spec).WithoutStartupRun(), true
	base := memStats()
	goroutines := runtime.NumGoroutine()
	began := time.Now()
	stop, err := start(lib, plan{n: n, every: spec})
	if err != nil {
		return err
	}
	started := time.Since(began)
	stopProfile, err := startProfile()
	if err != nil {
		return err
	}
	runtime.GC() // the window starts after a collection, so holds the forced one
	cpu0 := cpuTime()
	time.Sleep(idleFor)
	cpu1 := cpuTime()
	stopProfile()
	end := memStats()
	if err := writeHeapProfile(); err != nil {
		return err
	}
	g := runtime.NumGoroutine() - goroutines
	began = time.Now()
	if err := stop(); err != nil {
		return err
	}
	res := cronresult.Result{
		Lib: lib, Mode: "idle", Jobs: n, For: idleFor.Seconds(),
		StartS:      started.Seconds(),
		UserS:       cpu1.user - cpu0.user,
		SysS:        cpu1.sys - cpu0.sys,
		Goroutines:  g,
		Runs:        rec.n.Load(),
		StopS:       time.Since(began).Seconds(),
		CPUPerHourS: (cpu1.user - cpu0.user + cpu1.sys - cpu0.sys) * float64(time.Hour) / float64(idleFor),
	}
	heapPerJob(&res, base, end, n)
	return emit(res)
}

// runBurst starts n jobs of which due are due together every burstEvery,
// and measures how late the runs of each burst start.
func runBurst(lib string, n, due int, dur time.Duration) error {
	now := time.Now()
	spec := dailySpec(now)
	ourEvery, ourBurst = interval.MustCron(spec), interval.MustCron(burstSpec)
	rec.late = make([]int64, due*(int(dur/burstEvery)+2))
	// Start 1.5 s after an instant of the bursts, so that the startup is
	// over before the first.
	begin := now.Truncate(burstEvery).Add(burstEvery + 1500*time.Millisecond)
	return timed(lib, "burst", plan{n: n, due: due, every: spec, burst: burstSpec, late: sinceBurst}, begin, dur)
}

// runSecond runs n jobs every second for dur.
func runSecond(lib string, n int, dur time.Duration) error {
	ourEvery = interval.MustCron(everySecond)
	rec.late = make([]int64, n*(int(dur/time.Second)+3))
	// Start on a half second, so that the measurements at the end fall
	// between two ticks too.
	begin := time.Now().Truncate(time.Second).Add(1500 * time.Millisecond)
	return timed(lib, "second", plan{n: n, every: everySecond, late: sinceSecond}, begin, dur)
}

// timed starts the jobs of p at begin, lets them run until begin+dur, and
// reports what that cost and how late the runs started.
func timed(lib, mode string, p plan, begin time.Time, dur time.Duration) error {
	time.Sleep(time.Until(begin))
	base := memStats()
	goroutines := runtime.NumGoroutine()
	cpu0 := cpuTime()
	stopProfile, err := startProfile()
	if err != nil {
		return err
	}
	began := time.Now()
	stop, err := start(lib, p)
	if err != nil {
		return err
	}
	started := time.Since(began)
	time.Sleep(time.Until(begin.Add(dur)))
	cpu1 := cpuTime()
	stopProfile()
	end := memStats()
	if err := writeHeapProfile(); err != nil {
		return err
	}
	g := runtime.NumGoroutine() - goroutines
	began = time.Now()
	if err := stop(); err != nil {
		return err
	}
	res := cronresult.Result{
		Lib: lib, Mode: mode, Jobs: p.n, Due: p.due, For: dur.Seconds(),
		StartS:     started.Seconds(),
		UserS:      cpu1.user - cpu0.user,
		SysS:       cpu1.sys - cpu0.sys,
		Goroutines: g,
		StopS:      time.Since(began).Seconds(),
	}
	heapPerJob(&res, base, end, p.n)
	lateness(&res)
	return emit(res)
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
