package cron

import (
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/wakuwaku-go/wakuwaku/cron/internal/record"
	"github.com/wakuwaku-go/wakuwaku/internal/redistest"
	"github.com/wakuwaku-go/wakuwaku/interval"
	"github.com/wakuwaku-go/wakuwaku/lock"
)

// TestFenceAboveClockStepBack claims runs of a job's record on a real
// redis-server whose clock reads earlier than the record's last fence, as
// after the server's clock was stepped back: each claim's fence is raised
// past the record's (F1), where the clock alone would hand out a lower
// number; and a requested run, a retry and the next slot's run each get
// one above the run before.
func TestFenceAboveClockStepBack(t *testing.T) {
	rdb := redistest.Start(t).Client(t)
	ctx := t.Context()
	every := interval.MustCron("* * * * * *")
	s, err := newJobState(every, LeaseConfig{DB: lock.NewDB(rdb), Name: "fenced", Attempts: 2, Backoff: time.Millisecond}, "r0", time.Now)
	if err != nil {
		t.Fatal(err)
	}
	tickAt := func(at time.Time) *Tick {
		p := every.Plan(at, at)
		return &Tick{Scheduled: p.Scheduled, Slot: p.Slot}
	}
	now := time.Now()
	first, err := s.claim(ctx, modeTick, tickAt(now), time.Time{}, "")
	if err != nil || first.run == nil || first.fence == 0 {
		t.Fatalf("first claim = %+v, %v; want a run with a fence", first, err)
	}
	// The server's clock a day behind the last fence.
	ahead := first.fence + uint64(24*time.Hour/time.Microsecond)
	if err := rdb.HSet(ctx, record.Key("fenced"), "fence", strconv.FormatUint(ahead, 10)).Err(); err != nil {
		t.Fatal(err)
	}
	// The run fails: its slot is open, and the retry (E2) claims it.
	if _, err := s.complete(ctx, first.run, first.attempt, time.Time{}, errors.New("the first attempt fails"), time.Time{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Millisecond) // the back-off
	retry, err := s.claim(ctx, modeRetry, tickAt(now), time.Time{}, first.slot)
	if err != nil || retry.run == nil {
		t.Fatalf("retry = %+v, %v; want a run", retry, err)
	}
	if retry.fence != ahead+1 {
		t.Errorf("retry's fence = %d, want %d: one above the record's, which the clock is behind", retry.fence, ahead+1)
	}
	if _, err := s.complete(ctx, retry.run, retry.attempt, time.Time{}, nil, time.Time{}); err != nil {
		t.Fatal(err)
	}
	next := now.Truncate(time.Second).Add(time.Second)
	time.Sleep(time.Until(next))
	later, err := s.claim(ctx, modeTick, tickAt(next), time.Time{}, "")
	if err != nil || later.run == nil {
		t.Fatalf("next slot's claim = %+v, %v; want a run", later, err)
	}
	if later.fence != ahead+2 {
		t.Errorf("next slot's fence = %d, want %d", later.fence, ahead+2)
	}
	if got, err := rdb.HGet(ctx, record.Key("fenced"), "fence").Uint64(); err != nil || got != later.fence {
		t.Errorf("the record's fence = %d, %v; want the last run's, %d", got, err, later.fence)
	}
}
