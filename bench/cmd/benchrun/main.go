// Command benchrun runs every side-by-side benchmark of the bench module and
// writes BENCHMARKS.md: the lock benchmarks (BenchmarkLock, all libraries
// interleaved on one redis-server in one process, and BenchmarkBatch), the
// leased run protocol of the job records (the root module's
// BenchmarkRunProtocol), then the cron runs (one child process per
// scheduler: the idle runs side by side, then each burst alone).
//
// It refuses to measure when the 1-minute load average at its start is
// above 1 per CPU, unless -force is given; a forced run's report says so in
// its title and its first lines.
//
// Run it from the bench directory, as ../bench/run does:
//
//	go run ./cmd/benchrun [-rounds 8] [-benchtime 500ms] [-jobs 100000] [-due 10000] [-for 20s] [-idle-for 125s] [-out ../BENCHMARKS.md]
//
// The raw outputs go to -results (results/ by default, ignored by git);
// -report-only rewrites the report from them without running anything.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

type config struct {
	out, results string
	rounds       int
	benchtime    string
	levels       string
	jobs, due    int
	cronFor      time.Duration
	idleFor      time.Duration
	spread       time.Duration
	change       int
	reportOnly   bool
	skipLock     bool
	skipCron     bool
	force        bool

	clusterJobs     int
	clusterReplicas string
	clusterFor      time.Duration
	skipCluster     bool
}

func main() {
	var c config
	flag.StringVar(&c.out, "out", "../BENCHMARKS.md", "the report to write")
	flag.StringVar(&c.results, "results", "results", "where the raw outputs go")
	flag.IntVar(&c.rounds, "rounds", 8, "rounds of the lock comparisons (each round runs every library once per case)")
	flag.StringVar(&c.benchtime, "benchtime", "500ms", "go test -benchtime for each lock benchmark")
	flag.StringVar(&c.levels, "levels", "1,16,64", "parallelism levels of the lock benchmarks")
	flag.IntVar(&c.jobs, "jobs", 100_000, "jobs per cron scheduler")
	flag.IntVar(&c.due, "due", 10_000, "how many of the cron jobs are due at each burst")
	flag.DurationVar(&c.cronFor, "for", 20*time.Second, "how long each cron scheduler's burst run lasts")
	flag.DurationVar(&c.idleFor, "idle-for", 125*time.Second, "how long the cron schedulers' idle runs last (side by side)")
	flag.DurationVar(&c.spread, "spread", 4*time.Second, "the spread of the leased burst's starts over each 5 s slot, measured beside none")
	flag.IntVar(&c.change, "change", 10_000, "how many cron jobs are added, then removed, on a running scheduler of -jobs")
	flag.BoolVar(&c.reportOnly, "report-only", false, "only rewrite the report from the raw outputs of an earlier run")
	flag.BoolVar(&c.skipLock, "skip-lock", false, "don't run the lock, batch and run-protocol benchmarks (keep the earlier outputs)")
	flag.BoolVar(&c.skipCron, "skip-cron", false, "don't run the cron schedulers (keep the earlier outputs)")
	flag.IntVar(&c.clusterJobs, "cluster-jobs", 1000, "jobs due every second in the cluster cost runs")
	flag.StringVar(&c.clusterReplicas, "cluster-replicas", "1,3,10", "replica counts of the cluster cost runs")
	flag.DurationVar(&c.clusterFor, "cluster-for", 10*time.Second, "how long each cluster cost run's window lasts")
	flag.BoolVar(&c.skipCluster, "skip-cluster", false, "don't run the cluster cost (keep the earlier outputs)")
	flag.BoolVar(&c.force, "force", false, "measure even when the load at the start is above 1 per CPU; the report then says so, loudly")
	flag.Parse()
	if err := run(c); err != nil {
		fmt.Fprintln(os.Stderr, "benchrun:", err)
		os.Exit(1)
	}
}

