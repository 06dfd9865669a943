package cron_test

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wakuwaku-go/wakuwaku/cron"
	"github.com/wakuwaku-go/wakuwaku/cron/internal/record"
	"github.com/wakuwaku-go/wakuwaku/internal/redistest"
	"github.com/wakuwaku-go/wakuwaku/interval"
	"github.com/wakuwaku-go/wakuwaku/lock"
)

// The tests of this file hold Shutdown to its contract (PROTOCOL.md,
// "Shutdown"), on a real redis-server: the outcomes already decided are
// sent while its context lasts and Redis answers, and once it returns
// nothing of the runtime sends a command again.

// wire watches a client's commands: it fails the first completion when
// failCompletion is set, holds each command for delay before it goes on,
// and counts the commands on their way and those that began after closed
// was set.
type wire struct {
	failCompletion atomic.Bool
	failed         chan struct{} // closed when the completion failed
	delay          time.Duration

	mu       sync.Mutex
	inFlight int
	closed   bool
	after    []string // commands that began after closed
	onWay    []string // commands on their way when closed was set
	names    map[int]string
	next     int
}

var completeSHA = func() string {
	h := sha1.Sum([]byte(record.CompleteSrc))
	return hex.EncodeToString(h[:])
}()

func newWire(delay time.Duration) *wire {
	return &wire{failed: make(chan struct{}), delay: delay, names: make(map[int]string)}
}

// isCompletion reports whether cmd runs the completion script.
func isCompletion(cmd redis.Cmder) bool {
	args := cmd.Args()
	if len(args) < 2 {
		return false
	}
	s, _ := args[1].(string)
	return s == completeSHA || s == record.CompleteSrc
}

func (w *wire) begin(cmd redis.Cmder) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.inFlight++
	w.next++
	w.names[w.next] = cmd.Name()
	if w.closed {
		name := cmd.Name()
		if args := cmd.Args(); len(args) > 1 {
			if s, ok := args[1].(string); ok && len(s) > 12 {
				name += " " + s[:12]
			}
		}
		w.after = append(w.after, name)
	}
	return w.next
}

func (w *wire) end(id int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.inFlight--
	delete(w.names, id)
}

// close marks the moment Shutdown returned, and returns the commands on
// their way then.
func (w *wire) close() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closed = true
	for _, n := range w.names {
		w.onWay = append(w.onWay, n)
	}
	return w.onWay
}

func (w *wire) began() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.after...)
}

func (w *wire) DialHook(next redis.DialHook) redis.DialHook { return next }

func (w *wire) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		id := w.begin(cmd)
		defer w.end(id)
		if isCompletion(cmd) && w.failCompletion.CompareAndSwap(true, false) {
			cmd.SetErr(errors.New("connection reset (a blip)"))
			close(w.failed)
			return cmd.Err()
		}
		if w.delay > 0 {
			time.Sleep(w.delay)
		}
		return next(ctx, cmd)
	}
}

func (w *wire) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		id := w.begin(cmds[0])
		defer w.end(id)
		for _, cmd := range cmds {
			if isCompletion(cmd) && w.failCompletion.CompareAndSwap(true, false) {
				for _, c := range cmds {
					c.SetErr(errors.New("connection reset (a blip)"))
				}
				close(w.failed)
				return cmds[0].Err()
			}
		}
		if w.delay > 0 {
			time.Sleep(w.delay)
		}
		return next(ctx, cmds)
	}
}

