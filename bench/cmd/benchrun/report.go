package main

import (
	"bufio"
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"github.com/wakuwaku-go/wakuwaku/bench/cronresult"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// notes is the part of the report that is written by hand: how the cases
// are made equivalent, and what was changed in the library and why.
//
//go:embed notes.md
var notes string

// lockLine is one line of BenchmarkLock's output.
var lockLine = regexp.MustCompile(`^BenchmarkLock/([a-z0-9]+)/p=(\d+)/([a-z-]+?)(?:#(\d+))?(?:-\d+)?\s+(\d+)\s+(.*)$`)

// sample is one run of one lock benchmark.
type sample struct {
	round   int
	metrics map[string]float64 // by unit: "ns/op", "allocs/op", ...
}

type lockKey struct {
	kase string
	p    int
	lib  string
}

func parseLock(path string) (map[lockKey][]sample, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	results := make(map[lockKey][]sample)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		m := lockLine.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		p, _ := strconv.Atoi(m[2])
		round := 0
		if m[4] != "" {
			round, _ = strconv.Atoi(m[4])
		}
		s := sample{round: round, metrics: make(map[string]float64)}
		f := strings.Fields(m[6])
		for i := 0; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				continue
			}
			s.metrics[f[i+1]] = v
		}
		k := lockKey{m[1], p, m[3]}
		results[k] = append(results[k], s)
	}
	if len(results) == 0 {
		return nil, fmt.Errorf("%s: %w", path, errNoResults)
	}
	return results, sc.Err()
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

func values(ss []sample, unit string) []float64 {
	var xs []float64
	for _, s := range ss {
		if v, ok := s.metrics[unit]; ok {
			xs = append(xs, v)
		}
	}
	return xs
}

// pairedRatios returns, for each round that measured both, a's metric over
// b's: the runs of one round were next to each other in time.
func pairedRatios(a, b []sample, unit string) []float64 {
	byRound := make(map[int]float64)
	for _, s := range b {
		if v, ok := s.metrics[unit]; ok && v != 0 {
			byRound[s.round] = v
		}
	}
	var rs []float64
	for _, s := range a {
		if v, ok := s.metrics[unit]; ok {
			if w, ok := byRound[s.round]; ok {
				rs = append(rs, v/w)
			}
		}
	}
	return rs
}

// ratio is the median of the paired ratios, with their range.
type ratio struct{ med, lo, hi float64 }

func pairedRatio(a, b []sample, unit string) ratio {
	rs := pairedRatios(a, b, unit)
	if len(rs) == 0 {
		return ratio{math.NaN(), math.NaN(), math.NaN()}
	}
	return ratio{median(rs), slices.Min(rs), slices.Max(rs)}
}

func (r ratio) String() string {
	if math.IsNaN(r.med) {
		return "–"
	}
	if r.lo == r.hi {
		return fmt.Sprintf("%.2f", r.med)
	}
	return fmt.Sprintf("**%.2f** (%.2f–%.2f)", r.med, r.lo, r.hi)
}

// commandRecord is a line of the -cmdlog file.
type commandRecord struct {
	Name  string           `json:"name"`
	N     int              `json:"n"`
	Sent  int64            `json:"sent"`
	Calls map[string]int64 `json:"calls"`
}

var cmdName = regexp.MustCompile(`^BenchmarkLock/([a-z0-9]+)/p=(\d+)/([a-z-]+?)(?:#\d+)?$`)

// commandMix returns, per case and library at parallelism p, the commands
// the server executed per operation, summed over every run.
func commandMix(path string, p int) (map[lockKey]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	type sum struct {
		n     int
		sent  int64
		calls map[string]int64
	}
	sums := make(map[lockKey]*sum)
	for line := range bytes.SplitSeq(b, []byte("\n")) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var r commandRecord
		if err := json.Unmarshal(line, &r); err != nil {
			return nil, err
		}
		m := cmdName.FindStringSubmatch(r.Name)
		if m == nil || m[2] != strconv.Itoa(p) {
			continue
		}
		k := lockKey{m[1], p, m[3]}
		s := sums[k]
		if s == nil {
			s = &sum{calls: make(map[string]int64)}
			sums[k] = s
		}
		s.n += r.N
		s.sent += r.Sent
		for c, n := range r.Calls {
			s.calls[c] += n
		}
	}
	mix := make(map[lockKey]string)
	for k, s := range sums {
		names := make([]string, 0, len(s.calls))
		for c := range s.calls {
			names = append(names, c)
		}
		sort.Strings(names)
		var parts []string
		for _, c := range names {
			parts = append(parts, fmt.Sprintf("%s %.2f", strings.ToUpper(c), float64(s.calls[c])/float64(s.n)))
		}
		mix[k] = fmt.Sprintf("%.2f sent: %s", float64(s.sent)/float64(s.n), strings.Join(parts, ", "))
	}
	return mix, nil
}

