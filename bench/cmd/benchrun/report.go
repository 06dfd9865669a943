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
	var crons cronRuns
	cronErr := readJSON(filepath.Join(dir, "cron.json"), &crons)
	if cronErr == nil && len(crons.Idle) == 0 && len(crons.Burst) == 0 {
		cronErr = fmt.Errorf("cron.json: %w", errNoResults)
	}

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
	pf("| cron runs | %s jobs per scheduler: idle for %s, side by side; then a burst of %s due at once every 5 s, for %s, each alone; then jobs added and removed, and leased bursts with and without spread starts; %s |\n",
		thousands(int64(info.Jobs)), info.IdleFor, thousands(int64(info.Due)), info.CronFor, roundDuration(info.CronWall))
	if info.ClusterJobs > 0 {
		pf("| cluster cost | %s jobs due every second on %s replicas, a %s window for each scheduler and count, each alone; %s |\n",
			thousands(int64(info.ClusterJobs)), info.ClusterReplicas, info.ClusterFor, roundDuration(info.ClusterWall))
	}
	pf("\n%s\n\n", loadNote(info))

	if lockErr == nil || cronErr == nil {
		renderTargets(&w, dir, lockRes, crons, info)
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
	} else if err := renderCron(&w, crons, info); err != nil {
		return nil, err
	}

	renderCluster(&w, dir, info)

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

// loadNote says what the load during the run means. The median counts the
// benchmark's own client and the redis-server it drives, which keep two
// cores busy by themselves at the higher parallelism levels; only the load
// at the start (see loadWarning) tells of other work.
func loadNote(info runInfo) string {
	if len(info.LoadSamples) == 0 {
		return ""
	}
	m := median(info.LoadSamples)
	const paired = "The libraries were measured interleaved, round after round, on the same server and client, so each paired ratio compares runs made within seconds of each other; the ratios carry their range over the rounds."
	if overloaded(info) {
		return fmt.Sprintf("**Other work ran beside this run**: the load at its start was above %.0f per CPU (see above), and its median was %.2f on %d CPUs, so absolute times are inflated and noisy. %s", loadPerCPU, m, info.Machine.CPUs, paired)
	}
	return fmt.Sprintf("The machine was quiet at the start (see the load above). During the run the median load was %.2f on %d CPUs: that is the benchmark itself, whose client goroutines and the redis-server they drive keep both cores busy at p=16 and p=64, so absolute times carry the noise of a machine at full use. %s", m, info.Machine.CPUs, paired)
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
		if r.Error != "" {
			continue
		}
		var res cronresult.Result
		if err := json.Unmarshal(r.Result, &res); err != nil {
			return nil, fmt.Errorf("cron result of %s: %w", lib, err)
		}
		out[lib] = res
	}
	return out, nil
}

// thousands formats n with a comma between groups of three digits.
func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	if neg {
		b.WriteByte('-')
	}
	for i, d := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(d)
	}
	return b.String()
}

// bytesPerJob formats a heap figure per job, in whole bytes.
func bytesPerJob(v float64) string { return thousands(int64(math.Round(v))) }

