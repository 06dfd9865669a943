package main

import (
	"fmt"
	"strconv"
	"strings"
)

// A run measures paired ratios between libraries that share two cores with
// redis-server, so other work on the machine skews them, and a report made
// under load gets quoted as if it had not been. benchrun therefore refuses
// to start on a busy machine rather than mark the results afterwards: a
// refused run costs a minute of waiting, a misleading BENCHMARKS.md costs
// a wrong conclusion. -force is for a machine that is never quiet; its report
// then carries the load in its title and in a warning above everything else.

// loadPerCPU is the 1-minute load average per CPU above which a run must be
// forced.
const loadPerCPU = 1.0

// admitLoad checks the 1-minute load average taken at the start of the run
// against loadPerCPU, and returns an error (nothing is measured or written)
// when it is above and c.force is not set.
func admitLoad(c config, info *runInfo) error {
	load, ok := startLoad(*info)
	if !ok || load <= loadPerCPU*float64(info.Machine.CPUs) {
		return nil
	}
	if !c.force {
		return fmt.Errorf("the 1-minute load average is %.2f on %d CPUs, above %.0f per CPU: other work would skew every figure. "+
			"Wait until the machine is quiet (cat /proc/loadavg), or give -force to measure anyway, with a warning in the report",
			load, info.Machine.CPUs, loadPerCPU)
	}
	info.Forced = true
	return nil
}

// startLoad returns the 1-minute load average at the start of the run.
func startLoad(info runInfo) (float64, bool) {
	f := strings.Fields(info.LoadStart)
	if len(f) == 0 {
		return 0, false
	}
	v, err := strconv.ParseFloat(f[0], 64)
	return v, err == nil
}

// overloaded reports whether the run started above loadPerCPU, forced or
// not (a report rewritten from an older run's outputs is judged the same).
func overloaded(info runInfo) bool {
	load, ok := startLoad(info)
	return ok && info.Machine.CPUs > 0 && load > loadPerCPU*float64(info.Machine.CPUs)
}

// loadWarning is what a report made on a busy machine says before anything
// else: nothing, or a warning block.
func loadWarning(info runInfo) string {
	if !overloaded(info) {
		return ""
	}
	load, _ := startLoad(info)
	how := "It was forced with `-force`."
	if !info.Forced {
		how = "It was made by a benchrun that did not check the load."
	}
	return fmt.Sprintf("> [!WARNING]\n> **NOT A QUIET RUN. When this run started, the 1-minute load average was %.2f on %d CPUs, above %.0f per CPU: other work shared the machine. %s "+
		"Every time below is inflated by that work, and a ratio between libraries can be off by more than its range shows. "+
		"Don't quote these figures as the project's benchmarks: run `bench/run` again on a quiet machine.**\n\n",
		load, info.Machine.CPUs, loadPerCPU, how)
}