// TestShutdownSendsCompletionAgain fails a successful run's completion
// once, and calls Shutdown, with a context that never ends, while the
// resend (R13) waits out its back-off: Shutdown returns once the run is
// recorded ok, and nothing is sent after. The resend used to give up at
// Shutdown, which returned nil with the run still in progress in the
// record: its run lease lapsed, C1 recorded the success lost, and with
// attempts left another replica ran the slot again.
func TestShutdownSendsCompletionAgain(t *testing.T) {
	for _, attempts := range []int{1, 2} {
		t.Run(map[int]string{1: "one attempt", 2: "two attempts"}[attempts], func(t *testing.T) {
			srv := redistest.Start(t)
			w := newWire(0)
			w.failCompletion.Store(true)
			c := srv.Client(t)
			c.AddHook(w)
			ran := make(chan struct{}, 4)
			job := &leasedJob{
				testJob: testJob{name: "invoice", every: interval.AtLeast(time.Hour), process: func(context.Context, cron.Tick) error {
					ran <- struct{}{}
					return nil
				}},
				lease: cron.LeaseConfig{DB: lock.NewDB(c), Attempts: attempts, RunTTL: 3 * time.Second, Backoff: 500 * time.Millisecond},
			}
			rt, err := cron.Start([]cron.Job{job}, cron.WithReplica("a"))
			if err != nil {
				t.Fatal(err)
			}
			<-ran
			select {
			case <-w.failed:
			case <-time.After(5 * time.Second):
				t.Fatal("the run's completion was not sent within 5s")
			}
			if err := rt.Shutdown(context.Background()); err != nil {
				t.Errorf("Shutdown = %v, want nil", err)
			}
			if onWay := w.close(); len(onWay) > 0 {
				t.Errorf("Shutdown returned with commands on their way: %v", onWay)
			}
			st, err := cron.NewAdmin(lock.NewDB(srv.Client(t))).Status(t.Context(), "invoice")
			if err != nil {
				t.Fatal(err)
			}
			if st.Running != nil || len(st.History) != 1 || st.History[0].Outcome != "ok" {
				t.Errorf("after Shutdown: running %+v, history %+v; want no run and one run ok", st.Running, st.History)
			}
			time.Sleep(500 * time.Millisecond)
			if after := w.began(); len(after) > 0 {
				t.Errorf("commands sent after Shutdown returned: %v", after)
			}
		})
	}
}

// TestShutdownWaitsForAnnouncement starts a Cron job whose startup tick
// comes after its slot's claim window, on a client whose commands take
// 400ms to go: the replica announces the job instead (E6), and Shutdown,
// called at once, returns only when that announcement has come back, and
// nothing is sent after. The announcement used to go from a goroutine
// that Shutdown did not wait for: it reached Redis after Shutdown
// returned nil.
func TestShutdownWaitsForAnnouncement(t *testing.T) {
	srv := redistest.Start(t)
	w := newWire(400 * time.Millisecond)
	c := srv.Client(t)
	// Three seconds into a 10-second slot that can be claimed for one.
	now := time.Now()
	S := now.Truncate(10 * time.Second)
	if now.Sub(S) > 3*time.Second {
		S = S.Add(10 * time.Second)
	}
	time.Sleep(time.Until(S.Add(3 * time.Second)))
	hello := make(chan struct{})
	var once sync.Once
	c.AddHook(announced{func() { once.Do(func() { close(hello) }) }})
	c.AddHook(w) // after announced: the hello is on its way when announced sees it
	job := &leasedJob{
		testJob: testJob{name: "report", every: interval.MustCron("*/10 * * * * *")},
		lease:   cron.LeaseConfig{DB: lock.NewDB(c), TTL: time.Second},
	}
	rt, err := cron.Start([]cron.Job{job}, cron.WithReplica("a"))
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-hello:
	case <-time.After(5 * time.Second):
		t.Fatal("the job was not announced within 5s")
	}
	if err := rt.Shutdown(context.Background()); err != nil {
		t.Errorf("Shutdown = %v, want nil", err)
	}
	if onWay := w.close(); len(onWay) > 0 {
		t.Errorf("Shutdown returned with commands on their way: %v", onWay)
	}
	time.Sleep(time.Second)
	if after := w.began(); len(after) > 0 {
		t.Errorf("commands sent after Shutdown returned: %v", after)
	}
}

// announced calls f when a hello (E6) begins on its way: the claim
// script in mode hello.
type announced struct{ f func() }

func (a announced) DialHook(next redis.DialHook) redis.DialHook { return next }
func (a announced) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		a.see(cmd)
		return next(ctx, cmd)
	}
}
func (a announced) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			a.see(cmd)
		}
		return next(ctx, cmds)
	}
}

func (a announced) see(cmd redis.Cmder) {
	for _, arg := range cmd.Args() {
		if s, ok := arg.(string); ok && strings.EqualFold(s, "hello") {
			a.f()
			return
		}
	}
}

// TestShutdownWithRedisGone kills Redis while an hourly leased run is
// going, lets the run return, and calls Shutdown with a context that never
// ends: the completion's resends (R13) end with the run lease, and
// Shutdown returns nil soon after. The resends used to go on, once
// Shutdown began, until the slot's claim window ended too: an hour for
// this job, and Shutdown hung with them.
func TestShutdownWithRedisGone(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client(t)
	running, release := make(chan struct{}), make(chan struct{})
	const runTTL = 2 * time.Second
	job := &leasedJob{
		testJob: testJob{name: "report", every: interval.AtLeast(time.Hour), process: func(context.Context, cron.Tick) error {
			close(running)
			<-release
			return nil
		}},
		lease: cron.LeaseConfig{DB: lock.NewDB(c), RunTTL: runTTL, Backoff: 100 * time.Millisecond},
	}
	rt, err := cron.Start([]cron.Job{job}, cron.WithReplica("a"))
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-running:
	case <-time.After(5 * time.Second):
		t.Fatal("the job did not run within 5s")
	}
	srv.Kill(t)
	close(release)
	done := make(chan error, 1)
	go func() { done <- rt.Shutdown(context.Background()) }()
	// The run lease ends at most runTTL after the run returned; the
	// bound is generous for a loaded machine, and far below the hour the
	// slot's window lasts.
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Shutdown = %v, want nil", err)
		}
	case <-time.After(runTTL + 20*time.Second):
		t.Fatal("Shutdown did not return within 20s of the run lease's end, with Redis gone")
	}
}

