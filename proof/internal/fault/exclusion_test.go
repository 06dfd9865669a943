package fault_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/wakuwaku-go/wakuwaku/internal/redistest"
	"github.com/wakuwaku-go/wakuwaku/proof/internal/fault"
)

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
		EntersLate:     res.EntersLate,
		Linearizable:   verdict(t, h, ld.TTL, ld.Kind),
		Notes: []string{
			"a holder writes only while its lease has a quarter of its TTL to go",
			stale(t, res),
		},
	}
	fault.Publish(t, fig)
}
