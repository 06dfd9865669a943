package cronsim

import (
	"testing"
	"time"
)

// TestSimulateOneTickRunTwice plays a slot that two replicas run, each at
// its own clock's reading of the slot's start, under the same tick number:
// replica 2, whose clock was stepped 8 minutes ahead, runs slot 10:30 at
// 10:22 and goes on, ignoring its context, after Redis lost the record
// at 10:23; another replica's tick runs the slot again at 10:30. Each of
// the two runs must keep what its own code saw (its run number, and
// replica 2's the cancellation after the record's loss). A run was once
// named by its job, tick number and start alone, and replica 2's took the
// other's, uncancelled: I9 said it went on six minutes after the loss
// (seed 6005933).
func TestSimulateOneTickRunTwice(t *testing.T) {
	spec := Policy{Kind: CronSpec, Spec: "CRON_TZ=UTC */15 * * * *"}
	slot := at(10, 30)
	sc := &Scenario{
		Start: at(10, 5), Span: 45 * time.Minute,
		Offsets:   [Replicas]time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 300 * time.Millisecond},
		Latencies: [Replicas]time.Duration{time.Millisecond, 2 * time.Millisecond, 3 * time.Millisecond},
		Jobs: []Job{{Name: "j0", Versions: []Version{{Policy: spec, Attempts: 1}},
			Plans: map[PlanKey]Plan{{At: slot.Sub(at(10, 5)), Attempt: 1}: {Took: 7 * time.Minute, Stubborn: true}}}},
		Events: []Event{
			{At: 5 * time.Minute, Kind: StepClock, Replica: 2, D: 8 * time.Minute},
			{At: 18 * time.Minute, Kind: RedisRestart, D: 12 * time.Second},
		},
	}
	h := Simulate(t, sc)
	var runs []Run
	for _, r := range h.Runs {
		if r.Tick.Slot.Start.Equal(slot) {
			runs = append(runs, r)
		}
	}
	if len(runs) != 2 || runs[0].Replica != 2 || runs[1].Replica == 2 || runs[0].Tick.Run != runs[1].Tick.Run ||
		!runs[0].Tick.Started.Equal(runs[1].Tick.Started) {
		t.Fatalf("the scenario did not play as planned: want two runs of slot 10:30 under one tick number and start, replica 2's first:\n%s", h.Trace("", true))
	}
	if runs[0].Number == runs[1].Number {
		t.Errorf("both runs of slot 10:30 have run number %d: one took what the other's code saw", runs[0].Number)
	}
	if runs[0].Cancelled.IsZero() {
		t.Errorf("replica 2's run of slot 10:30 was not cancelled after Redis lost the record: %s", describe(&runs[0]))
	}
	for _, v := range Check(sc, h) {
		t.Errorf("%v", v)
	}
}
