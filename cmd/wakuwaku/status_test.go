package main

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/wakuwaku-go/wakuwaku/cron"
	"github.com/wakuwaku-go/wakuwaku/internal/redistest"
	"github.com/wakuwaku-go/wakuwaku/interval"
	"github.com/wakuwaku-go/wakuwaku/lock"
)

// errSweep is a failure whose text has what HTML escaping would change,
// and more than the table shows.
var errSweep = errors.New(`sweep: <b>3</b> invoices & "7 credits" still locked by the nightly export, which holds them until it finishes`)

// TestStatusFailure runs a leased job that fails twice, its two attempts:
// the table shows that its slot failed after both, and the failure's text
// cut to one column; the JSON has the text as it is and the duration in
// milliseconds.
func TestStatusFailure(t *testing.T) {
	srv := redistest.Start(t)
	db := lock.NewDB(srv.Client(t))
	job := cron.Func("sweep", interval.AtLeast(time.Hour), func(context.Context, cron.Tick) error { return errSweep },
		cron.WithLease(cron.LeaseConfig{DB: db, Attempts: 2, Backoff: 10 * time.Millisecond}))
	rt, err := cron.Start([]cron.Job{job}, cron.WithReplica("replica-1"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Shutdown(context.Background()) })
	admin := cron.NewAdmin(db)
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, err := admin.Status(t.Context(), "sweep")
		if err == nil && st.SlotState == "failed" && st.Last != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the slot of sweep did not fail within 10s: %+v, %v", st, err)
		}
		time.Sleep(10 * time.Millisecond)
	}

	code, out, errs := wakuwaku(t, srv, "status")
	table, _, _ := strings.Cut(strings.TrimSpace(out), "\n\n") // then the live replicas
	lines := strings.Split(table, "\n")
	if code != 0 || len(lines) != 2 {
		t.Fatalf("status = %d, %q, %q; want a header and a row", code, out, errs)
	}
	if !strings.HasSuffix(lines[0], "LAST FAILURE") {
		t.Errorf("status header = %q, want a LAST FAILURE column last", lines[0])
	}
	cut := errSweep.Error()[:failureWidth-1] + "…"
	for _, want := range []string{" error (failed, 2 attempts) ", " " + cut} {
		if !strings.Contains(lines[1], want) {
			t.Errorf("status row = %q, want %q in it", lines[1], want)
		}
	}
	if !strings.HasSuffix(lines[1], cut) {
		t.Errorf("status row = %q, want it to end with the cut failure", lines[1])
	}

	code, out, errs = wakuwaku(t, srv, "status", "-json", "sweep")
	if code != 0 {
		t.Fatalf("status -json sweep = %d, %q", code, errs)
	}
	for _, want := range []string{`"error": "` + strings.ReplaceAll(errSweep.Error(), `"`, `\"`) + `"`, `"durationMs": `, `"slotState": "failed"`, `"attempts": 2`} {
		if !strings.Contains(out, want) {
			t.Errorf("status -json sweep:\n%s\nwant %s in it", out, want)
		}
	}
	for _, unwanted := range []string{`\u003c`, `\u0026`, `"duration":`} {
		if strings.Contains(out, unwanted) {
			t.Errorf("status -json sweep:\n%s\nhas %s", out, unwanted)
		}
	}
	var st cron.JobStatus
	if err := json.Unmarshal([]byte(out), &st); err != nil || st.LastFailure == nil || st.LastFailure.Error != errSweep.Error() || st.Last.Duration < 0 || st.Last.Finished.IsZero() {
		t.Errorf("status -json sweep reads back as %+v, %v; want the failure's text", st, err)
	}
}

// TestCut checks how the table cuts a failure's text.
func TestCut(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"short", "short"},
		{"two\nlines", "two lines"},
		{"a\t\tb  c", "a b c"},
		{"0123456789", "0123456789"},
		{"0123456789a", "012345678…"},
		{"日本語のエラーが長く続く", "日本語のエラーが長…"},
		{"bell\x07ring", "bell ring"},
	} {
		if got := cut(tc.in, 10); got != tc.want {
			t.Errorf("cut(%q, 10) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestStatusEscapesRecordStrings runs a leased job on a replica whose name
// holds a terminal's escape sequence and a tab: status shows it quoted in
// the table's replica column and the history's, so the output holds no
// control byte and every row keeps its columns. The table's replica, slot
// and running columns used to print it raw.
func TestStatusEscapesRecordStrings(t *testing.T) {
	srv := redistest.Start(t)
	db := lock.NewDB(srv.Client(t))
	const replica = "pod\x1b[2J\tevil"
	job := cron.Func("sweep", interval.AtLeast(time.Hour), func(context.Context, cron.Tick) error { return nil },
		cron.WithLease(cron.LeaseConfig{DB: db}))
	rt, err := cron.Start([]cron.Job{job}, cron.WithReplica(replica))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Shutdown(context.Background()) })
	admin := cron.NewAdmin(db)
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, err := admin.Status(t.Context(), "sweep")
		if err == nil && st.Last != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("sweep did not run within 10s: %+v, %v", st, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, args := range [][]string{{"status"}, {"status", "sweep"}} {
		code, out, errs := wakuwaku(t, srv, args...)
		if code != 0 {
			t.Fatalf("%v = %d, %q", args, code, errs)
		}
		if strings.ContainsAny(out, "\x1b\t") {
			t.Errorf("%v printed a control byte of the replica's name raw:\n%q", args, out)
		}
		if !strings.Contains(out, `"pod\x1b[2J\tevil"`) {
			t.Errorf("%v output = %q; want the replica's name quoted", args, out)
		}
	}
}
