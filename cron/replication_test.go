package cron_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wakuwaku-go/wakuwaku/cron"
	"github.com/wakuwaku-go/wakuwaku/internal/redistest"
	"github.com/wakuwaku-go/wakuwaku/interval"
	"github.com/wakuwaku-go/wakuwaku/lock"
)

// acks is a go-redis hook that answers each WAIT as a test says: either
// what the server said (a lone redis-server has no replica, so 0), or
// every replica asked for. It checks that each WAIT follows a script in
// the same pipeline, and counts the WAITs by the script before them.
type acks struct {
	t  *testing.T
	mu sync.Mutex
	// ack decides the answer to the WAIT after the script of the given
	// kind, keys and first argument (a claim's mode); n is how many WAITs
	// came before it.
	ack    func(n int, kind string, keys []string, arg string) bool
	waits  int
	byKind map[string]int // "completion", "claim or heartbeat", "control"
}

func (a *acks) DialHook(next redis.DialHook) redis.DialHook { return next }
func (a *acks) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() == "wait" {
			a.t.Errorf("WAIT sent alone, not after a script in its pipeline: %v", cmd.Args())
		}
		return next(ctx, cmd)
	}
}

func (a *acks) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		for i, cmd := range cmds {
			if cmd.Name() != "wait" {
				continue
			}
			if i == 0 || (cmds[i-1].Name() != "evalsha" && cmds[i-1].Name() != "eval") {
				a.t.Errorf("WAIT not right after a script: %v", cmds)
				continue
			}
			if err := cmds[i-1].Err(); err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT") {
				continue // sent again with its source, and its WAIT
			}
			keys := scriptKeys(cmds[i-1].Args())
			arg := ""
			if args := cmds[i-1].Args(); len(args) > 3+len(keys) {
				arg, _ = args[3+len(keys)].(string)
			}
			a.mu.Lock()
			n := a.waits
			a.waits++
			kind := "claim or heartbeat"
			switch {
			case len(keys) == 2 && strings.HasSuffix(keys[1], ":runs") && len(cmds[i-1].Args()) == 3+2+13:
				kind = "completion" // evalsha, sha, 2, the record and its history, 13 ARGV
			case len(cmds[i-1].Args()) == 6: // evalsha, sha, 1, the record, the command, who asks
				kind = "control"
			}
			a.byKind[kind]++
			ok := a.ack(n, kind, keys, arg)
			a.mu.Unlock()
			if w, isInt := cmd.(*redis.IntCmd); isInt && ok && w.Err() == nil {
				w.SetVal(1) // the tests ask for one replica
			}
		}
		return err
	}
}

// count returns how many WAITs followed a script of kind.
func (a *acks) count(kind string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.byKind[kind]
}

// waitFor waits until n WAITs followed a script of kind, and a moment
// more, and fails t unless there were exactly n.
func (a *acks) waitFor(t *testing.T, kind string, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for a.count(kind) < n && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond)
	if got := a.count(kind); got != n {
		t.Fatalf("WAITs after a %s: %d, want %d", kind, got, n)
	}
}

// scriptKeys returns the keys of an EVALSHA or EVAL's arguments.
func scriptKeys(args []any) []string {
	n, _ := args[2].(int)
	var keys []string
	for _, k := range args[3 : 3+n] {
		keys = append(keys, k.(string))
	}
	return keys
}

// replicatedDB returns a DB over srv that waits for one replica, 20 ms at
// most, whose WAITs a answers; ack nil acknowledges every one.
func replicatedDB(t *testing.T, srv *redistest.Server, ack func(n int, kind string, keys []string, arg string) bool) (lock.DB, *acks) {
	if ack == nil {
		ack = func(int, string, []string, string) bool { return true }
	}
	a := &acks{t: t, ack: ack, byKind: make(map[string]int)}
	c := srv.Client(t)
	c.AddHook(a)
	return lock.NewDB(c, lock.WithReplicas(1, 20*time.Millisecond)), a
}

