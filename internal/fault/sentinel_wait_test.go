package fault_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/wakuwaku-go/wakuwaku/internal/fault"
	"github.com/wakuwaku-go/wakuwaku/internal/redistest"
	"github.com/wakuwaku-go/wakuwaku/lock"
)

// replLag is the latency the proxy between master and replica adds to the
// replication link, each way: a replica a little behind, as one on another
// host is.
const replLag = 2 * time.Millisecond

// failoverNames is how many locks a round takes before the master dies.
const failoverNames = 50

// TestSentinelFailoverWait measures what lock.WithReplicas buys in a
// Sentinel failover. Each round starts a master, a replica that follows it
// through a proxy adding replLag each way, and a Sentinel; a holder takes
// failoverNames locks one after the other through a failover client, and
// right after the last one the master's host fails: the replication link is
// cut (what was in flight is lost, as with a crashed host; a SIGKILLed
// process on loopback would still have its kernel deliver it) and the
// master is killed. Once the Sentinel has promoted the replica, a second
// holder tries every name the first one holds, whose leases (60 s) are all
// live: each it gets is a lock handed to a second holder. Rounds alternate
// between a Db without and with WithReplicas(1, 1 s).
//
// Pass: with WithReplicas, no lock is handed out twice, and every acquire
// either got a lock the replica had or failed with ErrNotReplicated. The
// figures without it are published, not checked: they show the window.
func TestSentinelFailoverWait(t *testing.T) {
	rounds := fault.Pick(2, 10)
	type tally struct{ taken, stolen, notReplicated, rounds int }
	var without, with tally
	start := time.Now()
	for r := range 2 * rounds {
		wait := r%2 == 1
		taken, stolen, nr := failoverRound(t, wait)
		tl := &without
		if wait {
			tl = &with
		}
		tl.taken += taken
		tl.stolen += stolen
		tl.notReplicated += nr
		tl.rounds++
		t.Logf("round %d (WithReplicas %v): %d locks taken, %d handed to a second holder after the failover, %d ErrNotReplicated", r, wait, taken, stolen, nr)
	}
	if with.stolen != 0 {
		t.Errorf("with WithReplicas, %d of %d locks were handed to a second holder after the failover, want 0", with.stolen, with.taken)
	}
	if with.taken == 0 {
		t.Error("with WithReplicas, no lock was taken")
	}
	secs := time.Since(start).Seconds()
	for _, f := range []struct {
		name string
		tl   tally
	}{{"Sentinel failover, no WAIT", without}, {"Sentinel failover, WithReplicas(1, 1s)", with}} {
		fault.Publish(t, fault.Figures{
			Scenario: f.name,
			Seconds:  secs,
			Acquired: f.tl.taken,
			Errors:   f.tl.notReplicated,
			Faults:   fmt.Sprintf("%d master crashes (link cut + SIGKILL) right after %d acquires, replication lag %v each way", f.tl.rounds, failoverNames, replLag),
			Notes: []string{
				fmt.Sprintf("locks handed to a second holder after the failover: %d of %d", f.tl.stolen, f.tl.taken),
				fmt.Sprintf("acquires refused with ErrNotReplicated: %d", f.tl.notReplicated),
			},
		})
	}
}

