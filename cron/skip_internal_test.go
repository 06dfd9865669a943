package cron

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wakuwaku-go/wakuwaku/cron/internal/record"
	"github.com/wakuwaku-go/wakuwaku/internal/redistest"
	"github.com/wakuwaku-go/wakuwaku/interval"
	"github.com/wakuwaku-go/wakuwaku/lock"
)

// The tests of this file hold R20 (PROTOCOL.md): a slot that a tick found
// none and could not run is recorded skipped, once, in the record and its
// history, and no later claim runs it.

// replicasOf returns the record keepers of a job named name on replicas
// r0 and r1, which share rdb.
func replicasOf(t *testing.T, rdb *redis.Client, every interval.Interval, l LeaseConfig) (*jobState, *jobState) {
	t.Helper()
	l.DB = lock.NewDB(rdb)
	r0, err := newJobState(every, l, "r0", time.Now)
	if err != nil {
		t.Fatal(err)
	}
	r1, err := newJobState(every, l, "r1", time.Now)
	if err != nil {
		t.Fatal(err)
	}
	return r0, r1
}

// dueNow makes the ticks of the slots the tests claim (the next hour's)
// due already, as if the clock were past their start.
func dueNow(rs ...*jobState) {
	for _, s := range rs {
		s.due = func(time.Time) time.Time { return time.Now().Add(-time.Minute) }
	}
}