// startReplicated starts one runtime of an hourly leased job over db,
// with a run lease of 2 s, and returns the job's runs, the observer's
// events and the log.
func startReplicated(t *testing.T, db lock.DB, name string, do func(context.Context, cron.Tick) error) (*jobLog, *events, *records) {
	return startReplicatedTTL(t, db, name, 2*time.Second, do)
}

// startReplicatedTTL is startReplicated with a run lease of runTTL.
func startReplicatedTTL(t *testing.T, db lock.DB, name string, runTTL time.Duration, do func(context.Context, cron.Tick) error) (*jobLog, *events, *records) {
	t.Helper()
	log, ev, logs := newJobLog(), &events{}, &records{}
	job := &leasedJob{
		testJob: testJob{name: name, every: interval.AtLeast(time.Hour), process: log.work("r0", do)},
		lease:   cron.LeaseConfig{DB: db, RunTTL: runTTL},
	}
	rt, err := cron.Start([]cron.Job{job}, cron.WithReplica("r0"), cron.WithObserver(ev.observer()), cron.WithLogger(slog.New(logs)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Shutdown(context.Background()) })
	return log, ev, logs
}

// TestReplicationWaitsForReplicas: with lock.WithReplicas, the claim and
// the completion of a run each send their WAIT in their own round trip,
// and a run that the replicas acknowledged runs once.
func TestReplicationWaitsForReplicas(t *testing.T) {
	srv := redistest.Start(t)
	db, a := replicatedDB(t, srv, nil)
	log, _, _ := startReplicated(t, db, "acked", nil)
	log.next(t, "the startup run")
	waitStatus(t, lock.NewDB(srv.Client(t)), "acked", func(st cron.JobStatus) bool { return st.Last != nil })
	a.waitFor(t, "completion", 1)
	if n := a.count("claim or heartbeat"); n != 1 {
		t.Errorf("WAITs after a claim or heartbeat: %d, want 1 (the claim)", n)
	}
	if n := a.count("completion"); n != 1 {
		t.Errorf("WAITs after a completion: %d, want 1", n)
	}
	if runs, _ := log.all(); len(runs) != 1 {
		t.Errorf("runs: %d, want 1", len(runs))
	}
}

// TestReplicationClaimConfirmed: a claim that the replicas did not
// acknowledge in its own round trip starts its run once a heartbeat is
// acknowledged (R17), and only then.
func TestReplicationClaimConfirmed(t *testing.T) {
	srv := redistest.Start(t)
	db, a := replicatedDB(t, srv, func(n int, _ string, _ []string, _ string) bool { return n >= 2 })
	log, _, _ := startReplicated(t, db, "confirmed", nil)
	r := log.next(t, "the startup run, once a heartbeat is acknowledged")
	if got := a.count("claim or heartbeat"); got != 3 {
		t.Errorf("WAITs after a claim or heartbeat before the run: %d, want 3 (the claim, a heartbeat not acknowledged, one acknowledged)", got)
	}
	if r.tick.Attempt != 1 {
		t.Errorf("attempt %d, want 1", r.tick.Attempt)
	}
}

// TestReplicationClaimNeverAcknowledged: a claim whose write no replica
// acknowledges within half the run lease does not run: the tick is
// skipped with ReasonNotReplicated, at Warn.
func TestReplicationClaimNeverAcknowledged(t *testing.T) {
	srv := redistest.Start(t)
	db, _ := replicatedDB(t, srv, func(int, string, []string, string) bool { return false })
	log, ev, logs := startReplicated(t, db, "unacked", nil)
	deadline := time.Now().Add(10 * time.Second)
	for len(ev.of("skipped")) == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	skipped := ev.of("skipped")
	if len(skipped) != 1 || skipped[0].reason != cron.ReasonNotReplicated {
		t.Fatalf("skips: %+v, want one with %q", skipped, cron.ReasonNotReplicated)
	}
	if runs, _ := log.all(); len(runs) != 0 {
		t.Errorf("runs: %d, want 0", len(runs))
	}
	wantRecord(t, logs, "cron job skipped a run", 1, slog.LevelWarn, "reason", cron.ReasonNotReplicated)
}

