package main

import (
	"bytes"
	"fmt"
	"math"
	"path/filepath"
	"strings"

	"github.com/wakuwaku-go/wakuwaku/bench/cronresult"
)

// verdictOf says whether a target was met, and by how much it was missed.
func verdictOf(ok bool, by string) string {
	if ok {
		return "met"
	}
	if by == "" {
		return "**missed**"
	}
	return "**missed** " + by
}

// atMost judges a ratio whose target is at most bound.
func atMost(r ratio, bound float64) string {
	if math.IsNaN(r.med) {
		return "not measured"
	}
	return verdictOf(r.med <= bound, "by "+percent(r.med/bound-1))
}

// percent writes a shortfall as a percentage, with a decimal when it is
// under 1%, so that a narrow miss doesn't read "by 0%".
func percent(f float64) string {
	if f < 0.01 {
		return fmt.Sprintf("%.1f%%", f*100)
	}
	return fmt.Sprintf("%.0f%%", f*100)
}

// atLeast judges a ratio whose target is at least bound.
func atLeast(r ratio, bound float64) string {
	if math.IsNaN(r.med) {
		return "not measured"
	}
	return verdictOf(r.med >= bound, "by "+percent(1-r.med/bound))
}

// renderLockTargets writes the Targets rows of the goals this
// harness measures but the cron runs (goals 1–4, 6, 7), then the standing
// targets of the lock comparisons.
func renderLockTargets(w *bytes.Buffer, dir string, lockRes map[lockKey][]sample, info runInfo) {
	pf := func(format string, args ...any) { fmt.Fprintf(w, format, args...) }
	uncontended := func(p int, lib string) []sample { return lockRes[lockKey{"uncontended", p, lib}] }
	throughput := []int{16, 64}

	// Goal 1: the uncontended cycle at or below raw go-redis, with fewer
	// allocations.
	for _, p := range throughput {
		ours := uncontended(p, "ours")
		if len(ours) == 0 {
			continue
		}
		r := pairedRatio(ours, uncontended(p, "raw"), "ns/op")
		pf("| 1. uncontended cycle, p=%d: ours ≤ 1.00× raw go-redis | ours/raw %s | %s |\n", p, r, atMost(r, 1.00))
		a, b := median(values(ours, "allocs/op")), median(values(uncontended(p, "raw"), "allocs/op"))
		pf("| 1. uncontended cycle, p=%d: fewer allocations than raw go-redis | %.0f vs %.0f allocs/op | %s |\n", p, a, b,
			verdictOf(a < b, fmt.Sprintf("by %.0f allocs", a-b+1)))
	}
	// Goal 2: contended successful cycles at least raw's; the busy path
	// costs the server no more than raw's SET NX.
	for _, p := range throughput {
		ours := lockRes[lockKey{"contended", p, "ours"}]
		if len(ours) == 0 {
			continue
		}
		r := pairedRatio(ours, lockRes[lockKey{"contended", p, "raw"}], "cycles/s")
		pf("| 2. contended try-lock, p=%d: successful cycles/s ≥ raw go-redis's | ours/raw %s | %s |\n", p, r, atLeast(r, 1.00))
	}
	for _, p := range throughput {
		ours := lockRes[lockKey{"busy", p, "ours"}]
		if len(ours) == 0 {
			continue
		}
		r := pairedRatio(ours, lockRes[lockKey{"busy", p, "raw"}], "srvcpu-µs/op")
		pf("| 2. busy try-lock, p=%d: server CPU per attempt ≤ raw's `SET NX` | ours/raw %s | %s |\n", p, r, atMost(r, 1.00))
	}
	// Goal 3: autopipelined, ours within apTarget of raw.
	for _, p := range throughput {
		ours := uncontended(p, "ours-ap")
		if len(ours) == 0 {
			continue
		}
		r := pairedRatio(ours, uncontended(p, "raw-ap"), "ns/op")
		pf("| 3. autopipelined uncontended cycle, p=%d: ours within %.2f× of raw go-redis autopipelined | ours/raw %s | %s |\n", p, apTarget, r, atMost(r, apTarget))
	}
	// Goal 4: the batch of 100 names, batchTarget times faster.
	if batch, err := parseBatch(filepath.Join(dir, "lock.txt")); err == nil {
		for _, n := range batchNets {
			r := batchRatio(batch, n.key)
			if math.IsNaN(r.med) {
				continue
			}
			pf("| 4. 100 names, %s: `TryLockMany` + `ReleaseMany` ≥ %d× faster than 100 × (`TryLock` + `Release`) | sequential ÷ batch %s | %s |\n",
				n.title, batchTarget, r, atLeast(r, batchTarget))
		}
	}
	// Goal 6: the leased run's protocol, a claim and a completion.
	if proto, err := parseProtocol(filepath.Join(dir, "protocol.txt")); err == nil {
		rec, bare := proto["record"], proto["bare-lease"]
		if len(rec) > 0 && len(bare) > 0 {
			trips := median(values(rec, "rt/run"))
			pf("| 6. leased run: a claim and a completion, one round trip each, beside the bare lease | %.2f round trips and %.1f server commands per run; bare lease %.2f and %.1f | %s |\n",
				trips, median(values(rec, "srv/run")), median(values(bare, "rt/run")), median(values(bare, "srv/run")),
				verdictOf(trips <= 2, fmt.Sprintf("by %.2f round trips", trips-2)))
		}
	}
	// Goal 7: a quiet machine at the start.
	if load, ok := startLoad(info); ok {
		how := ""
		if info.Forced {
			how = "(forced with `-force`)"
		}
		pf("| 7. load at the start ≤ %.0f per CPU, or the run refused | 1-min load %.2f on %d CPUs | %s |\n", loadPerCPU, load, info.Machine.CPUs,
			verdictOf(!overloaded(info), how))
	}

	// The standing targets of the lock comparisons.
	for _, p := range levels(lockRes, "uncontended") {
		ours := uncontended(p, "ours")
		if p == 1 {
			r := pairedRatio(ours, uncontended(p, "raw"), "ns/op")
			pf("| uncontended cycle, p=1: within 1.10× of raw go-redis | ours/raw %s | %s |\n", r, atMost(r, 1.10))
		}
		for _, peer := range []string{"bsm", "redsync"} {
			r := pairedRatio(ours, uncontended(p, peer), "ns/op")
			pf("| uncontended cycle, p=%d: faster than %s | ours/%s %s | %s |\n", p, libNames[peer], peer, r,
				verdictOf(r.med < 1, fmt.Sprintf("by %.0f%%", (r.med-1)*100)))
		}
		for _, peer := range []string{"bsm", "redsync"} {
			a := median(values(ours, "allocs/op"))
			b := median(values(uncontended(p, peer), "allocs/op"))
			pf("| uncontended cycle, p=%d: fewer allocations than %s | %.0f vs %.0f allocs/op | %s |\n", p, libNames[peer], a, b,
				verdictOf(a < b, fmt.Sprintf("by %.0f allocs", a-b+1)))
		}
	}
}