// claimOf claims slot for mode on s, failing t on an error.
func claimOf(t *testing.T, s *jobState, mode claimMode, slot interval.Slot) claimed {
	t.Helper()
	c, err := s.claim(context.Background(), mode, &Tick{Slot: slot}, time.Time{}, "")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// historyOf returns the job's history, newest first.
func historyOf(t *testing.T, rdb *redis.Client, s *jobState) []record.Entry {
	t.Helper()
	raw, err := rdb.LRange(context.Background(), s.Keys[1], 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	var out []record.Entry
	for _, r := range raw {
		var e record.Entry
		if err := json.Unmarshal([]byte(r), &e); err != nil {
			t.Fatalf("history entry %s: %v", r, err)
		}
		out = append(out, e)
	}
	return out
}

// skipsOf returns the history's entries of slot id that say it was
// skipped.
func skipsOf(h []record.Entry, id string) []record.Entry {
	var out []record.Entry
	for _, e := range h {
		if e.Outcome == "skipped" && e.Slot == id {
			out = append(out, e)
		}
	}
	return out
}

// TestSkipStillRunningStaysSkipped: slot S1 comes while a run of S0 holds
// the job, so the tick that R2 refuses records S1 skipped. A requested run
// then begins and ends after S1's tick was due, so the record's last run
// no longer says that a run held the job then; a late tick of S1 (a
// replica frozen, or deployed, meanwhile) must still not run it, nor may a
// start's catch-up. R2 used to decide per tick and write nothing, and the
// late tick ran the slot every other replica had skipped (simulator seeds
// 3000120, 3003435, 3006132, 3008643, 3009530).
func TestSkipStillRunningStaysSkipped(t *testing.T) {
	rdb := redistest.Start(t).Client(t)
	every := interval.MustCron("0 * * * *")
	r0, r1 := replicasOf(t, rdb, every, LeaseConfig{Name: "overrun", Attempts: 2, CatchUp: 3 * time.Hour})
	dueNow(r0, r1)
	ctx := context.Background()
	now := time.Now()
	s0 := every.Plan(now, now).Slot
	s1, _ := every.NextSlot(s0.Start)
	id1, _ := s1.Key()

	run := claimOf(t, r0, modeTick, s0)
	if run.run == nil {
		t.Fatalf("claim of %v = %+v; want a run", s0.Start, run)
	}
	// S1's ticks come while the run of S0 holds the job.
	if c := claimOf(t, r1, modeTick, s1); c.run != nil || c.reason != ReasonStillRunning {
		t.Fatalf("r1's tick of %v = %+v; want it skipped, %q", s1.Start, c, ReasonStillRunning)
	}
	if c := claimOf(t, r0, modeTick, s1); c.run != nil || c.reason == "" {
		t.Fatalf("r0's tick of %v = %+v; want it skipped", s1.Start, c)
	}
	if _, err := r0.complete(ctx, run.run, run.attempt, time.Time{}, nil, time.Time{}); err != nil {
		t.Fatal(err)
	}
	// A requested run, which begins after S1's tick was due (as a test
	// can't wait an hour, S1's ticks are due a minute ago: the record's
	// last run then began after that).
	if err := rdb.HSet(ctx, r0.Keys[0], "want", "1|op").Err(); err != nil {
		t.Fatal(err)
	}
	req := claimOf(t, r0, modeRequest, interval.Slot{})
	if req.run == nil || req.trigger != TriggerRequest {
		t.Fatalf("request's claim = %+v; want a requested run", req)
	}
	if _, err := r0.complete(ctx, req.run, req.attempt, time.Time{}, nil, time.Time{}); err != nil {
		t.Fatal(err)
	}
	if c := claimOf(t, r1, modeTick, s1); c.run != nil {
		t.Errorf("a late tick of %v ran it (attempt %d, %v), though it was recorded skipped", s1.Start, c.attempt, c.trigger)
	}
	if c := claimOf(t, r0, modeCatchUp, s1); c.run != nil {
		t.Errorf("a catch-up of %v ran it (attempt %d, %v), though it was recorded skipped", s1.Start, c.attempt, c.trigger)
	}
	skips := skipsOf(historyOf(t, rdb, r0), id1)
	if len(skips) != 1 || skips[0].By != `r1` || skips[0].Reason != "still running" {
		t.Errorf("the history's skips of %s = %+v; want one, by r1, reason still running", id1, skips)
	}
}

// TestSkipPausedRecordedOnce: a pause covers slot S's tick on two
// replicas. The tick of the first records S skipped, once; the second's
// tick and look find it recorded; and after the resume a start's catch-up
// does not run S. Without a recorded skip, S stayed none, and a catch-up
// after the resume ran it on one replica alone, which no other replica
// then followed up when it was killed (simulator seed 4001036).
func TestSkipPausedRecordedOnce(t *testing.T) {
	rdb := redistest.Start(t).Client(t)
	every := interval.MustCron("0 * * * *")
	r0, r1 := replicasOf(t, rdb, every, LeaseConfig{Name: "paused", CatchUp: 3 * time.Hour})
	dueNow(r0, r1)
	ctx := context.Background()
	now := time.Now()
	s0 := every.Plan(now, now).Slot
	s1, _ := every.NextSlot(s0.Start)
	id1, _ := s1.Key()
	if c := claimOf(t, r0, modeTick, s0); c.run == nil {
		t.Fatalf("claim of %v = %+v; want a run", s0.Start, c)
	} else if _, err := r0.complete(ctx, c.run, c.attempt, time.Time{}, nil, time.Time{}); err != nil {
		t.Fatal(err)
	}
	admin := NewAdmin(lock.NewDB(rdb))
	if err := admin.Pause(ctx, "paused"); err != nil {
		t.Fatal(err)
	}
	// r1 does not own S1 and its owner, r0, has not ticked it (it died):
	// its look must claim, so that the skip is recorded.
	if _, claim, err := r1.look(ctx, &Tick{Slot: s1}); err != nil || !claim {
		t.Errorf("r1's look at %v, paused and not recorded skipped: claim %v, %v; want a claim", s1.Start, claim, err)
	}
	first := claimOf(t, r1, modeTick, s1)
	second := claimOf(t, r0, modeTick, s1)
	for _, c := range []claimed{first, second} {
		if c.run != nil || c.reason == "" {
			t.Errorf("a paused tick of %v = %+v; want it skipped", s1.Start, c)
		}
	}
	if c, claim, err := r1.look(ctx, &Tick{Slot: s1}); err != nil || claim || c.reason == "" {
		t.Errorf("r1's look at %v, recorded skipped: %+v, claim %v, %v; want it skipped, no claim", s1.Start, c, claim, err)
	}
	if err := admin.Resume(ctx, "paused"); err != nil {
		t.Fatal(err)
	}
	if c := claimOf(t, r0, modeCatchUp, s1); c.run != nil {
		t.Errorf("a catch-up after the resume ran %v (attempt %d, %v), though it was recorded skipped", s1.Start, c.attempt, c.trigger)
	}
	skips := skipsOf(historyOf(t, rdb, r0), id1)
	if len(skips) != 1 || skips[0].By != "r1" || skips[0].Reason != "paused" {
		t.Errorf("the history's skips of %s = %+v; want one, by r1, reason paused", id1, skips)
	}
}

// TestSkipPausedDurationOncePerInterval: a duration policy's slot has no
// id before a claim opens it, so a pause records at most one skip an
// interval, whichever replica's tick comes first; a later tick in that
// interval still serves a request that waits.
func TestSkipPausedDurationOncePerInterval(t *testing.T) {
	rdb := redistest.Start(t).Client(t)
	every := interval.AtLeast(time.Hour)
	r0, r1 := replicasOf(t, rdb, every, LeaseConfig{Name: "hourly"})
	ctx := context.Background()
	if c := claimOf(t, r0, modeHello, interval.Slot{}); c.run != nil {
		t.Fatalf("hello = %+v", c)
	}
	if err := NewAdmin(lock.NewDB(rdb)).Pause(ctx, "hourly"); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	slot := every.Plan(now, now).Slot
	for _, s := range []*jobState{r0, r1, r0} {
		if c := claimOf(t, s, modeTick, slot); c.run != nil || c.reason == "" {
			t.Errorf("a paused tick on %s = %+v; want it skipped", s.Replica, c)
		}
	}
	var skips []record.Entry
	for _, e := range historyOf(t, rdb, r0) {
		if e.Outcome == "skipped" {
			skips = append(skips, e)
		}
	}
	if len(skips) != 1 || skips[0].By != "r0" || skips[0].Reason != "paused" {
		t.Errorf("the history's skips = %+v; want one, by r0, reason paused", skips)
	}
	// A tick that finds the interval's skip recorded still serves a
	// request that waits, as a paused tick does (R3, R9).
	if err := rdb.HSet(ctx, r1.Keys[0], "want", "1|op").Err(); err != nil {
		t.Fatal(err)
	}
	if c := claimOf(t, r1, modeTick, slot); c.run == nil || c.trigger != TriggerRequest {
		t.Errorf("a paused tick with a request waiting = %+v; want the requested run", c)
	}
}

// TestRetryPastClaimWindowClosesSlot: a failed attempt whose back-off
// would end after its slot's claim window closes the slot as failed in
// its completion, and the history's entry says why. The slot used to stay
// open, with an attempt left that no claim could take.
func TestRetryPastClaimWindowClosesSlot(t *testing.T) {
	rdb := redistest.Start(t).Client(t)
	every := interval.MustCron("0 * * * *")
	now := time.Now()
	s0 := every.Plan(now, now).Slot
	// The claim window ends 2 s from now; the back-off is 5 s.
	ttl := now.Sub(s0.Start) + 2*time.Second
	r0, _ := replicasOf(t, rdb, every, LeaseConfig{Name: "window", Attempts: 3, Backoff: 5 * time.Second, TTL: ttl})
	ctx := context.Background()
	c := claimOf(t, r0, modeTick, s0)
	if c.run == nil {
		t.Fatalf("claim of %v = %+v; want a run", s0.Start, c)
	}
	done, err := r0.complete(ctx, c.run, c.attempt, time.Time{}, errors.New("failed"), time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if done.open {
		t.Errorf("the completion left %v open for a retry 5 s later, after its claim window ends in 2 s", s0.Start)
	}
	rec, err := rdb.HGet(ctx, r0.Keys[0], "slot").Result()
	if err != nil {
		t.Fatal(err)
	}
	if record.ParseSlot(rec).State != "failed" {
		t.Errorf("the record's slot = %q; want it failed", rec)
	}
	if h := historyOf(t, rdb, r0); len(h) != 1 || h[0].Outcome != "error" || h[0].Error != "failed" || h[0].Reason != "claim window over" {
		t.Errorf("the history = %+v; want the attempt's error, and the reason claim window over", h)
	}
}

// TestSkipNotRecordedBeforeDue: a tick that comes before its slot's ticks
// are due (a start's, with a spread) and finds another run holding the
// job records nothing, since that run may end before the slot is due; the
// slot's tick at its due time records the skip if the run still holds the
// job. Early by the replica's clock or by the server's (a clock ahead) is
// early. A start's early tick used to refuse the slot for good, while the
// slot's due ticks would have found the job free (simulator seed 5003251),
// and so did a replica's tick whose clock ran ahead (proof/internal/fault's
// TestCronReplicas).
func TestSkipNotRecordedBeforeDue(t *testing.T) {
	rdb := redistest.Start(t).Client(t)
	every := interval.MustCron("0 * * * *")
	r0, r1 := replicasOf(t, rdb, every, LeaseConfig{Name: "early"})
	now := time.Now()
	s0 := every.Plan(now, now).Slot
	s1, _ := every.NextSlot(s0.Start)
	id1, _ := s1.Key()
	if c := claimOf(t, r0, modeTick, s0); c.run == nil {
		t.Fatalf("claim of %v = %+v; want a run", s0.Start, c)
	}
	// S1 is ahead of the clock: its ticks are due later.
	if c := claimOf(t, r1, modeTick, s1); c.run != nil || c.recorded != "" || c.due.IsZero() {
		t.Errorf("an early tick of %v = %+v; want it refused, nothing recorded, and when it is due", s1.Start, c)
	}
	// A replica whose clock is ahead of Redis's: its tick of S1 is not
	// early by its own clock, but is by the server's.
	ahead, err := newJobState(every, LeaseConfig{DB: lock.NewDB(rdb), Name: "early"}, "r2", func() time.Time { return time.Now().Add(2 * time.Hour) })
	if err != nil {
		t.Fatal(err)
	}
	if c := claimOf(t, ahead, modeTick, s1); c.run != nil || c.recorded != "" || !c.early || c.wait <= 0 {
		t.Errorf("a tick of %v from a clock ahead = %+v; want it refused, nothing recorded, and when it is due", s1.Start, c)
	}
	if skips := skipsOf(historyOf(t, rdb, r1), id1); len(skips) != 0 {
		t.Errorf("the history's skips of %s after early ticks = %+v; want none", id1, skips)
	}
	// S1's ticks are due: the run of S0 still holds the job.
	dueNow(r1)
	if c := claimOf(t, r1, modeTick, s1); c.run != nil || c.recorded != ReasonStillRunning {
		t.Errorf("the due tick of %v = %+v; want it recorded skipped", s1.Start, c)
	}
}
