package fault_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/wakuwaku-go/wakuwaku/internal/fault"
	"github.com/wakuwaku-go/wakuwaku/internal/redistest"
)

// checkTimeout bounds porcupine's search on one history.
var checkTimeout = fault.Pick(2*time.Minute, 10*time.Minute)

// startChildren spawns n contend children, waits until each is ready, and
// opens the gate that starts them.
func startChildren(t *testing.T, coord *fault.Coordinator, args func(i int) contendArgs, n int) []*fault.Child {
	t.Helper()
	children := make([]*fault.Child, n)
	for i := range children {
		children[i] = fault.Spawn(t, coord, i+1, "contend", args(i))
	}
	for i := range children {
		coord.WaitNote(t, i+1, "ready", 30*time.Second)
	}
	coord.Open("go")
	return children
}

// verdict checks the history against the lock's model and reports
// porcupine's verdict, failing the test unless it is Ok.
func verdict(t *testing.T, h *fault.History, ttl time.Duration, rw bool) string {
	t.Helper()
	start := time.Now()
	res := h.Linearizable(ttl, rw, checkTimeout)
	t.Logf("porcupine: %s after %v", res, time.Since(start).Round(time.Millisecond))
	if res != porcupine.Ok {
		t.Errorf("porcupine: history is %s, want Ok", res)
	}
	return string(res)
}

// stale checks what the resource saw of stale writes, failing the test if one
// came from a holder whose lease was still live by its own deadline (the lock
// let someone else in), and describes the others for the figures: a holder
// that checked its lease and then stalled before its write arrived.
func stale(t *testing.T, f fault.ResourceFigures) string {
	t.Helper()
	if f.StaleLive != 0 {
		t.Errorf("%d stale writes arrived while their writer's lease was live: the lock was taken over early", f.StaleLive)
	}
	if f.StaleAccepted+f.StaleRefused == 0 {
		return "no stale write"
	}
	return fmt.Sprintf("%d stale writes (%d accepted, %d refused), all after their writer's own lease deadline, by %v or more: a stall between the writer's check and the write",
		f.StaleAccepted+f.StaleRefused, f.StaleAccepted, f.StaleRefused, f.StaleLate)
}

// overlaps reports the overlapping holders of the history, failing the test
// if there are any.
func overlaps(t *testing.T, h *fault.History, ttl time.Duration) int {
	t.Helper()
	found := h.Overlaps(ttl)
	for i, o := range found {
		if i == 10 {
			t.Errorf("... and %d more", len(found)-10)
			break
		}
		t.Errorf("overlap: %v", o)
	}
	return len(found)
}

// TestMutualExclusion runs 16 goroutines in each of 3 processes on 4 locks,
// acquiring, extending and releasing at random, some holders letting their
// lease lapse, the third process's traffic through a proxy with jittered
// latency. Pass: no overlapping holders whose lease had not ended, no errors,
// and a history that porcupine finds linearizable.
func TestMutualExclusion(t *testing.T) {
	srv := redistest.Start(t)
	coord := fault.NewCoordinator(t)
	proxy := fault.NewProxy(t, srv.Addr())
	proxy.SetLatency(0, 2*time.Millisecond)
	ld := load{
		Namespace:  "exclusion",
		TTL:        250 * time.Millisecond,
		Names:      []string{"a", "b", "c", "d"},
		Backoff:    10 * time.Millisecond,
		MaxSteps:   3,
		LapseShare: 0.04,
		DropShare:  0.1,
	}
	spell := fault.Pick(8*time.Second, 120*time.Second)
	children := startChildren(t, coord, func(i int) contendArgs {
		c := conn{Addr: srv.Addr()}
		if i == 2 {
			c.Addr = proxy.Addr()
		}
		return contendArgs{Conn: c, Load: ld, Goroutines: 16}
	}, 3)
	time.Sleep(spell)
	for _, c := range children {
		c.Stop(t)
	}

	h := coord.History
	ta := h.Tally()
	for i, o := range h.Errors() {
		if i == 10 {
			break
		}
		t.Errorf("error reached a caller: %v", o)
	}
	if ta.Acquired < 100 {
		t.Errorf("only %d acquisitions: the load did not contend", ta.Acquired)
	}
	n := overlaps(t, h, ld.TTL)
	res := coord.Resource.Figures()
	fig := fault.Figures{
		Scenario:       "mutual exclusion",
		Seconds:        spell.Seconds(),
		Ops:            ta.Ops,
		Acquired:       ta.Acquired,
		Errors:         ta.Errors,
		Faults:         fmt.Sprintf("lapsed leases (%.0f%% of holder steps outlast the TTL); one process behind 0-2 ms of jitter", 100*ld.LapseShare),
		Overlaps:       n,
		WritesAccepted: res.Accepted,
		StaleAccepted:  res.StaleAccepted,
		StaleRefused:   res.StaleRefused,
		Porcupine:      verdict(t, h, ld.TTL, false),
		Notes: []string{
			"a holder writes only while its lease has a quarter of its TTL to go",
			stale(t, res),
		},
	}
	fault.Publish(t, fig)
}