var libNames = map[string]string{
	"ours":        "wakuwaku (ours)",
	"ours-rwread": "wakuwaku RWLock read",
	"raw":         "raw go-redis",
	"bsm":         "bsm/redislock",
	"redsync":     "redsync (1 pool)",
	"gocron":      "gocron v2",
	"robfig":      "robfig/cron v3",
}

var caseTitles = map[string]string{
	"uncontended": "Uncontended acquire + release, distinct keys",
	"extend3":     "Acquire + 3 extends + release, distinct keys",
	"contended":   "Contended try-lock on one key (attempt, and release when it got the lock)",
	"busy":        "Busy try-lock: one key held by someone else all along (the busy path alone)",
}

var caseOrder = []string{"uncontended", "extend3", "contended", "busy"}

func render(dir string, info runInfo) ([]byte, error) {
	lockRes, lockErr := parseLock(filepath.Join(dir, "lock.txt"))
	mix1, _ := commandMix(filepath.Join(dir, "cmds.jsonl"), 1)
	var cronRuns map[string]cronRun
	cronErr := readJSON(filepath.Join(dir, "cron.json"), &cronRuns)

	var w bytes.Buffer
	pf := func(format string, args ...any) { fmt.Fprintf(&w, format, args...) }
	if overloaded(info) {
		pf("# Benchmarks (NOT A QUIET RUN: see the warning)\n\n")
	} else {
		pf("# Benchmarks\n\n")
	}
	pf("%s", loadWarning(info))
	pf("Side-by-side costs of wakuwaku's locks and cron runtime against the libraries its users would pick instead. ")
	pf("Written by `bench/run` (the `bench` module, `cmd/benchrun`); every number in the tables below comes from the one run described here (the notes at the end quote a few separate measurements, and say so). ")
	pf("Re-run it with `bench/run`; it takes about %s.\n\n", roundDuration(info.Finished.Sub(info.Started)))

	pf("## The run\n\n")
	pf("| | |\n|---|---|\n")
	pf("| date | %s – %s (UTC) |\n", info.Started.UTC().Format("2006-01-02 15:04:05"), info.Finished.UTC().Format("15:04:05"))
	pf("| command | `%s` |\n", strings.TrimSpace(info.Command))
	pf("| machine | %d CPUs, %s, %s memory |\n", info.Machine.CPUs, info.Machine.Model, info.Machine.Memory)
	pf("| system | %s, kernel %s |\n", info.Machine.OS, info.Machine.Kernel)
	pf("| Go | %s |\n", info.Machine.Go)
	pf("| Redis | %s |\n", info.Machine.Redis)
	pf("| wakuwaku | commit %s |\n", info.Library)
	for _, v := range info.Versions {
		f := strings.Fields(v)
		if len(f) == 2 {
			pf("| %s | %s |\n", f[0], f[1])
		}
	}
	pf("| load average (1, 5, 15 min) | at start %s; at end %s; 1-min samples every 10 s: %s |\n",
		info.LoadStart, info.LoadEnd, loadSummary(info.LoadSamples))
	if len(info.Busy) > 0 {
		pf("| busiest processes at start (%% of one CPU, over 1 s) | %s |\n", strings.Join(info.Busy, ", "))
	}
	pf("| lock benchmarks | %d rounds × every case and library, `-benchtime %s`, parallelism %s, then the batch, %d rounds; %s |\n",
		info.Rounds, info.Benchtime, info.Levels, info.Rounds, roundDuration(info.LockWall))
	pf("| run protocol | `-count %d`, `-benchtime %s`, %s |\n", info.Rounds, info.Benchtime, roundDuration(info.ProtocolWall))
	pf("| cron runs | %d jobs × %s per scheduler, %s |\n\n", info.Jobs, info.CronFor, roundDuration(info.CronWall))
	pf("%s\n\n", loadNote(info))

	if lockErr == nil || cronErr == nil {
		renderTargets(&w, dir, lockRes, cronRuns, info)
	}

	pf("## Locks\n\n")
	if lockErr != nil {
		pf("No lock results: %v\n\n", lockErr)
	} else {
		renderLock(&w, lockRes, mix1, info)
		renderAutoPipelined(&w, lockRes)
		if batch, err := parseBatch(filepath.Join(dir, "lock.txt")); err == nil {
			renderBatch(&w, batch, info)
		}
	}
	if proto, err := parseProtocol(filepath.Join(dir, "protocol.txt")); err == nil {
		renderProtocol(&w, proto, info)
	}

	pf("## Cron runtime\n\n")
	if cronErr != nil {
		pf("No cron results: %v\n\n", cronErr)
	} else if err := renderCron(&w, cronRuns, info); err != nil {
		return nil, err
	}

	pf("%s", notes)
	return w.Bytes(), nil
}

