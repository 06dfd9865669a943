package main

import (
	"bytes"
	"fmt"
	"math"
	"path/filepath"
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
	return verdictOf(r.med <= bound, fmt.Sprintf("by %.0f%%", (r.med/bound-1)*100))
}

// atLeast judges a ratio whose target is at least bound.
func atLeast(r ratio, bound float64) string {
	if math.IsNaN(r.med) {
		return "not measured"
	}
	return verdictOf(r.med >= bound, fmt.Sprintf("by %.0f%%", (1-r.med/bound)*100))
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