func run(c config) error {
	if err := os.MkdirAll(c.results, 0o755); err != nil {
		return err
	}
	runFile := filepath.Join(c.results, "run.json")
	if !c.reportOnly {
		info, err := measure(c)
		if err != nil {
			return err
		}
		if err := writeJSON(runFile, info); err != nil {
			return err
		}
	}
	var info runInfo
	if err := readJSON(runFile, &info); err != nil {
		return fmt.Errorf("no earlier run to report on: %w", err)
	}
	report, err := render(c.results, info)
	if err != nil {
		return err
	}
	if err := os.WriteFile(c.out, report, 0o644); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "benchrun: wrote %s\n", c.out)
	return nil
}

// runInfo is what a run knows besides the benchmarks' own outputs.
type runInfo struct {
	Started, Finished time.Time
	Machine           machine
	Versions          []string
	Library           string // the library's commit, and whether the tree differs
	LoadStart         string
	LoadEnd           string
	LoadSamples       []float64 // 1-minute load average, every 10 s
	Busy              []string  // the busiest other processes at the start
	Command           string
	Rounds            int
	Benchtime         string
	Levels            string
	Jobs              int
	Due               int
	CronFor           time.Duration
	IdleFor           time.Duration
	Spread            time.Duration
	Change            int
	LockWall          time.Duration
	CronWall          time.Duration
	ProtocolWall      time.Duration
	ClusterJobs       int
	ClusterReplicas   string
	ClusterFor        time.Duration
	ClusterWall       time.Duration
	Forced            bool // -force was given
}

func measure(c config) (runInfo, error) {
	info := runInfo{
		Started:   time.Now(),
		Machine:   describeMachine(),
		Versions:  moduleVersions(),
		Library:   libraryCommit(),
		LoadStart: loadavg(),
		Busy:      busiest(),
		Command:   "bench/run " + strings.Join(os.Args[1:], " "),
		Rounds:    c.rounds,
		Benchtime: c.benchtime,
		Levels:    c.levels,
		Jobs:      c.jobs,
		Due:       c.due,
		CronFor:   c.cronFor,
		IdleFor:   c.idleFor,
		Spread:    c.spread,
		Change:    c.change,

		ClusterJobs:     c.clusterJobs,
		ClusterReplicas: c.clusterReplicas,
		ClusterFor:      c.clusterFor,
	}
	if err := admitLoad(c, &info); err != nil {
		return info, err
	}
	stopSampling := sampleLoad(&info.LoadSamples)
	defer stopSampling()

	if !c.skipLock {
		began := time.Now()
		if err := runLock(c); err != nil {
			return info, err
		}
		info.LockWall = time.Since(began)
		began = time.Now()
		if err := runProtocol(c); err != nil {
			return info, err
		}
		info.ProtocolWall = time.Since(began)
	}
	if !c.skipCron {
		began := time.Now()
		if err := runCron(c); err != nil {
			return info, err
		}
		info.CronWall = time.Since(began)
	}
	if !c.skipCluster {
		began := time.Now()
		if err := runCluster(c); err != nil {
			return info, err
		}
		info.ClusterWall = time.Since(began)
	}
	stopSampling()
	info.LoadEnd = loadavg()
	info.Finished = time.Now()
	return info, nil
}

// runLock builds the test binary and runs BenchmarkBatch and BenchmarkLock,
// teeing their output.
func runLock(c config) error {
	bin := filepath.Join(c.results, "bench.test")
	if err := command("go", "test", "-c", "-o", bin, ".").Run(); err != nil {
		return fmt.Errorf("building the lock benchmarks: %w", err)
	}
	cmdLog := filepath.Join(c.results, "cmds.jsonl")
	os.Remove(cmdLog)
	out, err := os.Create(filepath.Join(c.results, "lock.txt"))
	if err != nil {
		return err
	}
	defer out.Close()
	cmd := command(bin, "-test.run", "^$", "-test.bench", "^Benchmark(Lock|Batch)$",
		"-test.benchmem", "-test.benchtime", c.benchtime,
		"-rounds", fmt.Sprint(c.rounds), "-levels", c.levels, "-cmdlog", cmdLog)
	cmd.Stdout = io.MultiWriter(out, os.Stderr)
	fmt.Fprintf(os.Stderr, "benchrun: %s\n", strings.Join(cmd.Args, " "))
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("lock benchmarks: %w", err)
	}
	return nil
}