func roundDuration(d time.Duration) string {
	if d <= 0 {
		return "–"
	}
	return d.Round(time.Second).String()
}

func loadSummary(xs []float64) string {
	if len(xs) == 0 {
		return "none"
	}
	return fmt.Sprintf("min %.2f, median %.2f, max %.2f (%d samples)", slices.Min(xs), median(xs), slices.Max(xs), len(xs))
}

func loadNote(info runInfo) string {
	if len(info.LoadSamples) == 0 {
		return ""
	}
	m := median(info.LoadSamples)
	cpus := float64(info.Machine.CPUs)
	switch {
	case m > cpus:
		return fmt.Sprintf("**The machine was shared and busy during this run** (median load %.2f on %d CPUs, counting the benchmark itself and the redis-server it drives): other work ran beside it, so absolute times are inflated and noisy. The libraries were measured interleaved, round after round, on the same server and client, so each paired ratio compares runs made within seconds of each other under the same load; the ratios carry their range over the rounds.", m, info.Machine.CPUs)
	case m > cpus/2:
		return fmt.Sprintf("The machine was shared during this run (median load %.2f on %d CPUs, the benchmark itself included): absolute times are somewhat noisy; ratios are paired per round, with their range.", m, info.Machine.CPUs)
	}
	return fmt.Sprintf("The machine was mostly quiet (median load %.2f on %d CPUs, the benchmark itself included).", m, info.Machine.CPUs)
}

func levels(res map[lockKey][]sample, kase string) []int {
	seen := map[int]bool{}
	for k := range res {
		if k.kase == kase {
			seen[k.p] = true
		}
	}
	var ps []int
	for p := range seen {
		ps = append(ps, p)
	}
	slices.Sort(ps)
	return ps
}

var lockLibs = []string{"ours", "raw", "bsm", "redsync", "ours-rwread"}

