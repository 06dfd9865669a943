package cron

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/wakuwaku-go/wakuwaku/cron/internal/record"
	"github.com/wakuwaku-go/wakuwaku/internal/redistest"
	"github.com/wakuwaku-go/wakuwaku/interval"
	"github.com/wakuwaku-go/wakuwaku/lock"
)

// TestOwnLeaseAfterRetry checks that a duration policy's replica still
// recognizes its own slot's lease after that slot was retried: when the
// lease outlived the slot (Redis answered the claim late), its next tick
// takes it again and runs. A retry's claim once replaced the token the
// check compares with one that no lease held, and the tick was skipped.
func TestOwnLeaseAfterRetry(t *testing.T) {
	rdb := redistest.Start(t).Client(t)
	every := interval.AtLeast(time.Hour)
	s, err := newJobState(every, LeaseConfig{DB: lock.NewDB(rdb), Name: "own", Attempts: 2, Backoff: time.Millisecond}, "r0", time.Now)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	claim := func() claimed {
		t.Helper()
		now := time.Now()
		tick := Tick{Slot: every.Plan(now, now).Slot}
		c, err := s.claim(ctx, modeTick, &tick, time.Time{}, "")
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	first := claim()
	if first.run == nil {
		t.Fatalf("first claim = %+v, want a run", first)
	}
	if _, err := s.complete(ctx, first.run, first.attempt, time.Time{}, errors.New("failed"), time.Time{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Millisecond) // the back-off
	retry := claim()
	if retry.run == nil || retry.attempt != 2 {
		t.Fatalf("claim after the failure = %+v, want attempt 2", retry)
	}
	if _, err := s.complete(ctx, retry.run, retry.attempt, time.Time{}, nil, time.Time{}); err != nil {
		t.Fatal(err)
	}
	// The slot's lease outlives it, as when Redis answered the first claim
	// late: the replica's next tick finds its own lease.
	if err := rdb.PExpire(ctx, s.Keys[2], time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	if next := claim(); next.run == nil || next.attempt != 1 {
		t.Errorf("the next tick's claim = %+v, want a run of a new slot", next)
	}
}

// TestRecordNamespace: the record package names the records after the
// leases of LeaseNamespace, which it can't import.
func TestRecordNamespace(t *testing.T) {
	if record.Namespace != LeaseNamespace {
		t.Errorf("record.Namespace = %q, want LeaseNamespace %q", record.Namespace, LeaseNamespace)
	}
	name := "job"
	if got, want := record.LeaseKey(name), lock.New[string](LeaseNamespace, time.Second).Key(name); got != want {
		t.Errorf("record.LeaseKey(%q) = %q, want %q", name, got, want)
	}
}

func TestCut(t *testing.T) {
	for _, tc := range []struct {
		in   string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"exactly10!", 10, "exactly10!"},
		{"abcdefghijkl", 10, "abcdefg…"},
		{"ééééééé", 10, "ééé…"}, // 2-byte runes: never half of one
	} {
		got := cut(tc.in, tc.n)
		if got != tc.want || len(got) > tc.n || !utf8.ValidString(got) {
			t.Errorf("cut(%q, %d) = %q, want %q", tc.in, tc.n, got, tc.want)
		}
	}
	if got := cut(strings.Repeat("x", 10000), maxErrorText); len(got) > maxErrorText {
		t.Errorf("cut to %d bytes gave %d", maxErrorText, len(got))
	}
}

// TestClaimAfterOverrun checks R2 for a tick that comes after the run that
// held the job at its slot's start ended: the slot is skipped, however late
// the tick, as every on-time tick skipped it. A look's late claim once ran
// such a slot, whose on-time ticks had been told that no replica would run
// it, and so did not follow it: killed in the run, it got no retry
// (simulator seed 23650).
func TestClaimAfterOverrun(t *testing.T) {
	rdb := redistest.Start(t).Client(t)
	every := interval.MustCron("*/2 * * * * *")
	s, err := newJobState(every, LeaseConfig{DB: lock.NewDB(rdb), Name: "overrun", Attempts: 2}, "r0", time.Now)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	now := time.Now()
	s0 := every.Plan(now, now).Slot
	s1, _ := every.NextSlot(s0.Start)
	s2, _ := every.NextSlot(s1.Start)
	c, err := s.claim(ctx, modeTick, &Tick{Slot: s0}, time.Time{}, "")
	if err != nil || c.run == nil {
		t.Fatalf("claim of %v = %+v, %v; want a run", s0.Start, c, err)
	}
	// The run of s0 ends after s1 began.
	time.Sleep(time.Until(s1.Start.Add(100 * time.Millisecond)))
	if _, err := s.complete(ctx, c.run, c.attempt, time.Time{}, nil, time.Time{}); err != nil {
		t.Fatal(err)
	}
	c, err = s.claim(ctx, modeTick, &Tick{Slot: s1}, time.Time{}, "")
	if err != nil || c.run != nil || c.reason != ReasonStillRunning {
		t.Errorf("a late tick's claim of %v = %+v, %v; want it skipped, %q", s1.Start, c, err, ReasonStillRunning)
	}
	// A slot that began after that run ended runs.
	time.Sleep(time.Until(s2.Start))
	if c, err = s.claim(ctx, modeTick, &Tick{Slot: s2}, time.Time{}, ""); err != nil || c.run == nil {
		t.Errorf("claim of %v = %+v, %v; want a run", s2.Start, c, err)
	}
}

// TestClaimSkipAfterOverrun checks R2 for the tick of a replica whose own
// run of the previous slot held the job at the slot's start and whose
// completion Redis recorded just before this tick came (mode skip): the
// slot is recorded skipped (R20), as a tick in mode tick records it. The
// claim in mode skip once answered nothing, and a slot that no other
// replica ticked ended with neither a run nor a recorded skip
// (simulator seed 78647).
func TestClaimSkipAfterOverrun(t *testing.T) {
	rdb := redistest.Start(t).Client(t)
	every := interval.MustCron("*/2 * * * * *")
	s, err := newJobState(every, LeaseConfig{DB: lock.NewDB(rdb), Name: "overrun", Attempts: 2}, "r0", time.Now)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	now := time.Now()
	s0 := every.Plan(now, now).Slot
	s1, _ := every.NextSlot(s0.Start)
	c, err := s.claim(ctx, modeTick, &Tick{Slot: s0}, time.Time{}, "")
	if err != nil || c.run == nil {
		t.Fatalf("claim of %v = %+v, %v; want a run", s0.Start, c, err)
	}
	// The run of s0 ends after s1 began, and its completion is recorded
	// before the replica's tick of s1 claims.
	time.Sleep(time.Until(s1.Start.Add(100 * time.Millisecond)))
	if _, err := s.complete(ctx, c.run, c.attempt, time.Time{}, nil, time.Time{}); err != nil {
		t.Fatal(err)
	}
	c, err = s.claim(ctx, modeSkip, &Tick{Slot: s1}, time.Time{}, "")
	if err != nil || c.run != nil || c.recorded != ReasonStillRunning {
		t.Errorf("the skip's claim of %v = %+v, %v; want it recorded skipped, %q", s1.Start, c, err, ReasonStillRunning)
	}
}

// TestClaimOverEarlierLayout: a record that an earlier version wrote, a
// field per part, names no slot this layout reads; the first claim runs
// its slot and removes the earlier fields, whose bulk every later script
// would otherwise scan.
func TestClaimOverEarlierLayout(t *testing.T) {
	rdb := redistest.Start(t).Client(t)
	every := interval.MustCron("0 * * * *")
	s, err := newJobState(every, LeaseConfig{DB: lock.NewDB(rdb), Name: "old"}, "r0", time.Now)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	now := time.Now()
	slot := every.Plan(now, now).Slot
	key, _ := slot.Key()
	earlier := []any{"slot", key, "slot.at", slot.Start.UnixMilli(), "slot.state", "done", "slot.tries", 1,
		"seen", now.UnixMilli(), "seen.by", "r9", "last.slot", key, "last.start", 1, "last.end", 2,
		"last.outcome", "ok", "hist.last", "x", "last.run", "y", "born", 1}
	if err := rdb.HSet(ctx, s.Keys[0], earlier...).Err(); err != nil {
		t.Fatal(err)
	}
	c, err := s.claim(ctx, modeTick, &Tick{Slot: slot}, time.Time{}, "")
	if err != nil || c.run == nil {
		t.Fatalf("claim over the earlier layout = %+v, %v; want a run", c, err)
	}
	fields, err := rdb.HKeys(ctx, s.Keys[0]).Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fields {
		if strings.Contains(f, ".") {
			t.Errorf("field %q of the earlier layout is left: %q", f, fields)
		}
	}
	st, err := NewAdmin(lock.NewDB(rdb)).Status(ctx, "old")
	if err != nil || st.Running == nil || st.Slot != slotName(key) || st.SlotState != "open" {
		t.Errorf("Status = %+v, %v; want the run of %s", st, err, key)
	}
}

// TestPackedFieldsHoldBars: a replica's name, an operator's and an error's
// text may hold the '|' that separates a packed field's parts: each is the
// last part of its field (or a field of its own), so the record reads back
// whole.
func TestPackedFieldsHoldBars(t *testing.T) {
	rdb := redistest.Start(t).Client(t)
	db := lock.NewDB(rdb)
	every := interval.MustCron("* * * * * *")
	s, err := newJobState(every, LeaseConfig{DB: db, Name: "bars", Attempts: 2}, "r|1", time.Now)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// Early in a second: the failed attempt's back-off (a second) must end
	// within the slot's claim window (two), or the completion closes the
	// slot as failed (R12).
	time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(time.Second + 10*time.Millisecond)))
	now := time.Now()
	slot := every.Plan(now, now).Slot
	c, err := s.claim(ctx, modeTick, &Tick{Slot: slot}, time.Time{}, "")
	if err != nil || c.run == nil {
		t.Fatalf("claim = %+v, %v; want a run", c, err)
	}
	admin := Admin{db: db, by: "admin|x"}
	if err := admin.Pause(ctx, "bars"); err != nil {
		t.Fatal(err)
	}
	st, err := admin.Status(ctx, "bars")
	if err != nil || st.Running == nil || st.Running.Replica != "r|1" || st.PausedBy != "admin|x" || st.SeenBy != "r|1" {
		t.Fatalf("Status = %+v, %v; want r|1's run, paused by admin|x", st, err)
	}
	if _, err := s.complete(ctx, c.run, c.attempt, slot.Start, errors.New(`a|b "c"`), time.Time{}); err != nil {
		t.Fatal(err)
	}
	st, err = admin.Status(ctx, "bars")
	switch {
	case err != nil:
		t.Fatal(err)
	case st.Running != nil || st.Last == nil || st.LastFailure == nil:
		t.Fatalf("Status = %+v; want no run, and the last run failed", st)
	case st.Last.Replica != "r|1" || st.LastFailure.Replica != "r|1" || st.LastFailure.Error != `a|b "c"` || st.SlotState != "open":
		t.Errorf("last run %+v, failure %+v, slot %s; want r|1's, error %q, the slot open", *st.Last, *st.LastFailure, st.SlotState, `a|b "c"`)
	case len(st.History) != 1 || st.History[0].Replica != "r|1" || st.History[0].Error != `a|b "c"`:
		t.Errorf("history = %+v; want r|1's run, error %q", st.History, `a|b "c"`)
	}
}
