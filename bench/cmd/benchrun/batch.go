package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"regexp"
	"strconv"
)

// batchLine is one line of BenchmarkBatch's output.
var batchLine = regexp.MustCompile(`^BenchmarkBatch/([a-z]+)/([a-z]+)(?:#(\d+))?(?:-\d+)?\s+(\d+)\s+(.*)$`)

// batchKey is one case of BenchmarkBatch: a network and a way.
type batchKey struct{ net, way string }

func parseBatch(path string) (map[batchKey][]sample, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	res := make(map[batchKey][]sample)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		m := batchLine.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		round := 0
		if m[3] != "" {
			round, _ = strconv.Atoi(m[3])
		}
		k := batchKey{m[1], m[2]}
		res[k] = append(res[k], sample{round: round, metrics: metrics(m[5])})
	}
	if len(res) == 0 {
		return nil, fmt.Errorf("%s: %w", path, errNoResults)
	}
	return res, sc.Err()
}

// batchNets are BenchmarkBatch's networks, in the report's order.
var batchNets = []struct{ key, title string }{
	{"loopback", "loopback"},
	{"delayed", "delayed (200 µs sleep per write)"},
}

// batchTarget is how many times faster the batch must be than the
// sequential calls.
const batchTarget = 20

// batchRatio is the sequential calls' time over the batch's, paired per
// round: how many times faster the batch is.
func batchRatio(res map[batchKey][]sample, net string) ratio {
	return pairedRatio(res[batchKey{net, "sequential"}], res[batchKey{net, "many"}], "ns/op")
}

func renderBatch(w *bytes.Buffer, res map[batchKey][]sample, info runInfo) {
	pf := func(format string, args ...any) { fmt.Fprintf(w, format, args...) }
	pf("### Batch: 100 names at once\n\n")
	pf("`BenchmarkBatch`: one op is 100 free names taken, then released, either by `TryLockMany` + `ReleaseMany` (one round trip each on one server) or by 100 × (`TryLock` + `Release`), one after the other. ")
	pf("The two ways run next to each other in each round (%d in this run), on the same server, over loopback and through a client whose every write sleeps 200 µs first, as a request waits on a network between hosts (a sleep lasts longer than asked on a loaded machine: the sequential case's time over its 200 round trips gives the round trip it came to). Medians, with the fastest and slowest round.\n\n", info.Rounds)
	pf("| network | way | ms/op | round trip, µs | round trips/op | B/op | allocs/op |\n")
	pf("|---|---|---|---|---:|---:|---:|\n")
	for _, n := range batchNets {
		for _, way := range []struct{ key, title string }{{"sequential", "100 × TryLock + Release"}, {"many", "TryLockMany + ReleaseMany"}} {
			ss := res[batchKey{n.key, way.key}]
			if len(ss) == 0 {
				continue
			}
			rt := "–"
			if way.key == "sequential" {
				if trips := median(values(ss, "rt/op")); trips > 0 {
					rt = fmt.Sprintf("%.0f", median(values(ss, "ns/op"))/trips/1e3)
				}
			}
			pf("| %s | %s | %s | %s | %.0f | %.0f | %.0f |\n", n.title, way.title, spread(values(ss, "ns/op"), "%.2f", 1e-6), rt,
				median(values(ss, "rt/op")), median(values(ss, "B/op")), median(values(ss, "allocs/op")))
		}
	}
	pf("\nHow many times faster the batch is (sequential ÷ batch, per round):")
	for _, n := range batchNets {
		pf(" %s %s;", n.key, batchRatio(res, n.key))
	}
	pf(" the issue's goal is %d×. ", batchTarget)
	pf("The batch saves round trips, not server work: each name still costs the server one `SET … NX GET PX` (or one `GET` + `DEL`) from Lua, about 1.5 µs, so 100 names in two calls can't go below about 0.3 ms, and the ratio is the sequential calls' 200 round trips over that. ")
	if ss := res[batchKey{"loopback", "sequential"}]; len(ss) > 0 && median(values(ss, "rt/op")) > 0 {
		pf("In this run a round trip of the sequential way took %.0f µs over loopback. ", median(values(ss, "ns/op"))/median(values(ss, "rt/op"))/1e3)
	}
	pf("On a quiet machine it costs 15–20 µs (measured apart), 3–4 ms for the 200, so over loopback the ratio can fall below %d×; wherever a round trip costs more (a network between hosts, a loaded client), it rises. On a Cluster the batch is one round trip per master, sent to all masters at once.\n\n", batchTarget)
}
