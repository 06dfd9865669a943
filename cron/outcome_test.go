package cron_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/wakuwaku-go/wakuwaku/cron"
	"github.com/wakuwaku-go/wakuwaku/internal/redistest"
	"github.com/wakuwaku-go/wakuwaku/interval"
	"github.com/wakuwaku-go/wakuwaku/lock"
)

// The tests of this file hold a slot's outcome to PROTOCOL.md's "How a
// slot ends", on a real redis-server: each history entry is reported once,
// by the replica whose command recorded it, and nothing reports a slot's
// ending that the history lacks.

// TestOutcomeRetryRefusedByPause fails a slot's first of two attempts and
// pauses the job during the back-off: the retry is refused (R3), which the
// replica says at Warn, and no Observer call reports the slot skipped, since
// the history records no skip. The replica used to say nothing at Warn and
// call RunSkipped(paused), which metrics count as a skipped slot.
func TestOutcomeRetryRefusedByPause(t *testing.T) {
	srv := redistest.Start(t)
	db := lock.NewDB(srv.Client(t))
	admin := cron.NewAdmin(db)
	failed := make(chan struct{}, 1)
	job := &leasedJob{
		testJob: testJob{name: "sweep", every: interval.AtLeast(time.Hour), process: func(_ context.Context, tk cron.Tick) error {
			if tk.Attempt == 1 {
				failed <- struct{}{}
				return errors.New("payment gateway timed out")
			}
			t.Errorf("attempt %d ran while the job was paused", tk.Attempt)
			return nil
		}},
		lease: cron.LeaseConfig{DB: db, Attempts: 2, Backoff: time.Second},
	}
	var logs records
	var skipped list[string]
	rt, err := cron.Start([]cron.Job{job}, cron.WithReplica("a"), cron.WithLogger(slog.New(&logs)),
		cron.WithObserver(cron.Observer{RunSkipped: func(_ cron.Tick, reason string, _ error) { skipped.add(reason) }}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Shutdown(context.Background()) })
	<-failed
	if err := admin.Pause(t.Context(), "sweep"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(logs.find("cron job's retry was refused: the job is paused; its slot ends with its failed attempts")) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no Warn record of the retry refused by the pause within 10s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := rt.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := skipped.get(); len(got) > 0 {
		t.Errorf("RunSkipped calls %q; want none: the history records no skip", got)
	}
	st, err := admin.Status(t.Context(), "sweep")
	if err != nil {
		t.Fatal(err)
	}
	if len(st.History) != 1 || st.History[0].Outcome != "error" {
		t.Errorf("history %+v; want the failed attempt alone", st.History)
	}
	for _, r := range logs.find("cron job's retry was refused: the job is paused; its slot ends with its failed attempts") {
		if r.Level != slog.LevelWarn {
			t.Errorf("the refused retry logged at %v, want Warn", r.Level)
		}
	}
}
