package fault_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/wakuwaku-go/wakuwaku/internal/redistest"
	"github.com/wakuwaku-go/wakuwaku/proof/internal/fault"
)

// TestRWLockAcrossProcesses runs readers and writers, 8 goroutines in each
// of 3 processes (a quarter of them readers), on 2 RWLock names; holders extend, release, drop their
// leases or let them lapse at random. Pass: never a writer with a reader or
// two writers whose leases had not ended, no errors, porcupine Ok against
// the RWLock model.
func TestRWLockAcrossProcesses(t *testing.T) {
	srv := redistest.Start(t)
	coord := fault.NewCoordinator(t)
	ld := load{
		Namespace:  "rw",
		TTL:        200 * time.Millisecond,
		Names:      []string{"a", "b"},
		Kind:       fault.RWLock,
		Readers:    4,
		Backoff:    8 * time.Millisecond,
		MaxSteps:   3,
		LapseShare: 0.05,
		DropShare:  0.1,
	}
	spell := fault.Pick(8*time.Second, 120*time.Second)
	children := startChildren(t, coord, func(int) contendArgs {
		return contendArgs{Conn: conn{Addr: srv.Addr()}, Load: ld, Goroutines: 8}
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
	var reads, writes int
	for _, o := range h.Ops() {
		switch {
		case o.Kind == fault.ReadAcquire && o.Ok:
			reads++
		case o.Kind == fault.WriteAcquire && o.Ok:
			writes++
		}
	}
	if reads < 50 || writes < 50 {
		t.Errorf("%d reads and %d writes acquired: the load did not contend", reads, writes)
	}
	n := overlaps(t, h, ld.TTL)
	res := coord.Resource.Figures()
	fault.Publish(t, fault.Figures{
		Scenario:       "RWLock across processes",
		Seconds:        spell.Seconds(),
		Ops:            ta.Ops,
		Acquired:       ta.Acquired,
		Errors:         ta.Errors,
		Faults:         fmt.Sprintf("lapsed leases (%.0f%% of holder steps outlast the TTL), %.0f%% of leases dropped", 100*ld.LapseShare, 100*ld.DropShare),
		Overlaps:       n,
		WritesAccepted: res.Accepted,
		StaleAccepted:  res.StaleAccepted,
		StaleRefused:   res.StaleRefused,
		EntersLate:     res.EntersLate,
		Linearizable:   verdict(t, h, ld.TTL, ld.Kind),
		Notes:          []string{fmt.Sprintf("%d read leases and %d write leases taken", reads, writes), stale(t, res)},
	})
}