func renderLock(w *bytes.Buffer, res map[lockKey][]sample, mix map[lockKey]string, info runInfo) {
	pf := func(format string, args ...any) { fmt.Fprintf(w, format, args...) }
	pf("Medians over the rounds; in parentheses the fastest and slowest round. Client CPU is this benchmark process's user + system time per operation (`getrusage`, so go-redis and the GC included); server CPU is redis-server's (`INFO cpu`). `rt/op`: round trips per operation, counted by the client's dialer (no library here pipelines, so also commands sent). `srv/op`: commands the server executed per operation (`INFO commandstats` deltas, so the commands a script calls count as well). Ratios are ours ÷ theirs per round, then the median (and range) over the rounds: below 1 means ours takes less.\n\n")
	for _, kase := range caseOrder {
		ps := levels(res, kase)
		if len(ps) == 0 {
			continue
		}
		pf("### %s\n\n", caseTitles[kase])
		contended := kase == "contended"
		if contended {
			pf("| p | library | attempts/s | got it / attempt | **cycles/s** | rt/attempt | srv/attempt | B/attempt | allocs/attempt |\n")
			pf("|---|---|---|---|---|---|---|---|---|\n")
		} else {
			pf("| p | library | µs/op | ops/s | B/op | allocs/op | rt/op | srv/op | client CPU µs/op | server CPU µs/op |\n")
			pf("|---|---|---|---|---|---|---|---|---|---|\n")
		}
		for _, p := range ps {
			for _, lib := range lockLibs {
				ss := res[lockKey{kase, p, lib}]
				if len(ss) == 0 {
					continue
				}
				ns := values(ss, "ns/op")
				if contended {
					pf("| %d | %s | %.0f | %.3f | %s | %.2f | %.2f | %.0f | %.1f |\n", p, libNames[lib],
						1e9/median(ns), median(values(ss, "ok/op")), spread(values(ss, "cycles/s"), "%.0f", 1),
						median(values(ss, "rt/op")), median(values(ss, "srv/op")),
						median(values(ss, "B/op")), median(values(ss, "allocs/op")))
				} else {
					pf("| %d | %s | %s | %.0f | %.0f | %.1f | %.2f | %.2f | %.1f | %.1f |\n", p, libNames[lib],
						spread(ns, "%.1f", 1e-3), 1e9/median(ns), median(values(ss, "B/op")),
						median(values(ss, "allocs/op")), median(values(ss, "rt/op")), median(values(ss, "srv/op")),
						median(values(ss, "cpu-µs/op")), median(values(ss, "srvcpu-µs/op")))
				}
			}
		}
		pf("\n")
		if contended {
			pf("Successful cycles per second, ours ÷ theirs (above 1 means ours gets the lock more often):\n\n")
		} else {
			pf("Time per operation and allocations, ours ÷ theirs:\n\n")
		}
		pf("| p | ours/raw | ours/bsm | ours/redsync | allocs ours/raw | allocs ours/bsm | allocs ours/redsync |\n")
		pf("|---|---|---|---|---|---|---|\n")
		for _, p := range ps {
			ours := res[lockKey{kase, p, "ours"}]
			unit := "ns/op"
			if contended {
				unit = "cycles/s"
			}
			pf("| %d", p)
			for _, peer := range []string{"raw", "bsm", "redsync"} {
				pf(" | %s", pairedRatio(ours, res[lockKey{kase, p, peer}], unit))
			}
			for _, peer := range []string{"raw", "bsm", "redsync"} {
				pf(" | %s", pairedRatio(ours, res[lockKey{kase, p, peer}], "allocs/op"))
			}
			pf(" |\n")
		}
		pf("\n")
		if kase == "uncontended" {
			pf("Our RWLock read cycle beside our Lock cycle (time, RWLock read ÷ Lock):")
			for _, p := range ps {
				pf(" p=%d %s;", p, pairedRatio(res[lockKey{kase, p, "ours-rwread"}], res[lockKey{kase, p, "ours"}], "ns/op"))
			}
			pf(" a read lease runs a longer script (server time, readers' sorted set) in the same one round trip.\n\n")
		}
	}
	if len(mix) > 0 {
		pf("### Round trips and commands per operation (p=1)\n\n")
		pf("What each library sends per operation (round trips, counted by the dialer) and what the server executes for it (`INFO commandstats`, per operation; commands called by scripts included):\n\n")
		pf("| case | library | round trips sent: server commands per op |\n|---|---|---|\n")
		for _, kase := range caseOrder {
			for _, lib := range lockLibs {
				if m, ok := mix[lockKey{kase, 1, lib}]; ok {
					pf("| %s | %s | %s |\n", kase, libNames[lib], m)
				}
			}
		}
		pf("\n")
	}
}

// spread formats the median of xs with its range, each scaled.
func spread(xs []float64, format string, scale float64) string {
	if len(xs) == 0 {
		return "–"
	}
	med := fmt.Sprintf(format, median(xs)*scale)
	if len(xs) == 1 {
		return med
	}
	return fmt.Sprintf("%s ("+format+"–"+format+")", med, slices.Min(xs)*scale, slices.Max(xs)*scale)
}

func decodeCron(runs map[string]cronRun) (map[string]cronresult.Result, error) {
	out := make(map[string]cronresult.Result)
	for lib, r := range runs {
		var res cronresult.Result
		if err := json.Unmarshal(r.Result, &res); err != nil {
			return nil, fmt.Errorf("cron result of %s: %w", lib, err)
		}
		out[lib] = res
	}
	return out, nil
}

