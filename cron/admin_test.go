package cron_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/wakuwaku-go/wakuwaku/cron"
)

// TestRunRecordJSON checks a run's JSON: its duration in whole
// milliseconds under a name that says so, only for a run that finished, and
// back again.
func TestRunRecordJSON(t *testing.T) {
	started := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name string
		run  cron.RunRecord
		want string // in the JSON
		not  string // not in it
	}{
		{"finished", cron.RunRecord{Slot: "s", Replica: "r1", Attempt: 1, Started: started, Finished: started.Add(1500 * time.Millisecond), Duration: 1500 * time.Millisecond, Outcome: "ok"},
			`"durationMs":1500`, `"duration"`},
		{"finished at once", cron.RunRecord{Slot: "s", Replica: "r1", Attempt: 1, Started: started, Finished: started, Outcome: "ok"},
			`"durationMs":0`, `"duration"`},
		{"in progress", cron.RunRecord{Slot: "s", Replica: "r1", Attempt: 2, Trigger: cron.TriggerRetry, Started: started, Deadline: started.Add(time.Minute)},
			`"deadline":"2026-03-01T12:01:00Z"`, `"durationMs"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := json.Marshal(tc.run)
			if err != nil {
				t.Fatalf("Marshal = %v", err)
			}
			if !strings.Contains(string(b), tc.want) || strings.Contains(string(b), tc.not) {
				t.Errorf("Marshal = %s, want %s in it and no %s", b, tc.want, tc.not)
			}
			var back cron.RunRecord
			if err := json.Unmarshal(b, &back); err != nil {
				t.Fatalf("Unmarshal(%s) = %v", b, err)
			}
			if back != tc.run {
				t.Errorf("Unmarshal(Marshal(%+v)) = %+v", tc.run, back)
			}
		})
	}
	// Inside a JobStatus, through its pointers, too.
	st := cron.JobStatus{Job: "report", Last: &cron.RunRecord{Started: started, Finished: started.Add(time.Second), Duration: time.Second, Outcome: "ok"}}
	b, err := json.Marshal(st)
	if err != nil || !strings.Contains(string(b), `"last":{`) || !strings.Contains(string(b), `"durationMs":1000`) {
		t.Errorf("Marshal(JobStatus) = %s, %v; want last with durationMs 1000", b, err)
	}
}