// TestReplicationClaimLostInFailover: a claim that was not acknowledged
// and then vanished from Redis (a failover to a replica that never had
// it) is sent again, and its slot runs once.
func TestReplicationClaimLostInFailover(t *testing.T) {
	srv := redistest.Start(t)
	raw := srv.Client(t)
	var once sync.Once
	claims := 0
	db, _ := replicatedDB(t, srv, func(_ int, _ string, keys []string, mode string) bool {
		if mode == "tick" {
			claims++
		}
		if mode == "tick" && claims == 1 {
			// The replica promoted now never had the claim.
			once.Do(func() {
				if err := raw.Del(context.Background(), keys...).Err(); err != nil {
					t.Error(err)
				}
			})
			return false
		}
		return true
	})
	log, ev, _ := startReplicated(t, db, "lost-claim", nil)
	log.next(t, "the startup run, claimed again")
	time.Sleep(100 * time.Millisecond)
	if runs, _ := log.all(); len(runs) != 1 {
		t.Errorf("runs: %d, want 1", len(runs))
	}
	if s := ev.of("skipped"); len(s) != 0 {
		t.Errorf("skips: %+v, want none", s)
	}
}

// TestReplicationCompletionSentAgain: a completion that the replicas did
// not acknowledge is sent again (R18): the second finds the run recorded,
// writes nothing of it twice, and is acknowledged.
func TestReplicationCompletionSentAgain(t *testing.T) {
	srv := redistest.Start(t)
	raw := srv.Client(t)
	completions := 0
	db, a := replicatedDB(t, srv, func(_ int, kind string, _ []string, _ string) bool {
		if kind == "completion" {
			completions++
			return completions > 1
		}
		return true
	})
	log, _, logs := startReplicated(t, db, "completion", nil)
	log.next(t, "the startup run")
	a.waitFor(t, "completion", 2)
	wantRecord(t, logs, "cron job's run was recorded, but not acknowledged by enough replicas; recording it again", 1, slog.LevelWarn)
	st := waitStatus(t, lock.NewDB(raw), "completion", func(st cron.JobStatus) bool { return st.Last != nil })
	if st.Last.Outcome != "ok" || st.SlotState != "done" {
		t.Errorf("status: last %+v, slot %q; want ok and done", st.Last, st.SlotState)
	}
	history, err := raw.LLen(t.Context(), "@@wakuwaku-cron:{@@wakuwaku-entity:Lock:cron:completion}:runs").Result()
	if err != nil || history != 1 {
		t.Errorf("history: %d entries, %v; want 1", history, err)
	}
	if got := logs.find("cron job's run ended after its run lease was lost"); len(got) != 0 {
		t.Errorf("the completion sent again was taken for a lost run: %v", got)
	}
}

// TestReplicationAdmin: an operator's command that the replicas did not
// acknowledge fails with lock.ErrNotReplicated, and the master has it.
func TestReplicationAdmin(t *testing.T) {
	srv := redistest.Start(t)
	good, _ := replicatedDB(t, srv, nil)
	log, _, _ := startReplicated(t, good, "operated", nil)
	log.next(t, "the startup run")
	short, a := replicatedDB(t, srv, func(int, string, []string, string) bool { return false })
	admin := cron.NewAdmin(short)
	if err := admin.Pause(t.Context(), "operated"); !errors.Is(err, lock.ErrNotReplicated) {
		t.Errorf("Pause = %v, want lock.ErrNotReplicated", err)
	}
	if n := a.count("control"); n != 1 {
		t.Errorf("WAITs after a control script: %d, want 1", n)
	}
	st := waitStatus(t, lock.NewDB(srv.Client(t)), "operated", func(cron.JobStatus) bool { return true })
	if !st.Paused {
		t.Error("the master lost the pause")
	}
	if err := cron.NewAdmin(good).Resume(t.Context(), "operated"); err != nil {
		t.Errorf("Resume acknowledged = %v", err)
	}
}