func renderCron(w *bytes.Buffer, runs map[string]cronRun, info runInfo) error {
	pf := func(format string, args ...any) { fmt.Fprintf(w, format, args...) }
	res, err := decodeCron(runs)
	if err != nil {
		return err
	}
	pf("Each scheduler ran alone in a child process of its own: %d jobs, each on the spec `* * * * * *` (every second, on the second) doing nothing but note how late it started, for %s. ", info.Jobs, info.CronFor)
	pf("CPU is the child's user + system time from just before the jobs were made to the end of the run (`getrusage`); the whole child, startup and measuring included, is beside it. ")
	pf("Heap per job is `HeapInuse` after two GCs, between two ticks with the scheduler running, minus the same before the jobs were made, over the jobs (the jobs' own values included); live heap is `HeapAlloc` the same way; stacks are goroutine stacks the same way. ")
	pf("Late is a run's start minus the second it was due, over every run on a slot.\n\n")
	pf("| scheduler | CPU s (window) | CPU %% of a core | CPU s (whole child) | heap B/job | live heap B/job | stack B/job | runs | late p50 ms | late p99 ms | late max ms |\n")
	pf("|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, lib := range cronLibs {
		r, ok := res[lib]
		if !ok {
			continue
		}
		run := runs[lib]
		cpu := r.UserS + r.SysS
		runsNote := fmt.Sprint(r.Runs)
		if r.Startup > 0 {
			runsNote = fmt.Sprintf("%d (%d at startup)", r.Runs, r.Startup)
		}
		pf("| %s | %.3f | %.2f | %.3f | %.0f | %.0f | %.0f | %s | %.2f | %.2f | %.2f |\n",
			libNames[lib], cpu, 100*cpu/r.For, run.ChildUser+run.ChildSys, r.HeapInusePerJob, r.HeapAllocPerJob,
			r.StackPerJob, runsNote, r.LateP50/1e3, r.LateP99/1e3, r.LateMax/1e3)
	}
	pf("\n")
	ours, ok := res["ours"]
	if !ok {
		return nil
	}
	pf("| ours ÷ | CPU | heap per job | live heap per job | late p50 | late p99 |\n|---|---|---|---|---|---|\n")
	for _, peer := range []string{"gocron", "robfig"} {
		r, ok := res[peer]
		if !ok {
			continue
		}
		pf("| %s | **%.2f** | **%.2f** | %.2f | %.2f | %.2f |\n", libNames[peer],
			(ours.UserS+ours.SysS)/(r.UserS+r.SysS), ours.HeapInusePerJob/r.HeapInusePerJob,
			ours.HeapAllocPerJob/r.HeapAllocPerJob, ours.LateP50/r.LateP50, ours.LateP99/r.LateP99)
	}
	pf("\n")
	return nil
}

// renderTargets checks the targets against this run.
func renderTargets(w *bytes.Buffer, dir string, lockRes map[lockKey][]sample, cronRuns map[string]cronRun, info runInfo) {
	pf := func(format string, args ...any) { fmt.Fprintf(w, format, args...) }
	pf("## Targets\n\n")
	pf("Each target, as the ratio measured in this run (median of the per-round paired ratios, with the range over the rounds). A number first is the goal's number in issue 15; the rows without one are the standing targets of the earlier comparisons.\n\n")
	pf("| target | measured | |\n|---|---|---|\n")
	verdict := func(ok bool, by string) string {
		if ok {
			return "met"
		}
		return "**missed** " + by
	}
	renderLockTargets(w, dir, lockRes, info)
	res, err := decodeCron(cronRuns)
	if err == nil {
		if ours, ok := res["ours"]; ok {
			for _, peer := range []string{"gocron", "robfig"} {
				r, ok := res[peer]
				if !ok {
					continue
				}
				cpu := (ours.UserS + ours.SysS) / (r.UserS + r.SysS)
				heap := ours.HeapInusePerJob / r.HeapInusePerJob
				pf("| cron: less CPU than %s | ours/%s %.2f (%.3f s vs %.3f s) | %s |\n", libNames[peer], peer, cpu,
					ours.UserS+ours.SysS, r.UserS+r.SysS, verdict(cpu < 1, fmt.Sprintf("by %.0f%%", (cpu-1)*100)))
				pf("| cron: less heap per job than %s | ours/%s %.2f (%.0f B vs %.0f B) | %s |\n", libNames[peer], peer, heap,
					ours.HeapInusePerJob, r.HeapInusePerJob, verdict(heap < 1, fmt.Sprintf("by %.0f%%", (heap-1)*100)))
			}
		}
	}
	pf("\n")
}
