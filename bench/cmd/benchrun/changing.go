package main

import (
	"bytes"
	"fmt"
	"time"

	"github.com/wakuwaku-go/wakuwaku/bench/cronresult"
)

// This file holds the cron runs of issue 28: jobs added and removed while
// a scheduler runs, jobs that parse their own specs, and leased jobs due
// at once, without and with spread starts.

// oursParseEach is ours in the idle run with a spec parsed per job.
const oursParseEach = "ours-parse-each"

func init() {
	libNames[oursParseEach] = "wakuwaku (ours), a spec parsed per job"
}

// runChanging runs each scheduler's churn alone, then ours' leased burst
// without spread and with c.spread.
func runChanging(c config, bin string, runs *cronRuns) {
	runs.Churn = make(map[string]cronRun)
	for _, lib := range cronLibs {
		runs.Churn[lib] = runChild(bin, time.Minute, "-lib", lib, "-mode", "churn", "-jobs", fmt.Sprint(c.jobs),
			"-change", fmt.Sprint(c.change))
	}
	runs.Leased = make(map[string]cronRun)
	for key, spread := range map[string]time.Duration{"none": 0, "spread": c.spread} {
		runs.Leased[key] = runChild(bin, c.cronFor, "-lib", "ours", "-mode", "leased", "-jobs", fmt.Sprint(c.jobs),
			"-due", fmt.Sprint(c.due), "-for", c.cronFor.String(), "-spread", spread.String())
	}
}

// renderChanging writes the sections of those runs, if the run made them.
func renderChanging(w *bytes.Buffer, runs cronRuns, info runInfo) error {
	pf := func(format string, args ...any) { fmt.Fprintf(w, format, args...) }
	if len(runs.Churn) > 0 {
		churn, err := decodeCron(runs.Churn)
		if err != nil {
			return err
		}
		pf("### Jobs that change: %s added, then removed, on %s running\n\n", thousands(int64(info.Change)), thousands(int64(info.Jobs)))
		pf("Each scheduler alone in a child process of its own (`-mode churn`): %s idle jobs on the daily spec, started; then %s more added one at a time while it runs, then %s of the first removed one at a time. ",
			thousands(int64(info.Jobs)), thousands(int64(info.Change)), thousands(int64(info.Change)))
		pf("Ours: `Runtime.Add` and `Runtime.Remove`, each job holding its own `interval.Interval`; robfig: `AddFunc` and `Remove`; gocron: `NewJob` and `RemoveJob`. Time is the mean per call, wall clock; heap per job is `HeapInuse` after two GCs, over the jobs there are (the jobs' own values included).\n\n")
		pf("| scheduler | µs per add | µs per remove | heap B/job started | after the adds | after the removals |\n|---|---|---|---|---|---|\n")
		for _, lib := range cronLibs {
			r, ok := churn[lib]
			if !ok {
				if cr, ran := runs.Churn[lib]; ran && cr.Error != "" {
					pf("| %s | did not survive it: %s |\n", libNames[lib], cr.Error)
				}
				continue
			}
			pf("| %s | %.2f | %.2f | %s | %s | %s |\n", libNames[lib], r.AddUS, r.RemoveUS, bytesPerJob(r.HeapInusePerJob),
				bytesPerJob(r.HeapAfterAddPerJob), bytesPerJob(r.HeapAfterRemovePerJob))
		}
		pf("\n")
	}
	if len(runs.Leased) > 0 {
		leased, err := decodeCron(runs.Leased)
		if err != nil {
			return err
		}
		pf("### Spread starts: %s leased jobs due at one instant, over Redis\n\n", thousands(int64(info.Due)))
		pf("Ours alone (`-mode leased`), over a redis-server of its own, for %s: %s jobs, %s of them leased, on `*/5 * * * * *` without a startup run, the others idle; once without spread, once with `WithSpread(%s)`. ",
			info.CronFor, thousands(int64(info.Jobs)), thousands(int64(info.Due)), info.Spread)
		pf("Late is when a run began `Process`, after its claim, minus when it was due (`Tick.Scheduled`: the slot's start, plus the job's offset with spread), so a claim's wait for a connection of go-redis's default pool and for the server is in it. ")
		pf("Skipped counts ticks whose claim failed (the pool's timeout) or came too late for the slot. Redis CPU is the server's user + system time over the window, and its busiest second, in cores.\n\n")
		pf("| spread | runs | skipped | late p50 ms | late p99 ms | late max ms | Redis CPU s | Redis busiest second, cores | our CPU s |\n|---|---|---|---|---|---|---|---|---|\n")
		for _, key := range []string{"none", "spread"} {
			r, ok := leased[key]
			if !ok {
				if cr, ran := runs.Leased[key]; ran && cr.Error != "" {
					pf("| %s | did not survive it: %s |\n", key, cr.Error)
				}
				continue
			}
			spread := "none"
			if r.SpreadS > 0 {
				spread = (time.Duration(r.SpreadS * float64(time.Second))).String()
			}
			pf("| %s | %s | %s | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f |\n", spread, thousands(r.Runs), thousands(r.Skipped),
				r.LateP50/1e3, r.LateP99/1e3, r.LateMax/1e3, r.RedisCPUS, r.RedisPeakCPU, r.UserS+r.SysS)
		}
		pf("\n")
	}
	return nil
}

// parseEachRow writes the idle table's row of ours with a spec parsed per
// job, if the run made it.
func parseEachRow(w *bytes.Buffer, idle map[string]cronresult.Result, runs cronRuns) {
	r, ok := idle[oursParseEach]
	if !ok {
		return
	}
	fmt.Fprintf(w, "| %s | %s | %s | %.2f | %.2f | %s | %s |\n", libNames[oursParseEach], bytesPerJob(r.HeapInusePerJob), bytesPerJob(r.HeapAllocPerJob),
		r.CPUPerHourS, r.StartS, thousands(int64(r.Goroutines)), thousands(runs.Idle[oursParseEach].ChildRSS/1024))
}
