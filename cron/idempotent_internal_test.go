package cron

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wakuwaku-go/wakuwaku/cron/internal/record"
	"github.com/wakuwaku-go/wakuwaku/internal/redistest"
	"github.com/wakuwaku-go/wakuwaku/interval"
	"github.com/wakuwaku-go/wakuwaku/lock"
)

// dropReply is a go-redis hook whose connections lose the reply to one
// write, once armed: Redis executed the command (its reply came), and the
// connection then fails as a reset one does. go-redis sends the command
// again on another connection (MaxRetries), as it does after a read error
// or timeout, and Redis executes it a second time.
type dropReply struct {
	mu      sync.Mutex
	match   func(written []byte) bool // the write whose reply is lost; nil: none
	dropped atomic.Int32              // replies lost so far
}

// arm makes the next write that match accepts lose its reply.
func (d *dropReply) arm(match func(written []byte) bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.match = match
}

// take reports whether written is the write to lose the reply of, and
// disarms d if it is.
func (d *dropReply) take(written []byte) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.match == nil || !d.match(written) {
		return false
	}
	d.match = nil
	return true
}

func (d *dropReply) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := next(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &dropConn{Conn: c, d: d}, nil
	}
}

func (d *dropReply) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (d *dropReply) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// dropConn is a connection of a dropReply.
type dropConn struct {
	net.Conn
	d    *dropReply
	drop atomic.Bool // the reply that comes next is lost
}

func (c *dropConn) Write(b []byte) (int, error) {
	if c.d.take(b) {
		c.drop.Store(true)
	}
	return c.Conn.Write(b)
}

func (c *dropConn) Read(b []byte) (int, error) {
	if c.drop.CompareAndSwap(true, false) {
		// The reply's first bytes say that Redis executed the command.
		_, _ = c.Conn.Read(b)
		_ = c.Conn.Close()
		c.d.dropped.Add(1)
		return 0, io.EOF
	}
	return c.Conn.Read(b)
}

// evalsha returns a match for an EVALSHA of the script sha whose first
// argument, if mode is not empty, is mode.
func evalsha(sha, mode string) func([]byte) bool {
	return func(b []byte) bool {
		return bytes.Contains(b, []byte(sha)) && (mode == "" || bytes.Contains(b, []byte("\r\n"+mode+"\r\n")))
	}
}

// scriptSHAs loads the record's scripts into srv, so that their commands
// are EVALSHAs a match can tell apart, and returns their SHA1s.
func scriptSHAs(t *testing.T, srv *redistest.Server) (claim, complete, heartbeat string) {
	t.Helper()
	rdb := srv.Client(t)
	var shas [3]string
	for i, src := range []string{record.ClaimSrc, record.CompleteSrc, record.HeartbeatSrc} {
		sha, err := rdb.ScriptLoad(t.Context(), src).Result()
		if err != nil {
			t.Fatal(err)
		}
		shas[i] = sha
	}
	return shas[0], shas[1], shas[2]
}