// TestReplicationNeedsOneConnection: WithReplicas needs a client that can
// send a script and its WAIT on one connection; Start refuses a Ring's.
func TestReplicationNeedsOneConnection(t *testing.T) {
	srv := redistest.Start(t)
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": srv.Addr()}})
	t.Cleanup(func() { ring.Close() })
	job := &leasedJob{
		testJob: testJob{name: "ring", every: interval.AtLeast(time.Hour)},
		lease:   cron.LeaseConfig{DB: lock.NewDB(ring, lock.WithReplicas(1, time.Second))},
	}
	_, err := cron.Start([]cron.Job{job})
	if !errors.Is(err, cron.ErrInvalidJob) || !strings.Contains(err.Error(), "*redis.Ring") {
		t.Errorf("Start = %v, want ErrInvalidJob naming *redis.Ring", err)
	}
}

// TestReplicationRealReplica runs against a master and a real replica: a
// run-now's claim that the replica acknowledges runs; while the replica
// is stopped (SIGSTOP), a run-now's claim is not acknowledged and does
// not run; once it resumes, the next one runs.
func TestReplicationRealReplica(t *testing.T) {
	master := redistest.Start(t, "--repl-diskless-sync-delay", "0")
	_, port, _ := strings.Cut(master.Addr(), ":")
	replica := redistest.Start(t, "--replicaof", "127.0.0.1", port)
	ctx := t.Context()
	redistest.WaitReplicas(t, master, 1)
	// A replica on a busy machine can take a while to answer: a WAIT of
	// up to 500 ms, and 3 s (half the run lease) to confirm a claim.
	db := lock.NewDB(master.Client(t), lock.WithReplicas(1, 500*time.Millisecond))
	log, ev, logs := startReplicatedTTL(t, db, "real", 6*time.Second, nil)
	defer func() {
		if t.Failed() {
			t.Logf("events: %+v", ev.of("skipped"))
			for _, r := range logs.all() {
				t.Logf("log: %v %s", r.Level, r.Message)
			}
		}
	}()
	log.next(t, "the startup run")
	// The packed fields: run = token|since|until|try|why|slot|beat|by, last =
	// end|start|slot|try|why|….
	part := func(v string, i int) string {
		if p := strings.Split(v, "|"); i < len(p) {
			return p[i]
		}
		return ""
	}
	if v, err := replica.Client(t).HGet(ctx, "@@wakuwaku-cron:{@@wakuwaku-entity:Lock:cron:real}", "run").Result(); err != nil || part(v, 4) != "schedule" {
		// The claim was acknowledged before the run began: the replica
		// had the run lease by then (the completion may have removed it
		// since, so read the last run if not).
		last, lerr := replica.Client(t).HGet(ctx, "@@wakuwaku-cron:{@@wakuwaku-entity:Lock:cron:real}", "last").Result()
		if lerr != nil || part(last, 4) != "schedule" {
			t.Errorf("the replica has neither the run (%q, %v) nor its end (%q, %v)", v, err, last, lerr)
		}
	}
	admin := cron.NewAdmin(lock.NewDB(master.Client(t)))
	waitStatus(t, lock.NewDB(master.Client(t)), "real", func(st cron.JobStatus) bool { return st.Last != nil })

	replica.Pause(t)
	if err := admin.RunNow(ctx, "real"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(ev.of("skipped")) == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if s := ev.of("skipped"); len(s) != 1 || s[0].reason != cron.ReasonNotReplicated {
		t.Fatalf("skips while the replica is stopped: %+v, want one with %q", s, cron.ReasonNotReplicated)
	}
	if runs, _ := log.all(); len(runs) != 1 {
		t.Fatalf("runs: %d, want only the startup run", len(runs))
	}
	replica.Resume(t)
	// The unacknowledged claim's run lease (2 s) lapses; then a request
	// runs.
	st := waitStatus(t, lock.NewDB(master.Client(t)), "real", func(cron.JobStatus) bool { return true })
	if st.Running != nil {
		time.Sleep(time.Until(st.Running.Deadline) + 100*time.Millisecond)
	}
	if err := admin.RunNow(ctx, "real"); err != nil {
		t.Fatal(err)
	}
	if r := log.next(t, "a requested run once the replica is back"); r.tick.Trigger != cron.TriggerRequest {
		t.Errorf("trigger %v, want request", r.tick.Trigger)
	}
}
