package main

import (
	"bytes"
	"fmt"
)

// apTarget is the bound of ours over the raw baseline, both autopipelined.
const apTarget = 1.05

// apLibs are the libraries of the autopipelining table: each autopipelined
// one beside itself over the plain client.
var apLibs = []string{"ours", "ours-ap", "raw", "raw-ap"}

func init() {
	libNames["ours-ap"] = "wakuwaku (ours), autopipelined"
	libNames["raw-ap"] = "raw go-redis, autopipelined"
}

// renderAutoPipelined writes the section on go-redis's AutoPipeliner as the
// client, from the autopipelined libraries' runs of BenchmarkLock.
func renderAutoPipelined(w *bytes.Buffer, res map[lockKey][]sample) {
	pf := func(format string, args ...any) { fmt.Fprintf(w, format, args...) }
	if len(res[lockKey{"uncontended", 16, "ours-ap"}])+len(res[lockKey{"uncontended", 64, "ours-ap"}]) == 0 {
		return
	}
	pf("### Autopipelined: go-redis's AutoPipeliner as the client\n\n")
	pf("Ours and the raw baseline again, each over the blocking autopipeliner of the same client (`client.AutoPipeline()`, go-redis's default options: one ordered stream of batches, no flush delay), in the same rounds as the cases above, interleaved with them, so each ratio is paired per round. ")
	pf("The autopipeliner sends the commands that concurrent callers give it while a batch is on the wire as the next batch, in one write: `rt/op` counts those writes, so below 1 it means several callers' commands shared a round trip. ")
	pf("When to use it with our locks, and its caveats: [docs/locks.md](docs/locks.md#autopipelining).\n\n")
	for _, kase := range []string{"uncontended", "busy"} {
		ps := levels(res, kase)
		var rows []string
		for _, p := range ps {
			for _, lib := range apLibs {
				ss := res[lockKey{kase, p, lib}]
				if len(ss) == 0 || len(res[lockKey{kase, p, "ours-ap"}]) == 0 {
					continue
				}
				ns := values(ss, "ns/op")
				rows = append(rows, fmt.Sprintf("| %d | %s | %s | %.0f | %.3f | %.2f | %.0f | %.1f | %.1f | %.1f |\n", p, libNames[lib],
					spread(ns, "%.1f", 1e-3), 1e9/median(ns), median(values(ss, "rt/op")), median(values(ss, "srv/op")),
					median(values(ss, "B/op")), median(values(ss, "allocs/op")),
					median(values(ss, "cpu-µs/op")), median(values(ss, "srvcpu-µs/op"))))
			}
		}
		if len(rows) == 0 {
			continue
		}
		pf("%s:\n\n", map[string]string{"uncontended": "Uncontended acquire + release, distinct keys", "busy": "Busy try-lock (the key held by someone else all along)"}[kase])
		pf("| p | library | µs/op | ops/s | rt/op | srv/op | B/op | allocs/op | client CPU µs/op | server CPU µs/op |\n")
		pf("|---|---|---|---|---|---|---|---|---|---|\n")
		for _, r := range rows {
			pf("%s", r)
		}
		pf("\n| p | ours ÷ raw, both autopipelined | ours autopipelined ÷ ours | raw autopipelined ÷ raw | server CPU per op, ours ÷ raw, both autopipelined |\n|---|---|---|---|---|\n")
		for _, p := range ps {
			oursAP := res[lockKey{kase, p, "ours-ap"}]
			if len(oursAP) == 0 {
				continue
			}
			rawAP := res[lockKey{kase, p, "raw-ap"}]
			pf("| %d | %s | %s | %s | %s |\n", p, pairedRatio(oursAP, rawAP, "ns/op"),
				pairedRatio(oursAP, res[lockKey{kase, p, "ours"}], "ns/op"),
				pairedRatio(rawAP, res[lockKey{kase, p, "raw"}], "ns/op"),
				pairedRatio(oursAP, rawAP, "srvcpu-µs/op"))
		}
		pf("\n")
	}
	pf("With one caller (p=1) there is nothing to batch: each command goes alone, and the hand-off to the autopipeliner's flusher goroutine is added to its latency. With many (p=16, p=64) the round trips are shared and the client and server spend less per command; what is left is mostly the server's own work per command, which the last column compares.\n\n")
}
