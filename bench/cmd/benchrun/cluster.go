package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/wakuwaku-go/wakuwaku/bench/cronresult"
)

// clusterLibs are the schedulers of the cluster cost, in the order they
// run: ours, gocron with a Redis locker, and the bare lease.
var clusterLibs = []string{"ours", "gocron", "setnx"}

var clusterNames = map[string]string{
	"ours":   "ours (`cron.Leased`)",
	"gocron": "gocron v2 + Redis locker (redsync)",
	"setnx":  "bare `SET NX PX` per replica per tick",
}

// clusterRuns is cluster.json: each scheduler's run at each number of
// replicas, keyed "lib/replicas".
type clusterRuns map[string]cronRun

// runCluster runs clustercost for every scheduler and number of replicas,
// each alone.
func runCluster(c config) error {
	bin := filepath.Join(c.results, "clustercost")
	if err := command("go", "build", "-o", bin, "./cmd/clustercost").Run(); err != nil {
		return fmt.Errorf("building clustercost: %w", err)
	}
	replicas, err := replicaCounts(c.clusterReplicas)
	if err != nil {
		return err
	}
	runs := clusterRuns{}
	for _, n := range replicas {
		for _, lib := range clusterLibs {
			runs[lib+"/"+strconv.Itoa(n)] = runChild(bin, c.clusterFor, "-lib", lib, "-replicas", strconv.Itoa(n),
				"-jobs", strconv.Itoa(c.clusterJobs), "-for", c.clusterFor.String())
		}
	}
	return writeJSON(filepath.Join(c.results, "cluster.json"), runs)
}

func replicaCounts(s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("-cluster-replicas %q: want counts such as 1,3,10", s)
		}
		out = append(out, n)
	}
	return out, nil
}

// renderCluster writes the cluster cost section from cluster.json.
func renderCluster(w *bytes.Buffer, dir string, info runInfo) {
	pf := func(format string, args ...any) { fmt.Fprintf(w, format, args...) }
	var runs clusterRuns
	if err := readJSON(filepath.Join(dir, "cluster.json"), &runs); err != nil {
		return
	}
	res := map[string]cronresult.Cluster{}
	var replicas []int
	for key, r := range runs {
		if r.Error != "" {
			continue
		}
		var c cronresult.Cluster
		if err := json.Unmarshal(r.Result, &c); err != nil {
			continue
		}
		res[key] = c
		if !slices.Contains(replicas, c.Replicas) {
			replicas = append(replicas, c.Replicas)
		}
	}
	slices.Sort(replicas)
	pf("## Cluster cost: the same jobs on several replicas\n\n")
	pf("Each scheduler alone, in a child process of its own (`cmd/clustercost`) with its own redis-server: ")
	pf("%s jobs due every second on each of 1 to %d replicas, in-process, each replica with its own client and connection pool; ", thousands(int64(info.ClusterJobs)), slices.Max(append(replicas, 1)))
	pf("after a warm-up the server's statistics are reset and the window lasts %s. ", info.ClusterFor)
	pf("Ours runs `cron.Leased` jobs with the built-in lease; gocron v2 runs `CronJob(\"* * * * * *\", true)` jobs with a distributed locker on redsync, as gocron's Redis locker is (one try, released after the run, so a replica that ticks after the run ended runs the slot again); ")
	pf("the bare lease is one `SET <job>:<second> NX PX 2000` per replica per tick, never released: the floor of what a once-per-slot decision costs. ")
	pf("Server µs is INFO commandstats' `usec` of the commands the clients sent (a script's own commands are inside its time), over the job-slots due; a command that the scripts send too is counted at its average cost, and ours' looks (a replica that does not own a slot reads the record with one `HMGET`, as the scripts do) at their own cost, measured on the window's records after it; commands likewise; Redis CPU is the server's user + system time over the window. ")
	pf("Once, twice and missed count job-slots, all replicas together. Late is a run's start after its second.\n\n")
	pf("| scheduler | replicas | server µs / job-slot | commands / job-slot | Redis CPU (cores) | once | twice | missed | late p50 ms | late p99 ms |\n|---|---|---|---|---|---|---|---|---|---|\n")
	for _, n := range replicas {
		for _, lib := range clusterLibs {
			key := lib + "/" + strconv.Itoa(n)
			c, ok := res[key]
			if !ok {
				if r, ok := runs[key]; ok && r.Error != "" {
					pf("| %s | %d | did not survive it: %s |||||||\n", clusterNames[lib], n, r.Error)
				}
				continue
			}
			var cmds int64
			for _, k := range c.Commands {
				cmds += k
			}
			slots := float64(max(c.Slots, 1))
			pf("| %s | %d | %.1f | %.2f | %.2f | %s | %s | %s | %.1f | %.1f |\n", clusterNames[lib], n,
				c.ServerUS/slots, float64(cmds)/slots, c.RedisCPUS/max(c.For, 1),
				thousands(c.Once), thousands(c.Twice), thousands(c.Missed), c.LateP50/1e3, c.LateP99/1e3)
		}
	}
	var looks []string
	for _, n := range replicas {
		if c, ok := res["ours/"+strconv.Itoa(n)]; ok && c.LookUS > 0 {
			looks = append(looks, fmt.Sprintf("%.2f µs at %d replicas", c.LookUS, n))
		}
	}
	if len(looks) > 0 {
		pf("\nA look of ours cost the server %s.\n", strings.Join(looks, ", "))
	}
	pf("\n")
}