// The bounds of goal 5: heap per idle job, and the p99 lateness of a burst.
const (
	idleHeapTarget = 170.0 // bytes per job
	burstP99Target = 10.0  // ms
)

// renderCronTargets writes the Targets rows of goal 5, the cron runtime at
// many jobs, then the standing targets of the cron comparison: less heap
// per idle job and less CPU per idle hour than robfig/cron and gocron.
func renderCronTargets(w *bytes.Buffer, runs cronRuns) {
	pf := func(format string, args ...any) { fmt.Fprintf(w, format, args...) }
	idle, err := decodeCron(runs.Idle)
	if err != nil {
		return
	}
	burst, err := decodeCron(runs.Burst)
	if err != nil {
		return
	}
	// peers says what robfig and gocron measured of a figure, or that
	// they did not survive.
	peers := func(res map[string]cronresult.Result, all map[string]cronRun, format func(float64) string, of func(cronresult.Result) float64) string {
		var parts []string
		for _, peer := range []string{"robfig", "gocron"} {
			if r, ok := res[peer]; ok {
				parts = append(parts, libNames[peer]+" "+format(of(r)))
			} else if _, ran := all[peer]; ran {
				parts = append(parts, libNames[peer]+" did not survive it")
			}
		}
		if len(parts) == 0 {
			return ""
		}
		return " (" + strings.Join(parts, ", ") + ")"
	}
	heap := func(r cronresult.Result) float64 { return r.HeapInusePerJob }
	cpu := func(r cronresult.Result) float64 { return r.CPUPerHourS }
	p99 := func(r cronresult.Result) float64 { return r.LateP99 / 1e3 }
	if ours, ok := idle["ours"]; ok {
		pf("| 5. %s idle jobs: heap per job ≤ %.0f B | %s B%s | %s |\n", thousands(int64(ours.Jobs)), idleHeapTarget,
			bytesPerJob(ours.HeapInusePerJob), peers(idle, runs.Idle, func(v float64) string { return bytesPerJob(v) + " B" }, heap),
			verdictOf(ours.HeapInusePerJob <= idleHeapTarget, fmt.Sprintf("by %.0f B", ours.HeapInusePerJob-idleHeapTarget)))
		pf("| 5. %s idle jobs: CPU per idle hour | %.2f s%s | reported |\n", thousands(int64(ours.Jobs)),
			ours.CPUPerHourS, peers(idle, runs.Idle, func(v float64) string { return fmt.Sprintf("%.2f s", v) }, cpu))
	}
	if ours, ok := burst["ours"]; ok {
		late := p99(ours)
		pf("| 5. %s of %s jobs due at one instant: p99 start lateness ≤ %.0f ms | %.2f ms%s | %s |\n",
			thousands(int64(ours.Due)), thousands(int64(ours.Jobs)), burstP99Target, late, peers(burst, runs.Burst, func(v float64) string { return fmt.Sprintf("%.2f ms", v) }, p99),
			verdictOf(late <= burstP99Target && ours.Early == 0, burstMiss(late, ours.Early)))
	}
	ours, ok := idle["ours"]
	if !ok {
		return
	}
	for _, peer := range []string{"gocron", "robfig"} {
		r, ok := idle[peer]
		if !ok {
			continue
		}
		c, h := ours.CPUPerHourS/r.CPUPerHourS, ours.HeapInusePerJob/r.HeapInusePerJob
		pf("| cron: less CPU per idle hour than %s | ours/%s %.2f (%.2f s vs %.2f s) | %s |\n", libNames[peer], peer, c,
			ours.CPUPerHourS, r.CPUPerHourS, verdictOf(c < 1, fmt.Sprintf("by %.0f%%", (c-1)*100)))
		pf("| cron: less heap per idle job than %s | ours/%s %.2f (%s B vs %s B) | %s |\n", libNames[peer], peer, h,
			bytesPerJob(ours.HeapInusePerJob), bytesPerJob(r.HeapInusePerJob), verdictOf(h < 1, fmt.Sprintf("by %.0f%%", (h-1)*100)))
	}
}

// burstMiss says by how much a burst missed its target.
func burstMiss(p99 float64, early int64) string {
	var why []string
	if p99 > burstP99Target {
		why = append(why, fmt.Sprintf("by %.2f ms", p99-burstP99Target))
	}
	if early > 0 {
		why = append(why, fmt.Sprintf("%s runs started early", thousands(early)))
	}
	return strings.Join(why, "; ")
}