// TestRecordCommandsSentAgain loses Redis's reply to one command of the
// record (a claim of each kind, a completion, a heartbeat, a hello) after
// Redis executed it, so that go-redis sends it again, as it does after a
// read error or timeout: the command sent again with the same token
// answers as the first did. A claim that won used to answer "running,
// mine" the second time: its run never started, and C1 later recorded the
// slot lost.
func TestRecordCommandsSentAgain(t *testing.T) {
	srv := redistest.Start(t)
	claimSHA, completeSHA, heartbeatSHA := scriptSHAs(t, srv)
	rdb := srv.Client(t)
	drop := &dropReply{}
	rdb.AddHook(drop) // before its first connection, which the hook wraps
	ctx := t.Context()
	hourly, daily := interval.AtLeast(time.Hour), interval.MustCron("0 0 * * *")
	newState := func(t *testing.T, every interval.Interval, attempts int) *jobState {
		t.Helper()
		s, err := newJobState(every, LeaseConfig{DB: lock.NewDB(rdb), Name: t.Name(), Attempts: attempts, Backoff: time.Millisecond}, "r0", time.Now)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	tickOf := func(every interval.Interval) *Tick {
		now := time.Now()
		p := every.Plan(now, now)
		return &Tick{Scheduled: p.Scheduled, Slot: p.Slot}
	}
	claim := func(t *testing.T, s *jobState, mode claimMode, tick *Tick, id string) claimed {
		t.Helper()
		c, err := s.claim(ctx, mode, tick, time.Time{}, id)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	// sentAgain checks that the command whose reply was lost was sent
	// again (else the test tested nothing).
	sentAgain := func(t *testing.T, before int32) {
		t.Helper()
		if drop.dropped.Load() != before+1 {
			t.Fatalf("%d replies lost, want 1: the fault did not happen", drop.dropped.Load()-before)
		}
	}
	for _, tc := range []struct {
		name string
		test func(t *testing.T)
	}{
		{"claim of a duration policy's slot", func(t *testing.T) {
			s := newState(t, hourly, 1)
			before := drop.dropped.Load()
			drop.arm(evalsha(claimSHA, "tick"))
			c := claim(t, s, modeTick, tickOf(hourly), "")
			sentAgain(t, before)
			if c.run == nil || c.attempt != 1 || c.trigger != TriggerSchedule {
				t.Errorf("claim sent again = %+v, want a run: attempt 1, schedule", c)
			}
			// F1: the fence it handed out the first time, the record's.
			if f, err := rdb.HGet(ctx, record.Key(s.Name), "fence").Uint64(); err != nil || c.fence == 0 || c.fence != f {
				t.Errorf("claim sent again has fence %d, the record %d (%v); want the record's, not 0", c.fence, f, err)
			}
		}},
		{"claim of a Cron slot", func(t *testing.T) {
			s := newState(t, daily, 1)
			before := drop.dropped.Load()
			drop.arm(evalsha(claimSHA, "tick"))
			c := claim(t, s, modeTick, tickOf(daily), "")
			sentAgain(t, before)
			if c.run == nil || c.attempt != 1 || c.trigger != TriggerSchedule {
				t.Errorf("claim sent again = %+v, want a run: attempt 1, schedule", c)
			}
		}},
		{"claim that records its slot skipped", func(t *testing.T) {
			s := newState(t, daily, 1)
			s.due = func(time.Time) time.Time { return time.Now().Add(-time.Minute) } // the next slot's ticks are due
			tick := tickOf(daily)
			held := claim(t, s, modeTick, tick, "")
			next, _ := daily.NextSlot(tick.Slot.Start)
			before := drop.dropped.Load()
			drop.arm(evalsha(claimSHA, "tick"))
			c := claim(t, s, modeTick, &Tick{Scheduled: next.Start, Slot: next}, "")
			sentAgain(t, before)
			if held.run == nil || c.run != nil || c.recorded != ReasonStillRunning {
				t.Errorf("claim sent again = %+v, want the skip it recorded (%q)", c, ReasonStillRunning)
			}
		}},
		{"paused tick of a duration policy", func(t *testing.T) {
			// C3 for R20 of a duration policy: the skip it recorded is
			// its own, though the interval it skipped is still on.
			s := newState(t, hourly, 1)
			claim(t, s, modeHello, tickOf(hourly), "") // the record, to pause
			if err := NewAdmin(lock.NewDB(rdb)).Pause(ctx, s.Name); err != nil {
				t.Fatal(err)
			}
			before := drop.dropped.Load()
			drop.arm(evalsha(claimSHA, "tick"))
			c := claim(t, s, modeTick, tickOf(hourly), "")
			sentAgain(t, before)
			if c.run != nil || c.recorded != ReasonPaused || c.reason != ReasonPaused {
				t.Errorf("paused tick sent again = %+v, want the skip it recorded (%q)", c, ReasonPaused)
			}
		}},
		{"paused Cron tick that serves a request", func(t *testing.T) {
			// R3 records the slot skipped and R9 runs the request: sent
			// again, the claim answers both, as it did.
			s := newState(t, daily, 1)
			claim(t, s, modeHello, tickOf(daily), "") // the record, to pause
			admin := NewAdmin(lock.NewDB(rdb))
			if err := admin.Pause(ctx, s.Name); err != nil {
				t.Fatal(err)
			}
			if err := admin.RunNow(ctx, s.Name); err != nil {
				t.Fatal(err)
			}
			before := drop.dropped.Load()
			drop.arm(evalsha(claimSHA, "tick"))
			c := claim(t, s, modeTick, tickOf(daily), "")
			sentAgain(t, before)
			if c.run == nil || c.trigger != TriggerRequest || c.recorded != ReasonPaused {
				t.Errorf("paused tick sent again = %+v, want the request's run and the skip it recorded (%q)", c, ReasonPaused)
			}
		}},
		{"claim of a retry", func(t *testing.T) {
			s := newState(t, hourly, 3)
			tick := tickOf(hourly)
			first := claim(t, s, modeTick, tick, "")
			if _, err := s.complete(ctx, first.run, first.attempt, time.Time{}, errors.New("failed"), time.Time{}); err != nil {
				t.Fatal(err)
			}
			time.Sleep(5 * time.Millisecond) // the back-off
			before := drop.dropped.Load()
			drop.arm(evalsha(claimSHA, "retry"))
			c := claim(t, s, modeRetry, tick, first.slot)
			sentAgain(t, before)
			if c.run == nil || c.attempt != 2 || c.trigger != TriggerRetry {
				t.Errorf("retry sent again = %+v, want a run: attempt 2, retry", c)
			}
		}},
		{"completion", func(t *testing.T) {
			s := newState(t, hourly, 1)
			c := claim(t, s, modeTick, tickOf(hourly), "")
			before := drop.dropped.Load()
			drop.arm(evalsha(completeSHA, ""))
			done, err := s.complete(ctx, c.run, c.attempt, time.Time{}, nil, time.Time{})
			sentAgain(t, before)
			if err != nil || !done.held {
				t.Errorf("completion sent again = %+v, %v; want its run held", done, err)
			}
			if n := rdb.LLen(ctx, s.Keys[1]).Val(); n != 1 {
				t.Errorf("history of %d runs, want 1", n)
			}
		}},
		{"heartbeat", func(t *testing.T) {
			s := newState(t, hourly, 1)
			c := claim(t, s, modeTick, tickOf(hourly), "")
			before := drop.dropped.Load()
			drop.arm(evalsha(heartbeatSHA, ""))
			held, err := c.run.Extend(ctx)
			sentAgain(t, before)
			if err != nil || !held {
				t.Errorf("heartbeat sent again = %t, %v; want true", held, err)
			}
		}},
		{"hello", func(t *testing.T) {
			// A Cron slot whose attempt failed: the hello follows it up.
			s := newState(t, daily, 2)
			tick := tickOf(daily)
			first := claim(t, s, modeTick, tick, "")
			if _, err := s.complete(ctx, first.run, first.attempt, time.Time{}, errors.New("failed"), time.Time{}); err != nil {
				t.Fatal(err)
			}
			before := drop.dropped.Load()
			drop.arm(evalsha(claimSHA, "hello"))
			c := claim(t, s, modeHello, tick, "")
			sentAgain(t, before)
			if c.run != nil || !c.follow || c.slot != first.slot {
				t.Errorf("hello sent again = %+v, want a follow-up of slot %s", c, first.slot)
			}
		}},
	} {
		t.Run(tc.name, tc.test)
	}
}

// TestRecordClaimsSentAgainInBatch starts many leased jobs at once, whose
// claims share pipelines (record.Batcher), and loses the replies to the first
// pipeline of several claims after Redis executed them: go-redis sends the
// whole pipeline again, and every job still runs its startup run.
func TestRecordClaimsSentAgainInBatch(t *testing.T) {
	const jobs = 40
	srv := redistest.Start(t)
	claimSHA, _, _ := scriptSHAs(t, srv)
	rdb := srv.Client(t)
	drop := &dropReply{}
	rdb.AddHook(drop) // before its first connection, which the hook wraps
	drop.arm(func(b []byte) bool { return bytes.Count(b, []byte(claimSHA)) >= 2 })
	ran := make(chan string, jobs)
	var mu sync.Mutex
	var skipped []string
	var list []Job
	for i := range jobs {
		name := fmt.Sprintf("job-%02d", i)
		list = append(list, Func(name, interval.AtLeast(time.Hour), func(context.Context, Tick) error {
			ran <- name
			return nil
		}, WithLease(LeaseConfig{DB: lock.NewDB(rdb)})))
	}
	rt, err := Start(list, WithObserver(Observer{RunSkipped: func(t Tick, reason string, err error) {
		mu.Lock()
		defer mu.Unlock()
		skipped = append(skipped, fmt.Sprintf("%s: %s %v", t.Job, reason, err))
	}}))
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Shutdown(context.Background())
	seen := make(map[string]bool)
	deadline := time.After(10 * time.Second)
	for {
		mu.Lock()
		n := len(skipped)
		mu.Unlock()
		if len(seen)+n >= jobs {
			break
		}
		select {
		case name := <-ran:
			seen[name] = true
		case <-time.After(10 * time.Millisecond):
		case <-deadline:
			t.Fatalf("%d of %d jobs ran within 10s, %d skipped", len(seen), jobs, n)
		}
	}
	if drop.dropped.Load() != 1 {
		t.Fatalf("%d replies lost, want 1: the fault did not happen", drop.dropped.Load())
	}
	mu.Lock()
	defer mu.Unlock()
	if len(skipped) > 0 {
		t.Errorf("%d of %d startup runs skipped (the first: %s), want none", len(skipped), jobs, skipped[0])
	}
}
