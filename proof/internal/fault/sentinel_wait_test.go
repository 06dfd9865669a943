package fault_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/wakuwaku-go/wakuwaku/internal/redistest"
	"github.com/wakuwaku-go/wakuwaku/lock"
	"github.com/wakuwaku-go/wakuwaku/proof/internal/fault"
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
// between a DB without and with WithReplicas(1, 1 s).
//
// Pass: with WithReplicas, no lock is handed out twice, and every acquire
// either got a lock the replica had or failed with ErrNotReplicated;
// without it, some lock is (the window). How many is published, not
// checked.
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
	// The window WithReplicas closes (RELIABILITY.md, Sentinel failover and
	// WithReplicas): without it, the last acquires, still on the lagging
	// link when the master's host fails, are lost with it (at least 1 in
	// each of 10 long rounds). Its size is a figure; that it is open is
	// what the scenario shows.
	if without.stolen == 0 {
		t.Errorf("without WithReplicas, none of %d locks was handed to a second holder after the failover in %d rounds; want some: the window the scenario shows", without.taken, without.rounds)
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
	g := startSentinelGroup(t, 1, replLag)
	master, replica, sentinel, sc := g.master, g.replicas[0], g.sentinel, g.sc

	var opts []lock.DBOption
	if wait {
		opts = append(opts, lock.WithReplicas(1, time.Second))
	}
	first := lock.NewDB(failoverClient(t, sentinel), opts...)
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
	g.crash(t)
	g.promoted(t)
	second := lock.NewDB(failoverClient(t, sentinel))
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

// sentinelGroup is a master, replicas that each follow it through a
// proxy adding a replication lag each way, and a Sentinel that monitors them, as one
// round of a failover scenario starts them.
type sentinelGroup struct {
	master   *redistest.Server
	replicas []*redistest.Server
	links    []*fault.Proxy
	sentinel *redistest.Sentinel
	sc       *redis.SentinelClient
}

// startSentinelGroup starts a sentinelGroup of n replicas lag behind and
// returns once they have synced and the Sentinel sees them.
func startSentinelGroup(t *testing.T, n int, lag time.Duration) *sentinelGroup {
	t.Helper()
	ctx := t.Context()
	g := &sentinelGroup{master: redistest.Start(t, "--repl-diskless-sync-delay", "0")}
	ports := make(map[string]bool)
	for range n {
		link := fault.NewProxy(t, g.master.Addr())
		link.SetLatency(lag, 0)
		_, port, _ := strings.Cut(link.Addr(), ":")
		replica := redistest.Start(t, "--replicaof", "127.0.0.1", port)
		g.links, g.replicas = append(g.links, link), append(g.replicas, replica)
		_, rport, _ := strings.Cut(replica.Addr(), ":")
		ports[rport] = true
	}
	redistest.WaitReplicas(t, g.master, n)
	g.sentinel = redistest.StartSentinel(t, g.master)
	g.sc = redis.NewSentinelClient(&redis.Options{Addr: g.sentinel.Addr(), Protocol: 2, DisableIdentity: true})
	t.Cleanup(func() { g.sc.Close() })
	// The Sentinel takes the master for dead after 5 s without an answer
	// (the rig's setting) while the scenario runs, and after 200 ms once
	// the master is killed (see crash): on a busy machine a master that
	// is alive but slow to answer missed 200 ms, and the Sentinel failed
	// it over in the middle of the acquires, before the test's crash
	// (seen as "use of closed network connection": the failover client
	// closes its connections to the old master).
	g.set(t, "failover-timeout", "2000")
	poll(t, 20*time.Second, "the Sentinel to see the replicas", func() bool {
		rs, err := g.sc.Replicas(ctx, redistest.SentinelMaster).Result()
		if err != nil || len(rs) != n {
			return false
		}
		for _, r := range rs {
			if !ports[r["port"]] || r["flags"] != "slave" || r["master-link-status"] != "ok" {
				return false
			}
		}
		return true
	})
	return g
}

// set sets one of the Sentinel's options for the group's master.
func (g *sentinelGroup) set(t *testing.T, opt, v string) {
	t.Helper()
	if err := g.sc.Set(t.Context(), redistest.SentinelMaster, opt, v).Err(); err != nil {
		t.Fatalf("SENTINEL SET %s: %v", opt, err)
	}
}

// crash fails the master's host: what is in flight on its links is lost
// (a SIGKILLed process on loopback would still have its kernel deliver
// it), and the master is killed. The Sentinel takes it for dead after
// 200 ms.
func (g *sentinelGroup) crash(t *testing.T) {
	t.Helper()
	// The links go dark first: the Sentinel's round trip that follows
	// would otherwise give the replicas a millisecond or more to catch
	// up.
	for _, link := range g.links {
		link.Blackhole()
	}
	g.set(t, "down-after-milliseconds", "200")
	for _, link := range g.links {
		link.Cut()
	}
	g.master.Kill(t)
}

// promoted waits until the Sentinel has promoted a replica and it takes
// writes, and returns it.
func (g *sentinelGroup) promoted(t *testing.T) *redistest.Server {
	t.Helper()
	ctx := t.Context()
	var promoted *redistest.Server
	// A Sentinel whose failover attempt timed out (failover-timeout, 2 s)
	// tries again after twice that.
	poll(t, time.Minute, "the Sentinel to promote a replica", func() bool {
		addr, err := g.sc.GetMasterAddrByName(ctx, redistest.SentinelMaster).Result()
		if err != nil || len(addr) != 2 {
			return false
		}
		for _, r := range g.replicas {
			if _, port, _ := strings.Cut(r.Addr(), ":"); port == addr[1] {
				promoted = r
				return true
			}
		}
		return false
	})
	poll(t, 10*time.Second, "the replica to take writes", func() bool {
		role, err := promoted.Client(t).Do(ctx, "ROLE").Slice()
		return err == nil && len(role) > 0 && role[0] == "master"
	})
	return promoted
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