// TestShutdownGaveUpWithClaimOnItsWay fails a slot's first attempt, and
// holds its retry's claim (E2, planned by a timer of the replica's
// background work) on its way to Redis (a slow network: the bytes are out,
// so the claim is executed whatever the client's context says) until
// Shutdown, whose context ends first, gave up and returned; the claim then
// wins. The runtime must not run the job for it, nor send anything (a
// heartbeat, a completion): it starts no command after Shutdown gave up,
// and the run lease runs out by itself. It used to run the job with an
// ended context and send the run's heartbeat after Shutdown had returned
// (the simulator's seed 51132, a look's claim held by a stall of Redis).
func TestShutdownGaveUpWithClaimOnItsWay(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client(t)
	hold := &claimHold{n: 2, held: make(chan struct{}), release: make(chan struct{})}
	w := newWire(0)
	c.AddHook(w) // before hold: the held claim is on its way when w sees it
	c.AddHook(hold)
	var returned, startedAfter atomic.Bool
	job := &leasedJob{
		testJob: testJob{name: "rebuild", every: interval.AtLeast(time.Hour), process: func(context.Context, cron.Tick) error {
			return errors.New("index locked")
		}},
		lease: cron.LeaseConfig{DB: lock.NewDB(c), RunTTL: 900 * time.Millisecond, Attempts: 2, Backoff: 100 * time.Millisecond},
	}
	var logs records
	rt, err := cron.Start([]cron.Job{job}, cron.WithReplica("a"), cron.WithLogger(slog.New(&logs)),
		cron.WithObserver(cron.Observer{RunStarted: func(cron.Tick) { startedAfter.Store(returned.Load()) }}))
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-hold.held:
	case <-time.After(5 * time.Second):
		t.Fatal("no retry's claim within 5s")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if err := rt.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Shutdown = %v, want context.DeadlineExceeded: it gave up on the claim", err)
	}
	returned.Store(true)
	w.close()
	close(hold.release)
	time.Sleep(1500 * time.Millisecond) // past a heartbeat's due time
	if startedAfter.Load() {
		t.Error("a run started, for a claim answered after Shutdown gave up")
	}
	if after := w.began(); len(after) > 0 {
		t.Errorf("commands sent after Shutdown returned: %v", after)
	}
	if got := len(logs.find(msgClaimAfterShutdown)); got != 1 {
		t.Errorf("%d Warn records %q, want 1", got, msgClaimAfterShutdown)
		for _, r := range logs.all() {
			t.Logf("%v %s", r.Level, r.Message)
		}
	}
}

const msgClaimAfterShutdown = "cron job's claim was answered after Shutdown gave up waiting; not run, its run lease runs out by itself"

// claimHold holds the n-th claim (the claim script) until release is
// closed, then sends it whatever its context says, as a network that has
// its bytes already.
type claimHold struct {
	n       int
	mu      sync.Mutex
	seen    int
	held    chan struct{}
	release chan struct{}
}

func (h *claimHold) first(cmd redis.Cmder) bool {
	args := cmd.Args()
	if len(args) < 2 {
		return false
	}
	s, _ := args[1].(string)
	if s != claimSHA && s != record.ClaimSrc {
		return false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.seen++
	return h.seen == h.n
}

var claimSHA = func() string {
	h := sha1.Sum([]byte(record.ClaimSrc))
	return hex.EncodeToString(h[:])
}()

func (h *claimHold) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *claimHold) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if h.first(cmd) {
			close(h.held)
			<-h.release
			return next(context.WithoutCancel(ctx), cmd)
		}
		return next(ctx, cmd)
	}
}

func (h *claimHold) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			if h.first(cmd) {
				close(h.held)
				<-h.release
				return next(context.WithoutCancel(ctx), cmds)
			}
		}
		return next(ctx, cmds)
	}
}
