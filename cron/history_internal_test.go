package cron

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wakuwaku-go/wakuwaku/internal/redistest"
	"github.com/wakuwaku-go/wakuwaku/interval"
	"github.com/wakuwaku-go/wakuwaku/lock"
)

// TestHistory claims and completes runs of a Cron job's record on a real
// redis-server, two of whose runs in a row die with their replica: the
// history keeps the last three, newest first, each lost run included as
// soon as a claim records it lost, with when each was due; it expires with
// the record; and
// Admin.Status says when the job last succeeded and what its schedule is.
func TestHistory(t *testing.T) {
	rdb := redistest.Start(t).Client(t)
	db := lock.NewDB(rdb)
	every := interval.MustCron("* * * * * *")
	s, err := newJobState(every, LeaseConfig{DB: db, Name: "hist", TTL: time.Minute, History: 3, RunTTL: 50 * time.Millisecond}, "r0", time.Now)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	admin := NewAdmin(db)
	base := time.Now().Truncate(time.Second).Add(-10 * time.Second)
	run := func(i int, err error, finish bool) {
		t.Helper()
		slot := every.Plan(base.Add(time.Duration(i)*time.Second), base.Add(time.Duration(i)*time.Second)).Slot
		tick := Tick{Slot: slot, Scheduled: slot.Start}
		c, cerr := s.claim(ctx, modeTick, &tick, time.Time{}, "")
		if cerr != nil || c.run == nil {
			t.Fatalf("claim of slot %d = %+v, %v; want a run", i, c, cerr)
		}
		if !finish {
			return // its replica died: its run lease runs out
		}
		if _, cerr := s.complete(ctx, c.run, c.attempt, tick.Scheduled, err, time.Time{}); cerr != nil {
			t.Fatal(cerr)
		}
	}
	run(0, nil, true)
	run(1, errors.New("boom"), true)
	run(2, nil, false)
	time.Sleep(60 * time.Millisecond) // the lost run's lease ends
	run(3, nil, false)                // C1 records slot 2 lost; slot 3 runs, and is lost too
	st, err := admin.Status(ctx, "hist")
	if err != nil {
		t.Fatal(err)
	}
	if got := outcomes(st.History); got != "lost error ok" {
		t.Errorf("history before the next completion = %s, want lost error ok (the lost run, which its claim added)", got)
	}
	time.Sleep(60 * time.Millisecond)
	run(4, nil, true) // its claim records 3 lost; its completion adds itself
	st, err = admin.Status(ctx, "hist")
	if err != nil {
		t.Fatal(err)
	}
	if got := outcomes(st.History); got != "ok lost lost" {
		t.Errorf("history = %s, want ok lost lost: the newest three, both lost runs included", got)
	}
	if h := st.History; len(h) == 3 {
		due := base.Add(4 * time.Second).Truncate(time.Millisecond)
		if !h[0].Scheduled.Equal(due) || h[0].Replica != "r0" || h[0].Attempt != 1 || h[0].Duration < 0 || h[0].Finished.IsZero() {
			t.Errorf("newest run = %+v, want due %v, on r0, attempt 1, finished", h[0], due)
		}
		if !h[1].Scheduled.IsZero() || h[1].Error == "" {
			t.Errorf("the lost run = %+v, want no due time (its replica never said) and the lease's error", h[1])
		}
		if h[2].Slot == h[1].Slot || !h[2].Started.Before(h[1].Started) || !h[1].Started.Before(h[0].Started) {
			t.Errorf("history: slots %s, %s, %s, started %v, %v, %v: want three runs, newest first", h[0].Slot, h[1].Slot, h[2].Slot, h[0].Started, h[1].Started, h[2].Started)
		}
	}
	if st.LastSuccess.IsZero() || st.LastSuccess.Before(st.History[0].Started) {
		t.Errorf("LastSuccess = %v, want the newest run's end", st.LastSuccess)
	}
	if want := `cron "* * * * * *"`; st.Schedule != want {
		t.Errorf("Schedule = %q, want %q", st.Schedule, want)
	}
	rt, lt := rdb.PTTL(ctx, s.keys[0]).Val(), rdb.PTTL(ctx, historyKey("hist")).Val()
	if lt <= 0 || lt > rt {
		t.Errorf("the history's TTL is %v, the record's %v: want it to expire, no later than the record", lt, rt)
	}
}

func outcomes(h []RunRecord) string {
	s := ""
	for i, r := range h {
		if i > 0 {
			s += " "
		}
		s += r.Outcome
	}
	return s
}

