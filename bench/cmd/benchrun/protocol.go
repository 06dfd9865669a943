package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// runProtocol runs the root module's BenchmarkRunProtocol (package cron,
// whose claim and completion it calls directly), -rounds times, teeing its
// output to protocol.txt. It lives in the root module because it needs the
// records' unexported protocol.
func runProtocol(c config) error {
	out, err := os.Create(filepath.Join(c.results, "protocol.txt"))
	if err != nil {
		return err
	}
	defer out.Close()
	cmd := command("go", "test", "-run", "^$", "-bench", "^BenchmarkRunProtocol$", "-benchmem",
		"-benchtime", c.benchtime, "-count", fmt.Sprint(c.rounds), "./cron/")
	cmd.Dir = ".."
	cmd.Stdout = io.MultiWriter(out, os.Stderr)
	fmt.Fprintf(os.Stderr, "benchrun: (in ..) %s\n", strings.Join(cmd.Args, " "))
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("run protocol benchmark: %w", err)
	}
	return nil
}

// protocolLine is one line of BenchmarkRunProtocol's output.
var protocolLine = regexp.MustCompile(`^BenchmarkRunProtocol/([a-z-]+)(?:-\d+)?\s+(\d+)\s+(.*)$`)

// parseProtocol returns the runs of each way (record, bare-lease), in
// order: with -count, the n-th of one way ran next to the n-th of the
// other, so they pair as a round's do.
func parseProtocol(path string) (map[string][]sample, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	res := make(map[string][]sample)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		m := protocolLine.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		res[m[1]] = append(res[m[1]], sample{round: len(res[m[1]]), metrics: metrics(m[3])})
	}
	if len(res) == 0 {
		return nil, fmt.Errorf("%s: %w", path, errNoResults)
	}
	return res, sc.Err()
}

// metrics reads the value-unit pairs of a benchmark line.
func metrics(s string) map[string]float64 {
	out := make(map[string]float64)
	f := strings.Fields(s)
	for i := 0; i+1 < len(f); i += 2 {
		if v, err := strconv.ParseFloat(f[i], 64); err == nil {
			out[f[i+1]] = v
		}
	}
	return out
}

var protocolWays = []struct{ key, title string }{
	{"record", "record: claim + completion (the replica that runs)"},
	{"losing-claim", "record: a claim of a slot already done (each replica that loses)"},
	{"bare-lease", "bare per-slot lease (`TryLock`), before records"},
}

func renderProtocol(w *bytes.Buffer, res map[string][]sample, info runInfo) {
	pf := func(format string, args ...any) { fmt.Fprintf(w, format, args...) }
	pf("## A leased run's protocol (job records)\n\n")
	pf("A leased job's run is claimed in its record before it starts and recorded when it ends: two scripts, two round trips, where a leased job took one `TryLock` of a key per slot before it had records. ")
	pf("`BenchmarkRunProtocol` (package `cron`, in the root module: `go test -run XXX -bench RunProtocol ./cron/`) measures the claim and completion of a run of a fresh slot, without the runtime's scheduling, and the claim of a slot another run already recorded as done (what every other replica's tick of the slot costs), beside a bare `TryLock` of a fresh per-slot key, on a redis-server it starts; this run ran it with `-count %d -benchtime %s`. ", info.Rounds, info.Benchtime)
	pf("Round trips are counted by a wrapping client; server commands and script time come from `INFO commandstats` deltas (`usec` of `EVALSHA`, which includes the commands a script calls). Medians, with the range over the counts.\n\n")
	pf("| per run | µs | round trips | server commands | script time on the server, µs | B/run | allocs/run |\n")
	pf("|---|---|---|---|---|---|---|\n")
	for _, way := range protocolWays {
		ss := res[way.key]
		if len(ss) == 0 {
			continue
		}
		pf("| %s | %s | %.2f | %.2f | %s | %.0f | %.0f |\n", way.title,
			spread(values(ss, "ns/op"), "%.1f", 1e-3), median(values(ss, "rt/run")), median(values(ss, "srv/run")),
			spread(values(ss, "script-µs/run"), "%.1f", 1), median(values(ss, "B/op")), median(values(ss, "allocs/op")))
	}
	pf("\nTime per run, record ÷ bare lease: %s. ", pairedRatio(res["record"], res["bare-lease"], "ns/op"))
	pf("While a run goes on, its run lease costs one more round trip per third of `LeaseConfig.RunTTL`; `TestRunProtocolRoundTrips` asserts the 2 round trips per run on every test run. ")
	pf("What the extra server time buys: one run at a time under a heartbeat, retries, catch-up, pause, run-now and a record an operator can read.\n\n")
}
