package main

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/wakuwaku-go/wakuwaku/cron"
	"github.com/wakuwaku-go/wakuwaku/internal/redistest"
	"github.com/wakuwaku-go/wakuwaku/lock"
)

// TestStatusHistory checks that status with a job's name prints its
// schedule, last success and recent runs, newest first.
func TestStatusHistory(t *testing.T) {
	srv := redistest.Start(t)
	startReport(t, srv, 2)
	admin := cron.NewAdmin(lock.NewDB(srv.Client(t)))
	// The completion is recorded right after the run that startReport
	// waited for.
	deadline := time.Now().Add(10 * time.Second)
	for {
		if st, err := admin.Status(t.Context(), "hourly-report"); err == nil && len(st.History) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no run in hourly-report's history within 10s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	code, out, errs := wakuwaku(t, srv, "status", "hourly-report")
	if code != 0 {
		t.Fatalf("status hourly-report = %d, %q", code, errs)
	}
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^schedule: +at least 1h0m0s$`),
		regexp.MustCompile(`(?m)^last success: +\d\d:\d\d:\d\dZ \((just now|\d+s ago)\)$`),
		regexp.MustCompile(`(?m)^last 1 runs, newest first:$`),
		regexp.MustCompile(`(?m)^SLOT +STARTED +REPLICA +TRIGGER +ATTEMPT +LAG +DURATION +OUTCOME +ERROR$`),
		regexp.MustCompile(`(?m)^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z +\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ +replica-[12] +schedule +1 +\d+(\.\d+)?m?s +\d+(\.\d+)?[mµ]?s +ok +-$`),
	} {
		if !want.MatchString(out) {
			t.Errorf("status hourly-report:\n%s\nwant a line matching %s", out, want)
		}
	}
	if _, out, _ := wakuwaku(t, srv, "status"); strings.Contains(out, "last success") {
		t.Errorf("status of every job:\n%s\nwant no job's history", out)
	}
}

// TestPrintHistoryFailedSlot prints a job whose slot used up its attempts,
// the last of which timed out with a long, two-line error.
func TestPrintHistoryFailedSlot(t *testing.T) {
	at := time.Date(2026, time.March, 1, 12, 0, 0, 0, time.UTC)
	st := cron.JobStatus{
		Job: "sync", Slot: "2026-03-01T12:00:00Z", SlotState: "failed", Attempts: 3,
		History: []cron.RunRecord{{
			Slot: "2026-03-01T12:00:00Z", Replica: "web-1", Trigger: cron.TriggerRetry, Attempt: 3, Scheduled: at, Started: at.Add(2 * time.Second),
			Finished: at.Add(62 * time.Second), Duration: time.Minute, Outcome: "timeout",
			Error: "cron: run deadline exceeded (1m0s): " + strings.Repeat("x", 100) + "\nsecond line",
		}},
	}
	var out strings.Builder
	if err := printHistory(&out, st); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"slot 2026-03-01T12:00:00Z:  failed, attempts used up (3)",
		"last success:  none recorded",
		"2026-03-01T12:00:00Z  2026-03-01 12:00:02Z  web-1    retry    3        2s   1m0s      timeout  cron: run deadline exceeded (1m0s): xxxxxxxxxxxxxxxxxxxxxxx…",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("printHistory:\n%s\nwant %q", out.String(), want)
		}
	}
	if strings.Contains(out.String(), "second line") {
		t.Errorf("printHistory:\n%s\nwant the error's first line only", out.String())
	}
}

// TestPrintHistorySkippedSlot prints a job whose history records a slot
// skipped, and a slot that its completion closed as failed because its
// retry would have come after its claim window: each with its reason.
func TestPrintHistorySkippedSlot(t *testing.T) {
	at := time.Date(2026, time.March, 1, 12, 0, 0, 0, time.UTC)
	st := cron.JobStatus{
		Job: "sync", Slot: "2026-03-01T12:00:00Z", SlotState: "failed", Attempts: 1,
		History: []cron.RunRecord{{
			Slot: "2026-03-01T13:00:00Z", Replica: "web-2", Trigger: cron.TriggerSchedule, Started: at.Add(time.Hour),
			Finished: at.Add(time.Hour), Outcome: "skipped", Reason: "still running",
		}, {
			Slot: "2026-03-01T12:00:00Z", Replica: "web-1", Trigger: cron.TriggerSchedule, Attempt: 1, Scheduled: at, Started: at,
			Finished: at.Add(70 * time.Minute), Duration: 70 * time.Minute, Outcome: "error", Error: "boom", Reason: "claim window over",
		}},
	}
	var out strings.Builder
	if err := printHistory(&out, st); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"slot 2026-03-01T12:00:00Z:  failed, claim window over (1)",
		"2026-03-01T13:00:00Z  2026-03-01 13:00:00Z  web-2    schedule  0        -    0s        skipped (still running)",
		"error (claim window over)  boom",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("printHistory:\n%s\nwant %q", out.String(), want)
		}
	}
}