// cronLibs are the schedulers, in the order they run.
var cronLibs = []string{"ours", "gocron", "robfig"}

// cronRun is one scheduler's result: cronbench's own report, and what the
// kernel says the whole child process used. Error says why there is no
// report: the scheduler did not survive the run.
type cronRun struct {
	Result    json.RawMessage `json:",omitempty"`
	Error     string          `json:",omitempty"`
	ChildUser float64
	ChildSys  float64
	ChildRSS  int64 // max resident set, KiB
	Wall      time.Duration
}

// cronRuns is cron.json: every scheduler's idle run and burst run, and
// their runs of jobs that change (churn); ours' leased bursts, without
// and with spread starts.
type cronRuns struct {
	Idle, Burst   map[string]cronRun
	Churn, Leased map[string]cronRun `json:",omitempty"`
}

// runCron runs the idle children side by side (they are idle, so they
// hardly share the machine), then each scheduler's burst alone.
func runCron(c config) error {
	bin := filepath.Join(c.results, "cronbench")
	if err := command("go", "build", "-o", bin, "./cmd/cronbench").Run(); err != nil {
		return fmt.Errorf("building cronbench: %w", err)
	}
	runs := cronRuns{Idle: make(map[string]cronRun), Burst: make(map[string]cronRun)}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, lib := range append(slices.Clone(cronLibs), oursParseEach) {
		wg.Go(func() {
			args := []string{"-lib", lib, "-mode", "idle", "-jobs", fmt.Sprint(c.jobs), "-idle-for", c.idleFor.String()}
			if lib == oursParseEach {
				args[1] = "ours"
				args = append(args, "-parse-each")
			}
			r := runChild(bin, c.idleFor, args...)
			mu.Lock()
			runs.Idle[lib] = r
			mu.Unlock()
		})
	}
	wg.Wait()
	for _, lib := range cronLibs {
		runs.Burst[lib] = runChild(bin, c.cronFor, "-lib", lib, "-mode", "burst", "-jobs", fmt.Sprint(c.jobs),
			"-due", fmt.Sprint(c.due), "-for", c.cronFor.String())
	}
	runChanging(c, bin, &runs)
	return writeJSON(filepath.Join(c.results, "cron.json"), runs)
}

// runChild runs cronbench with args, for a run that lasts about d, and
// returns its report, or why there is none.
func runChild(bin string, d time.Duration, args ...string) cronRun {
	ctx, cancel := context.WithTimeout(context.Background(), d+3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = os.Stderr
	fmt.Fprintf(os.Stderr, "benchrun: %s\n", strings.Join(cmd.Args, " "))
	began := time.Now()
	err := cmd.Run()
	r := cronRun{Wall: time.Since(began)}
	if cmd.ProcessState != nil {
		if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
			r.ChildUser = seconds(ru.Utime)
			r.ChildSys = seconds(ru.Stime)
			r.ChildRSS = ru.Maxrss
		}
	}
	if err != nil {
		r.Error = err.Error()
		fmt.Fprintf(os.Stderr, "benchrun: %s: %v\n", strings.Join(args, " "), err)
		return r
	}
	r.Result = bytes.TrimSpace(stdout.Bytes())
	fmt.Fprintf(os.Stderr, "%s\n", r.Result)
	return r
}

func seconds(tv syscall.Timeval) float64 {
	return float64(tv.Sec) + float64(tv.Usec)/1e6
}

