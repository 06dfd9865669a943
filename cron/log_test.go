package cron_test

import (
	"context"
	"log/slog"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/wakuwaku-go/wakuwaku/cron"
	"github.com/wakuwaku-go/wakuwaku/interval"
)

// wantRecord checks that the records with message msg are n, at level, and
// that each has the attributes in attrs (a value of "" only has to be
// there); it returns them.
func wantRecord(t *testing.T, logs *records, msg string, n int, level slog.Level, attrs ...string) []slog.Record {
	t.Helper()
	got := logs.find(msg)
	if len(got) != n {
		t.Errorf("%d records %q, want %d", len(got), msg, n)
	}
	for _, r := range got {
		if r.Level != level {
			t.Errorf("%q logged at %v, want %v", msg, r.Level, level)
		}
		for i := 0; i+1 < len(attrs); i += 2 {
			v := attr(r, attrs[i])
			switch {
			case v.Kind() == slog.KindAny && v.Any() == nil:
				t.Errorf("%q has no attribute %q; record: %v", msg, attrs[i], r)
			case attrs[i+1] != "" && v.String() != attrs[i+1]:
				t.Errorf("%q has %s=%v, want %s", msg, attrs[i], v, attrs[i+1])
			}
		}
	}
	return got
}

// TestLogRuns checks what the replica that runs a job logs: the runtime's
// start, each run's start and end at Info (a failure and a panic at
// Error), with the run's slot, the replica and the outcome, and the
// shutdown, which waits for the run in progress.
func TestLogRuns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logs records
		job := &testJob{name: "report", every: interval.AtLeast(10 * time.Second), process: func(_ context.Context, tick cron.Tick) error {
			switch tick.Run {
			case 2:
				return errBoom
			case 3:
				panic(errKaput)
			case 4:
				time.Sleep(10 * time.Second) // in progress at Shutdown
			}
			return nil
		}}
		idle := &testJob{name: "idle", every: interval.AtLeast(time.Hour).WithoutStartupRun()}
		rt, err := cron.Start([]cron.Job{job, idle}, cron.WithLogger(slog.New(&logs)), cron.WithReplica("replica-7"))
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(35 * time.Second)
		if err := rt.Shutdown(t.Context()); err != nil {
			t.Errorf("Shutdown = %v", err)
		}

		started := wantRecord(t, &logs, "cron runtime started", 1, slog.LevelInfo, "replica", "replica-7", "jobs", "2")
		if len(started) == 1 {
			names, _ := attr(started[0], "names").Any().([]string)
			if !slices.Equal(names, []string{"report", "idle"}) {
				t.Errorf("cron runtime started with names=%v, want [report idle]", attr(started[0], "names"))
			}
		}
		runs := wantRecord(t, &logs, "cron job started", 4, slog.LevelInfo, "job", "report", "tick", "", "slot", "", "replica", "replica-7")
		for i, r := range runs {
			if got := attr(r, "tick").Uint64(); got != uint64(i+1) {
				t.Errorf("cron job started [%d] has tick=%d, want %d", i, got, i+1)
			}
			if v := attr(r, "lease"); v.Kind() != slog.KindAny || v.Any() != nil {
				t.Errorf("a job without a lease logged lease=%v", v)
			}
		}
		end := []string{"job", "report", "tick", "", "slot", "", "replica", "replica-7", "duration", ""}
		wantRecord(t, &logs, "cron job finished", 2, slog.LevelInfo, append(end, "outcome", "ok")...)
		wantRecord(t, &logs, "cron job failed", 1, slog.LevelError, append(end, "outcome", "error", "error", "")...)
		wantRecord(t, &logs, "cron job panicked", 1, slog.LevelError, append(end, "outcome", "panic", "panic", "")...)
		wantRecord(t, &logs, "cron runtime shutting down", 1, slog.LevelInfo, "replica", "replica-7", "runs", "1")
		wantRecord(t, &logs, "cron runtime stopped", 1, slog.LevelInfo, "replica", "replica-7")
		if last := logs.all(); len(last) == 0 || last[len(last)-1].Message != "cron runtime stopped" {
			t.Errorf("the last record is not the runtime's stop")
		}
	})
}

// TestLogShutdownGivesUp checks the shutdown's records when its context ends
// before the run in progress: it gives up once, and a second Shutdown that
// waits the run out logs the stop.
func TestLogShutdownGivesUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logs records
		job := &testJob{name: "slow", every: interval.AtLeast(time.Hour), process: func(context.Context, cron.Tick) error {
			time.Sleep(time.Minute) // ignores its context
			return nil
		}}
		rt, err := cron.Start([]cron.Job{job}, cron.WithLogger(slog.New(&logs)), cron.WithReplica("r"))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		if err := rt.Shutdown(ctx); err == nil {
			t.Errorf("Shutdown = nil, want the context's error")
		}
		wantRecord(t, &logs, "cron runtime gave up waiting for its runs; their contexts are cancelled", 1, slog.LevelWarn, "replica", "r", "runs", "1")
		wantRecord(t, &logs, "cron runtime stopped", 0, slog.LevelInfo)
		if err := rt.Shutdown(t.Context()); err != nil {
			t.Errorf("second Shutdown = %v", err)
		}
		wantRecord(t, &logs, "cron runtime shutting down", 1, slog.LevelInfo, "runs", "1")
		wantRecord(t, &logs, "cron runtime stopped", 1, slog.LevelInfo, "replica", "r")
	})
}
