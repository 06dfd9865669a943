package cron

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wakuwaku-go/wakuwaku/cron/internal/record"
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
	rt, lt := rdb.PTTL(ctx, s.Keys[0]).Val(), rdb.PTTL(ctx, record.HistoryKey("hist")).Val()
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

// TestParseHistoryLostThenSkipped checks that a lost run, which the record
// keeps as its last, is listed once when a skip was recorded after it: the
// skip is the history's newest entry, the lost run the next. It used to be
// listed twice, once from the record's last and once from the history.
func TestParseHistoryLostThenSkipped(t *testing.T) {
	at := time.UnixMilli(1_800_000_000_000).UTC()
	skip := `{"slot":"2027-01-15T08:00:02Z","by":"r1","why":"schedule","try":"0","due":"1800000001000","start":"1800000001000","end":"1800000001000","outcome":"skipped","reason":"previous run still in progress"}`
	lost := `{"slot":"2027-01-15T08:00:01Z","by":"r0","why":"schedule","try":"1","due":"","start":"1800000000000","end":"1800000000500","outcome":"lost","error":"run lease expired"}`
	last := &RunRecord{Slot: "2027-01-15T08:00:01Z", Replica: "r0", Attempt: 1, Started: at, Outcome: "lost"}
	if got := outcomes(parseHistory([]string{skip, lost}, last)); got != "skipped lost" {
		t.Errorf("history = %s, want skipped lost", got)
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
			ttls, err := bothTTLs.Run(ctx, admin, []string{record.Key(name), record.HistoryKey(name)}).Int64Slice()
			if err != nil || len(ttls) != 2 {
				t.Fatalf("job %d: the TTLs = %v, %v", i, ttls, err)
			}
			if r, h := ttls[0], ttls[1]; r <= 0 || h <= 0 || h < r-ttlSlack || h > r+ttlSlack {
				t.Errorf("job %d: the record's PTTL is %d ms, its history's %d ms: want both set, within %d ms", i, r, h, ttlSlack)
			}
			continue
		}
		r, h := admin.PExpireTime(ctx, record.Key(name)).Val(), admin.PExpireTime(ctx, record.HistoryKey(name)).Val()
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

// TestLostRunEndsWhenLastAlive lets runs of a Cron job die with their
// replica on a real redis-server, one after two heartbeats and one before
// any: the claim that records each lost (C1) ends it when it was last
// known alive, its last heartbeat or its claim, in the history, the last
// run and the last failure, and says in the error how long after that the
// run lease expired. It used to end them at the run lease's end, so a run
// killed early showed as lasting the whole run lease.
func TestLostRunEndsWhenLastAlive(t *testing.T) {
	rdb := redistest.Start(t).Client(t)
	db := lock.NewDB(rdb)
	every := interval.MustCron("* * * * * *")
	const runTTL = 300 * time.Millisecond
	ctx := t.Context()
	admin := NewAdmin(db)
	base := time.Now().Truncate(time.Second).Add(-10 * time.Second)
	for _, tc := range []struct {
		name  string
		beats int
	}{
		{"after two heartbeats", 2},
		{"before any heartbeat", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := fmt.Sprintf("killed-%d", tc.beats)
			// A replica's name may hold a '|': the last part of the run.
			s, err := newJobState(every, LeaseConfig{DB: db, Name: name, TTL: time.Minute, RunTTL: runTTL}, "r|0", time.Now)
			if err != nil {
				t.Fatal(err)
			}
			claim := func(i int) *record.RunLease {
				t.Helper()
				slot := every.Plan(base.Add(time.Duration(i)*time.Second), base.Add(time.Duration(i)*time.Second)).Slot
				tick := Tick{Slot: slot, Scheduled: slot.Start}
				c, err := s.claim(ctx, modeTick, &tick, time.Time{}, "")
				if err != nil || c.run == nil {
					t.Fatalf("claim of slot %d = %+v, %v; want a run", i, c, err)
				}
				return c.run
			}
			run := claim(1)
			for range tc.beats {
				time.Sleep(runTTL / 3)
				if held, err := run.Extend(ctx); err != nil || !held {
					t.Fatalf("heartbeat = %v, %v; want the run lease extended", held, err)
				}
			}
			// Its replica dies: no completion, no more heartbeats. The
			// run lease ends a run TTL after the last beat.
			st, err := admin.Status(ctx, name)
			if err != nil || st.Running == nil {
				t.Fatalf("Status = %+v, %v; want a run in progress", st, err)
			}
			dead := *st.Running
			alive := dead.Deadline.Add(-runTTL)
			if tc.beats == 0 && !alive.Equal(dead.Started) {
				t.Fatalf("the run started at %v, and its lease ends at %v: want it to end a run TTL (%v) after", dead.Started, dead.Deadline, runTTL)
			}
			for {
				now, err := rdb.Time(ctx).Result()
				if err != nil {
					t.Fatal(err)
				}
				if now.After(dead.Deadline) {
					break
				}
				time.Sleep(dead.Deadline.Sub(now) + time.Millisecond)
			}
			claim(2) // C1 records it lost
			st, err = admin.Status(ctx, name)
			if err != nil {
				t.Fatal(err)
			}
			want := fmt.Sprintf("the run lease expired %d ms after its last heartbeat:", runTTL.Milliseconds())
			if tc.beats == 0 {
				want = fmt.Sprintf("the run lease expired %d ms after its start, and no heartbeat came:", runTTL.Milliseconds())
			}
			for _, r := range []struct {
				what string
				r    *RunRecord
			}{{"Last", st.Last}, {"LastFailure", st.LastFailure}, {"History[0]", &st.History[0]}} {
				switch {
				case r.r == nil || r.r.Outcome != "lost" || !r.r.Started.Equal(dead.Started) || r.r.Replica != "r|0":
					t.Errorf("%s = %+v, want the lost run on r|0 started at %v", r.what, r.r, dead.Started)
				case !r.r.Finished.Equal(alive) || r.r.Duration != alive.Sub(dead.Started):
					t.Errorf("%s ended at %v (after %v), want %v (after %v): when it was last known alive, not its lease's end %v",
						r.what, r.r.Finished, r.r.Duration, alive, alive.Sub(dead.Started), dead.Deadline)
				case r.what != "Last" && !strings.HasPrefix(r.r.Error, want):
					t.Errorf("%s's error = %q, want it to begin %q", r.what, r.r.Error, want)
				}
			}
		})
	}
}