// TestParseHistoryLostInOneMillisecond checks that a run recorded lost
// leads the history even when it started in the millisecond the
// history's newest run did (a run that failed at once, and the next
// slot's run claimed right after it): they are told apart by slot and
// attempt, not by time.
func TestParseHistoryLostInOneMillisecond(t *testing.T) {
	at := time.UnixMilli(1_800_000_000_000).UTC()
	entry := `{"slot":"2027-01-15T08:00:01Z","by":"r0","why":"schedule","try":"1","due":"","start":"1800000000000","end":"1800000000000","outcome":"error","error":"boom"}`
	lost := &RunRecord{Slot: "2027-01-15T08:00:02Z", Replica: "r0", Attempt: 1, Started: at, Outcome: "lost"}
	h := parseHistory([]string{entry}, lost)
	if got := outcomes(h); got != "lost error" {
		t.Errorf("history = %s, want lost error", got)
	}
	// The history's newest run is the record's last: not twice.
	same := &RunRecord{Slot: "2027-01-15T08:00:01Z", Replica: "r0", Attempt: 1, Started: at, Outcome: "error"}
	if got := outcomes(parseHistory([]string{entry}, same)); got != "error" {
		t.Errorf("history = %s, want error, once", got)
	}
}

// TestHistoryExpiresWithRecord: a history that a completion starts, or a
// claim's lost run, expires with its record, to the millisecond, on a real
// redis-server. Its TTL was the record's PTTL set again with PEXPIRE, and
// Redis reads its clock at each of the two calls, so a history sometimes
// outlived its record by a millisecond (TestHistory failed so once, on a
// loaded machine). Redis 6.2 has no PEXPIRETIME, and there the scripts give
// the history the record's TTL, within a few milliseconds: so they do too
// for a user that may not send PEXPIRETIME, which tests that path on any
// server.
func TestHistoryExpiresWithRecord(t *testing.T) {
	srv := redistest.Start(t)
	admin := srv.Client(t)
	// exact: the server has PEXPIRETIME (Redis 7.0 and later).
	exact := admin.PExpireTime(t.Context(), "no-such-key").Err() == nil
	rule := []string{"on", ">pw", "~*", "&*", "+@all"}
	if exact {
		rule = append(rule, "-pexpiretime") // Redis 6.2 refuses to name it
	}
	srv.SetUser(t, "no-expiretime", rule...)
	opts := srv.Options()
	opts.Username, opts.Password = "no-expiretime", "pw"
	without := redis.NewClient(opts)
	t.Cleanup(func() { without.Close() })

	t.Run("PEXPIRETIME", func(t *testing.T) {
		if !exact {
			t.Skip("the server has no PEXPIRETIME (Redis 6.2): the other subtest checks what the scripts do there")
		}
		checkHistoryExpiry(t, admin, admin, true)
	})
	t.Run("without PEXPIRETIME", func(t *testing.T) {
		checkHistoryExpiry(t, without, admin, false)
	})
}

// checkHistoryExpiry completes a run of each of 300 jobs through c, and
// checks through admin that each history expires when its record does: at
// the same millisecond if exact, else within a few milliseconds.
func checkHistoryExpiry(t *testing.T, c, admin *redis.Client, exact bool) {
	ctx := t.Context()
	db := lock.NewDB(c)
	every := interval.MustCron("* * * * * *")
	slot := every.Plan(time.Now(), time.Now()).Slot
	bothTTLs := redis.NewScript("return {redis.call('PTTL', KEYS[1]), redis.call('PTTL', KEYS[2])}")
	const ttlSlack = 10 // ms
	later := 0
	const jobs = 300
	for i := range jobs {
		name := fmt.Sprintf("expiry-%d-%v", i, exact)
		s, err := newJobState(every, LeaseConfig{DB: db, Name: name, TTL: time.Minute, RunTTL: time.Second}, "r0", time.Now)
		if err != nil {
			t.Fatal(err)
		}
		tick := Tick{Slot: slot, Scheduled: slot.Start}
		cl, err := s.claim(ctx, modeTick, &tick, time.Time{}, "")
		if err != nil || cl.run == nil {
			t.Fatalf("claim = %+v, %v; want a run", cl, err)
		}
		if _, err := s.complete(ctx, cl.run, cl.attempt, tick.Scheduled, nil, time.Time{}); err != nil {
			t.Fatal(err)
		}
		if !exact {
			// The two TTLs read here may differ by the time between two
			// commands too.
			ttls, err := bothTTLs.Run(ctx, admin, []string{recordKey(name), historyKey(name)}).Int64Slice()
			if err != nil || len(ttls) != 2 {
				t.Fatalf("job %d: the TTLs = %v, %v", i, ttls, err)
			}
			if r, h := ttls[0], ttls[1]; r <= 0 || h <= 0 || h < r-ttlSlack || h > r+ttlSlack {
				t.Errorf("job %d: the record's PTTL is %d ms, its history's %d ms: want both set, within %d ms", i, r, h, ttlSlack)
			}
			continue
		}
		r, h := admin.PExpireTime(ctx, recordKey(name)).Val(), admin.PExpireTime(ctx, historyKey(name)).Val()
		if h <= 0 || r <= 0 {
			t.Fatalf("job %d: the record expires at %v, its history at %v: want both to expire", i, r, h)
		}
		if h != r {
			later++
			if later <= 3 {
				t.Errorf("job %d: the history expires %v after its record", i, h-r)
			}
		}
	}
	if later > 0 {
		t.Errorf("%d of %d histories expire after their records, want none", later, jobs)
	}
}