// failoverRound runs one round of TestSentinelFailoverWait and returns how
// many locks the first holder got, how many of those the second got after
// the failover, and how many acquires failed with ErrNotReplicated.
func failoverRound(t *testing.T, wait bool) (taken, stolen, notReplicated int) {
	t.Helper()
	ctx := t.Context()
	master := redistest.Start(t, "--repl-diskless-sync-delay", "0")
	link := fault.NewProxy(t, master.Addr())
	link.SetLatency(replLag, 0)
	_, port, _ := strings.Cut(link.Addr(), ":")
	replica := redistest.Start(t, "--replicaof", "127.0.0.1", port)
	if n, err := master.Client(t).Wait(ctx, 1, 10*time.Second).Result(); n != 1 || err != nil {
		t.Fatalf("the replica did not connect: WAIT = %v, %v", n, err)
	}
	sentinel := redistest.StartSentinel(t, master)
	sc := redis.NewSentinelClient(&redis.Options{Addr: sentinel.Addr(), Protocol: 2, DisableIdentity: true})
	t.Cleanup(func() { sc.Close() })
	set := func(opt, v string) {
		if err := sc.Set(ctx, redistest.SentinelMaster, opt, v).Err(); err != nil {
			t.Fatalf("SENTINEL SET %s: %v", opt, err)
		}
	}
	// The Sentinel takes the master for dead after 5 s without an answer
	// (the rig's setting) while the holder takes its locks, and after
	// 200 ms once the master is killed: on a busy machine a master that
	// is alive but slow to answer missed 200 ms, and the Sentinel failed
	// it over in the middle of the acquires, before the test's crash
	// (seen as "use of closed network connection": the failover client
	// closes its connections to the old master).
	set("failover-timeout", "2000")
	_, rport, _ := strings.Cut(replica.Addr(), ":")
	poll(t, 20*time.Second, "the Sentinel to see the replica", func() bool {
		rs, err := sc.Replicas(ctx, redistest.SentinelMaster).Result()
		return err == nil && len(rs) == 1 && rs[0]["port"] == rport && rs[0]["flags"] == "slave" && rs[0]["master-link-status"] == "ok"
	})

	var opts []lock.DbOption
	if wait {
		opts = append(opts, lock.WithReplicas(1, time.Second))
	}
	first := lock.NewDb(failoverClient(t, sentinel), opts...)
	l := lock.New[int]("failover", time.Minute)
	var toks []int
	for i := range failoverNames {
		tok, err := l.TryLock(ctx, first, i)
		switch {
		case errors.Is(err, lock.ErrNotReplicated):
			notReplicated++
		case err != nil:
			addr, aerr := sc.GetMasterAddrByName(ctx, redistest.SentinelMaster).Result()
			t.Fatalf("TryLock(%d) before the failover: %v (the Sentinel's master: %v, %v; the test's master %s, replica %s)", i, err, addr, aerr, master.Addr(), replica.Addr())
		case tok == nil:
			t.Fatalf("TryLock(%d) of a free name = nil", i)
		default:
			toks = append(toks, i)
		}
	}
	// The master's host fails: what is in flight on its link is lost.
	set("down-after-milliseconds", "200")
	link.Blackhole()
	link.Cut()
	master.Kill(t)

	poll(t, 30*time.Second, "the Sentinel to promote the replica", func() bool {
		addr, err := sc.GetMasterAddrByName(ctx, redistest.SentinelMaster).Result()
		return err == nil && len(addr) == 2 && addr[1] == rport
	})
	poll(t, 10*time.Second, "the replica to take writes", func() bool {
		role, err := replica.Client(t).Do(ctx, "ROLE").Slice()
		return err == nil && len(role) > 0 && role[0] == "master"
	})
	second := lock.NewDb(failoverClient(t, sentinel))
	for _, i := range toks {
		tok, err := l.TryLock(ctx, second, i)
		if err != nil {
			t.Fatalf("TryLock(%d) after the failover: %v", i, err)
		}
		if tok != nil {
			stolen++
		}
	}
	return len(toks), stolen, notReplicated
}

// failoverClient is a Sentinel failover client with the rig's timeouts.
func failoverClient(t *testing.T, s *redistest.Sentinel) *redis.Client {
	c := redis.NewFailoverClient(&redis.FailoverOptions{
		MasterName:            redistest.SentinelMaster,
		SentinelAddrs:         []string{s.Addr()},
		ContextTimeoutEnabled: true,
		DialTimeout:           time.Second,
		MaxRetries:            -1,
	})
	t.Cleanup(func() { c.Close() })
	return c
}

// poll calls ok every 20 ms until it reports true, failing the test with
// what it waited for after limit.
func poll(t *testing.T, limit time.Duration, what string, ok func() bool) {
	t.Helper()
	end := time.Now().Add(limit)
	for !ok() {
		if time.Now().After(end) {
			t.Fatalf("timed out after %v waiting for %s", limit, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