func renderCron(w *bytes.Buffer, runs cronRuns, info runInfo) error {
	pf := func(format string, args ...any) { fmt.Fprintf(w, format, args...) }
	idle, err := decodeCron(runs.Idle)
	if err != nil {
		return err
	}
	burst, err := decodeCron(runs.Burst)
	if err != nil {
		return err
	}
	failed := func(runs map[string]cronRun, lib string) {
		if r, ok := runs[lib]; ok && r.Error != "" {
			pf("| %s | did not survive it: %s |\n", libNames[lib], r.Error)
		}
	}

	pf("### Idle: %s jobs waiting\n\n", thousands(int64(info.Jobs)))
	pf("Each scheduler in a child process of its own, side by side for %s: %s jobs, each on one daily spec due about 12 hours later (ours with `WithoutStartupRun`, so nothing runs); ours twice, its jobs sharing one package-level `Interval`, and each job with the `Interval` of its own spec text, parsed by `interval.MustCron` one by one as from a database (`-parse-each`). ", info.IdleFor, thousands(int64(info.Jobs)))
	pf("Heap per job is `HeapInuse` after two GCs at the end, minus the same before the jobs were made, over the jobs (the jobs' own values included); live heap is `HeapAlloc` the same way. ")
	pf("CPU is the child's user + system time (`getrusage`) from a GC right after the start to the end, which holds the Go runtime's forced collection of every 2 minutes, scaled to an hour. Start is the time to make and start the jobs.\n\n")
	pf("| scheduler | heap B/job | live heap B/job | CPU s per idle hour | start s | goroutines | max RSS MiB |\n|---|---|---|---|---|---|---|\n")
	for _, lib := range cronLibs {
		r, ok := idle[lib]
		if !ok {
			failed(runs.Idle, lib)
			continue
		}
		pf("| %s | %s | %s | %.2f | %.2f | %s | %s |\n", libNames[lib], bytesPerJob(r.HeapInusePerJob), bytesPerJob(r.HeapAllocPerJob),
			r.CPUPerHourS, r.StartS, thousands(int64(r.Goroutines)), thousands(runs.Idle[lib].ChildRSS/1024))
	}
	parseEachRow(w, idle, runs)
	pf("\n")

	pf("### Burst: %s of the %s jobs due at one instant\n\n", thousands(int64(info.Due)), thousands(int64(info.Jobs)))
	pf("Each scheduler alone in a child process of its own, for %s: %s jobs on the spec `*/5 * * * * *` (every 5 seconds, all at once), the other %s on the daily spec, each run doing nothing but note how late it started. ",
		info.CronFor, thousands(int64(info.Due)), thousands(int64(info.Jobs-info.Due)))
	pf("Late is a run's start minus the instant it was due, over every run of every burst: ours takes the instant from `Tick.Scheduled`; robfig and gocron don't hand it to the job, so theirs is the nearest multiple of 5 s. Early counts runs that started before their instant. ")
	pf("Ours also runs every job once at startup, as documented, before the first burst; those runs are left out. CPU is the child's from just before the start to the end.\n\n")
	pf("| scheduler | runs | late p50 ms | late p99 ms | late max ms | early | CPU s | start s |\n|---|---|---|---|---|---|---|---|\n")
	for _, lib := range cronLibs {
		r, ok := burst[lib]
		if !ok {
			failed(runs.Burst, lib)
			continue
		}
		runsNote := thousands(r.Runs)
		if r.Startup > 0 {
			runsNote = fmt.Sprintf("%s (%s at startup)", thousands(r.Runs), thousands(r.Startup))
		}
		pf("| %s | %s | %.2f | %.2f | %.2f | %s | %.3f | %.2f |\n", libNames[lib], runsNote,
			r.LateP50/1e3, r.LateP99/1e3, r.LateMax/1e3, thousands(r.Early), r.UserS+r.SysS, r.StartS)
	}
	pf("\n")

	pf("| ours ÷ | heap per idle job | CPU per idle hour | burst late p50 | burst late p99 |\n|---|---|---|---|---|\n")
	for _, peer := range []string{"gocron", "robfig"} {
		pf("| %s | %s | %s | %s | %s |\n", libNames[peer],
			quotient(idle, peer, func(r cronresult.Result) float64 { return r.HeapInusePerJob }),
			quotient(idle, peer, func(r cronresult.Result) float64 { return r.CPUPerHourS }),
			quotient(burst, peer, func(r cronresult.Result) float64 { return r.LateP50 }),
			quotient(burst, peer, func(r cronresult.Result) float64 { return r.LateP99 }))
	}
	pf("\n")
	return renderChanging(w, runs, info)
}

// quotient formats ours ÷ peer of a figure, or a dash if either is missing.
func quotient(res map[string]cronresult.Result, peer string, of func(cronresult.Result) float64) string {
	ours, ok1 := res["ours"]
	r, ok2 := res[peer]
	if !ok1 || !ok2 || of(r) == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f", of(ours)/of(r))
}

// renderTargets checks the targets against this run.
func renderTargets(w *bytes.Buffer, dir string, lockRes map[lockKey][]sample, crons cronRuns, info runInfo) {
	pf := func(format string, args ...any) { fmt.Fprintf(w, format, args...) }
	pf("## Targets\n\n")
	pf("Each target, as the ratio measured in this run (median of the per-round paired ratios, with the range over the rounds). A number first is the goal's number in issue 15; the rows without one are the standing targets of the earlier comparisons.\n\n")
	pf("| target | measured | |\n|---|---|---|\n")
	renderLockTargets(w, dir, lockRes, info)
	renderCronTargets(w, crons)
	pf("\n")
}
