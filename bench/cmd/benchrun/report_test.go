package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/wakuwaku-go/wakuwaku/bench/cronresult"
)

func TestThousands(t *testing.T) {
	for _, tc := range []struct {
		n    int64
		want string
	}{
		{0, "0"}, {999, "999"}, {1000, "1,000"}, {10000, "10,000"}, {100000, "100,000"},
		{1234567, "1,234,567"}, {-1234, "-1,234"},
	} {
		if got := thousands(tc.n); got != tc.want {
			t.Errorf("thousands(%d) = %q, want %q", tc.n, got, tc.want)
		}
	}
}

// TestRenderCron renders the cron section and its targets from made-up
// runs, one of which did not survive.
func TestRenderCron(t *testing.T) {
	result := func(r cronresult.Result) json.RawMessage {
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	runs := cronRuns{
		Idle: map[string]cronRun{
			"ours":   {Result: result(cronresult.Result{Lib: "ours", Mode: "idle", Jobs: 100000, HeapInusePerJob: 136, CPUPerHourS: 0.62})},
			"robfig": {Result: result(cronresult.Result{Lib: "robfig", Mode: "idle", Jobs: 100000, HeapInusePerJob: 1210, CPUPerHourS: 2.92})},
			"gocron": {Error: "signal: killed"},
		},
		Burst: map[string]cronRun{
			"ours":   {Result: result(cronresult.Result{Lib: "ours", Mode: "burst", Jobs: 100000, Due: 10000, Runs: 140000, Startup: 100000, LateP99: 12000})},
			"robfig": {Result: result(cronresult.Result{Lib: "robfig", Mode: "burst", Jobs: 100000, Due: 10000, Runs: 40000, LateP99: 196000})},
		},
	}
	var w bytes.Buffer
	if err := renderCron(&w, runs, runInfo{Jobs: 100000, Due: 10000}); err != nil {
		t.Fatalf("renderCron = %v", err)
	}
	renderCronTargets(&w, runs)
	out := w.String()
	for _, want := range []string{
		"100,000 jobs", "140,000 (100,000 at startup)", "gocron v2 | did not survive it: signal: killed",
		"| 5. 100,000 idle jobs: heap per job ≤ 170 B | 136 B (robfig/cron v3 1,210 B, gocron v2 did not survive it) | met |",
		"p99 start lateness ≤ 10 ms | 12.00 ms (robfig/cron v3 196.00 ms) | **missed** by 2.00 ms |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the report lacks %q:\n%s", want, out)
		}
	}
}
