package cron_test

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wakuwaku-go/wakuwaku/cron"
	"github.com/wakuwaku-go/wakuwaku/internal/redistest"
	"github.com/wakuwaku-go/wakuwaku/interval"
	"github.com/wakuwaku-go/wakuwaku/lock"
)

// TestSkipCountedOnce pauses a leased job of a slot a second on two
// replicas: each slot whose tick came while paused is reported skipped
// (paused) to the Observer by exactly one replica, the one whose claim
// recorded it (R20), and as skipped elsewhere by the other, so that a
// count of skips summed over the replicas is the slots skipped. Every
// replica used to report each paused tick.
func TestSkipCountedOnce(t *testing.T) {
	db := lock.NewDB(redistest.Start(t).Client(t))
	var ev [2]events
	ran := make(chan struct{}, 100)
	for i, name := range []string{"a", "b"} {
		job := &leasedJob{
			testJob: testJob{name: "counted", every: interval.MustCron("* * * * * *"), process: func(context.Context, cron.Tick) error {
				ran <- struct{}{}
				return nil
			}},
			lease: cron.LeaseConfig{DB: db},
		}
		start(t, []cron.Job{job}, cron.WithReplica(name), cron.WithObserver(ev[i].observer()))
	}
	<-ran // the record exists
	admin := cron.NewAdmin(db)
	if err := admin.Pause(t.Context(), "counted"); err != nil {
		t.Fatal(err)
	}
	paused := map[string]int{} // by slot: the replicas that reported it paused
	for deadline := time.Now().Add(10 * time.Second); len(paused) < 3; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d slots reported paused within 10s, want 3", len(paused))
		}
		clear(paused)
		for i := range ev {
			for _, e := range ev[i].of("skipped") {
				if e.reason == cron.ReasonPaused {
					key, _ := e.tick.Slot.Key()
					paused[key]++
				}
			}
		}
	}
	if err := admin.Resume(t.Context(), "counted"); err != nil {
		t.Fatal(err)
	}
	for key, n := range paused {
		if n != 1 {
			t.Errorf("slot %s reported skipped as paused by %d replicas, want 1", key, n)
		}
	}
	elsewhere := 0
	for i := range ev {
		for _, e := range ev[i].of("skipped") {
			if e.reason == cron.ReasonSkippedElsewhere {
				elsewhere++
			}
		}
	}
	if elsewhere == 0 {
		t.Errorf("no tick reported %q; want the other replica's ticks of the paused slots so", cron.ReasonSkippedElsewhere)
	}
}

// TestSkipOwnRunRecorded runs a leased job of a slot a second on one
// replica, its first run taking two slots: the tick that comes while the
// replica's own run goes on is skipped there, without a claim, as a job
// without a lease skips it; its slot is recorded skipped all the same
// (R20), in the history, since no other replica ticks it. It used to show
// only as a Warn.
func TestSkipOwnRunRecorded(t *testing.T) {
	db := lock.NewDB(redistest.Start(t).Client(t))
	var first atomic.Bool
	job := &leasedJob{
		testJob: testJob{name: "alone", every: interval.MustCron("* * * * * *"), process: func(context.Context, cron.Tick) error {
			if first.CompareAndSwap(false, true) {
				time.Sleep(2500 * time.Millisecond)
			}
			return nil
		}},
		lease: cron.LeaseConfig{DB: db},
	}
	start(t, []cron.Job{job}, cron.WithReplica("a"))
	admin := cron.NewAdmin(db)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		st, err := admin.Status(t.Context(), "alone")
		if err == nil && slices.ContainsFunc(st.History, func(r cron.RunRecord) bool {
			return r.Outcome == "skipped" && r.Reason == "still running" && r.Replica == "a"
		}) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no slot recorded skipped within 10s: status %+v, %v", st, err)
		}
	}
}