func command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	cmd.Stdout = os.Stderr
	cmd.Stderr = os.Stderr
	return cmd
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

type machine struct {
	CPUs     int
	Model    string
	Memory   string
	Kernel   string
	OS       string
	Go       string
	Redis    string
	Hostname string
}

func describeMachine() machine {
	m := machine{CPUs: runtime.NumCPU(), Go: runtime.Version()}
	m.Model = firstField("/proc/cpuinfo", "model name")
	m.Memory = firstField("/proc/meminfo", "MemTotal")
	m.Kernel = strings.TrimSpace(readString("/proc/sys/kernel/osrelease"))
	m.OS = strings.Trim(firstField("/etc/os-release", "PRETTY_NAME="), `"`)
	if out, err := exec.Command("redis-server", "--version").Output(); err == nil {
		m.Redis = strings.TrimSpace(string(out))
	}
	m.Hostname, _ = os.Hostname()
	return m
}

// firstField returns what follows key (and a ':' or nothing) on the first
// line of path that starts with it.
func firstField(path, key string) string {
	for line := range strings.SplitSeq(readString(path), "\n") {
		if rest, ok := strings.CutPrefix(line, key); ok {
			rest = strings.TrimSpace(rest)
			rest = strings.TrimPrefix(rest, ":")
			return strings.TrimSpace(rest)
		}
	}
	return "unknown"
}

func readString(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}

func loadavg() string {
	f := strings.Fields(readString("/proc/loadavg"))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// sampleLoad records the 1-minute load average every 10 s until the
// function it returns is called.
func sampleLoad(into *[]float64) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	sample := func() {
		var v float64
		if _, err := fmt.Sscan(readString("/proc/loadavg"), &v); err == nil {
			mu.Lock()
			*into = append(*into, v)
			mu.Unlock()
		}
	}
	wg.Go(func() {
		t := time.NewTicker(10 * time.Second)
		defer t.Stop()
		sample()
		for {
			select {
			case <-t.C:
				sample()
			case <-done:
				return
			}
		}
	})
	var once sync.Once
	return func() { once.Do(func() { close(done); wg.Wait() }) }
}

// busiest lists the processes that used the most CPU over one second, from
// top's second frame (its first counts from each process's start).
func busiest() []string {
	out, err := exec.Command("top", "-b", "-n", "2", "-d", "1", "-w", "200").Output()
	if err != nil {
		return nil
	}
	frames := bytes.Split(out, []byte("\ntop - "))
	var top []string
	header := false
	sc := bufio.NewScanner(bytes.NewReader(frames[len(frames)-1]))
	for sc.Scan() && len(top) < 5 {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) > 0 && f[0] == "PID":
			header = true
		case header && len(f) >= 12 && f[11] != "top" && f[8] != "0.0":
			top = append(top, f[11]+" "+f[8]+"%")
		}
	}
	return top
}

// moduleVersions lists the versions of the libraries measured.
func moduleVersions() []string {
	out, err := exec.Command("go", "list", "-m",
		"github.com/redis/go-redis/v9", "github.com/bsm/redislock",
		"github.com/go-redsync/redsync/v4", "github.com/go-co-op/gocron/v2",
		"github.com/robfig/cron/v3").Output()
	if err != nil {
		return []string{"go list -m failed: " + err.Error()}
	}
	return strings.Split(strings.TrimSpace(string(out)), "\n")
}

func libraryCommit() string {
	out, err := exec.Command("git", "-C", "..", "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return "unknown (not a git tree)"
	}
	commit := strings.TrimSpace(string(out))
	status, err := exec.Command("git", "-C", "..", "status", "--porcelain", "--", "lock", "cron", "interval").Output()
	if err == nil && len(bytes.TrimSpace(status)) > 0 {
		commit += " with uncommitted changes in lock/, cron/ or interval/"
	}
	return commit
}

var errNoResults = errors.New("no results")