// TestLostRunOfPreviousRelease writes runs as the previous release did,
// without a beat (PROTOCOL.md, the record), whose replicas' names hold a
// '|' or not: a claim finds such a run's lease held, and once it has
// ended records it lost at its lease's end, by its replica's whole name.
func TestLostRunOfPreviousRelease(t *testing.T) {
	rdb := redistest.Start(t).Client(t)
	db := lock.NewDB(rdb)
	every := interval.MustCron("* * * * * *")
	ctx := t.Context()
	admin := NewAdmin(db)
	base := time.Now().Truncate(time.Second).Add(-10 * time.Second)
	for i, by := range []string{"old-r9", "old|r9", "1|r9"} {
		name := fmt.Sprintf("old-%d", i)
		s, err := newJobState(every, LeaseConfig{DB: db, Name: name, TTL: time.Minute, RunTTL: time.Second}, "r0", time.Now)
		if err != nil {
			t.Fatal(err)
		}
		claim := func(at time.Time) claimed {
			t.Helper()
			slot := every.Plan(at, at).Slot
			tick := Tick{Slot: slot, Scheduled: slot.Start}
			c, err := s.claim(ctx, modeTick, &tick, time.Time{}, "")
			if err != nil {
				t.Fatal(err)
			}
			return c
		}
		c := claim(base) // makes the record
		if c.run == nil {
			t.Fatalf("%s: first claim = %+v, want a run", by, c)
		}
		if _, err := s.complete(ctx, c.run, 1, base, nil, time.Time{}); err != nil {
			t.Fatal(err)
		}
		now, err := rdb.Time(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		since, until := now.UnixMilli()-50, now.UnixMilli()+200
		slot, _ := every.Plan(base.Add(time.Second), base.Add(time.Second)).Slot.Key()
		old := fmt.Sprintf("tok|%d|%d|1|schedule|%s|%s", since, until, slot, by)
		if err := rdb.HSet(ctx, record.Key(name), "run", old).Err(); err != nil {
			t.Fatal(err)
		}
		if c := claim(base.Add(2 * time.Second)); c.run != nil {
			t.Fatalf("%s: a claim while the previous release's run holds the lease = %+v, want it refused", by, c)
		}
		st, err := admin.Status(ctx, name)
		if err != nil || st.Running == nil || st.Running.Replica != by {
			t.Fatalf("%s: Status = %+v, %v; want the run in progress on %s", by, st.Running, err, by)
		}
		time.Sleep(time.Until(time.UnixMilli(until)) + 50*time.Millisecond)
		if c := claim(base.Add(3 * time.Second)); c.run == nil {
			t.Fatalf("%s: a claim after the run's lease ended = %+v, want a run", by, c)
		}
		st, err = admin.Status(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if l := st.Last; l == nil || l.Outcome != "lost" || l.Replica != by || l.Finished.UnixMilli() != until {
			t.Errorf("%s: Last = %+v, want the run lost on %s, ended at its lease's end", by, l, by)
		}
		if h := st.History[0]; h.Replica != by || h.Finished.UnixMilli() != until {
			t.Errorf("%s: History[0] = %+v, want the run on %s, ended at its lease's end", by, h, by)
		}
	}
}
