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

// TestOutcomeTickOfSlotInOtherHands starts four replicas of an hourly
// AtLeast job within one interval: the first runs the interval's slot; the
// second's tick finds that run going; the third's finds a run-now's run
// going, after the slot's; and the fourth's, after a pause, finds the
// interval's slot taken. None of these ticks is the slot's outcome (the
// history holds the two runs, and no skip), so each is reported under a
// reason that metrics count as a tick elsewhere, at Debug. The third used
// to be reported as "previous run still in progress", at Warn, and the
// fourth as "paused": metrics count both as skipped slots.
func TestOutcomeTickOfSlotInOtherHands(t *testing.T) {
	srv := redistest.Start(t)
	db := lock.NewDB(srv.Client(t))
	admin := cron.NewAdmin(db)
	started, release := make(chan cron.Trigger, 1), make(chan struct{})
	job := &leasedJob{
		testJob: testJob{name: "reindex", every: interval.AtLeast(time.Hour), process: func(_ context.Context, tk cron.Tick) error {
			started <- tk.Trigger
			<-release
			return nil
		}},
		lease: cron.LeaseConfig{DB: db},
	}
	var logs records
	var rts []*cron.Runtime
	start := func(name string, skipped *list[string]) {
		rt, err := cron.Start([]cron.Job{job}, cron.WithReplica(name), cron.WithLogger(slog.New(&logs)),
			cron.WithObserver(cron.Observer{RunSkipped: func(_ cron.Tick, reason string, _ error) { skipped.add(reason) }}))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { rt.Shutdown(context.Background()) })
		rts = append(rts, rt)
	}
	// tick starts a replica and returns what its start's tick reported.
	tick := func(name string) []string {
		var skipped list[string]
		start(name, &skipped)
		deadline := time.Now().Add(10 * time.Second)
		for len(skipped.get()) == 0 {
			if time.Now().After(deadline) {
				t.Fatalf("%s reported no skipped tick within 10s", name)
			}
			time.Sleep(10 * time.Millisecond)
		}
		return skipped.get()
	}
	start("a", new(list[string]))
	if tr := <-started; tr != cron.TriggerSchedule {
		t.Fatalf("a's first run has trigger %v; want schedule", tr)
	}
	if got := tick("b"); len(got) != 1 || got[0] != cron.ReasonRunning {
		t.Errorf("b's tick while the slot's run went on reported %q; want [%q]", got, cron.ReasonRunning)
	}
	release <- struct{}{}
	if err := admin.RunNow(t.Context(), "reindex"); err != nil {
		t.Fatal(err)
	}
	if tr := <-started; tr != cron.TriggerRequest {
		t.Fatalf("the run after RunNow has trigger %v; want request", tr)
	}
	if got := tick("c"); len(got) != 1 || got[0] != cron.ReasonRunning {
		t.Errorf("c's tick while a requested run went on reported %q; want [%q]", got, cron.ReasonRunning)
	}
	release <- struct{}{}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		st, err := admin.Status(t.Context(), "reindex")
		if err != nil {
			t.Fatal(err)
		}
		if len(st.History) == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the requested run not recorded within 10s: history %+v", st.History)
		}
	}
	if err := admin.Pause(t.Context(), "reindex"); err != nil {
		t.Fatal(err)
	}
	if got := tick("d"); len(got) != 1 || got[0] != cron.ReasonLeaseHeld {
		t.Errorf("d's tick of the interval a ran, paused, reported %q; want [%q]", got, cron.ReasonLeaseHeld)
	}
	for _, rt := range rts {
		if err := rt.Shutdown(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range logs.all() {
		if r.Level >= slog.LevelWarn {
			t.Errorf("logged at %v: %q; want nothing at Warn: no slot was skipped", r.Level, r.Message)
		}
	}
	st, err := admin.Status(t.Context(), "reindex")
	if err != nil {
		t.Fatal(err)
	}
	if len(st.History) != 2 || st.History[0].Outcome != "ok" || st.History[1].Outcome != "ok" {
		t.Errorf("history %+v; want the slot's run and the requested run", st.History)
	}
}
