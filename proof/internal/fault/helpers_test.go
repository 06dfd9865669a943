package fault_test

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/wakuwaku-go/wakuwaku/proof/internal/fault"
)

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

// verdict checks the history against the lock's model and reports the
// verdict, failing the test unless it is Ok: a check that gave up (Unknown)
// fails as an illegal history does.
func verdict(t *testing.T, h *fault.History, ttl time.Duration, k fault.LockKind) string {
	t.Helper()
	c := h.Linearizable(ttl, k, fault.DefaultLimits())
	t.Logf("linearizability: %v", c)
	switch c.Result {
	case fault.Ok:
	case fault.Unknown:
		t.Errorf("linearizability: the check gave up, so the history is not known to be linearizable: %v", c)
	default:
		t.Errorf("linearizability: %v, want Ok", c)
	}
	if c.Result != fault.Ok {
		keepHistory(t, h)
	}
	return string(c.Result)
}

// keepHistory writes h's operations, one per line, to a file that outlives
// the test, and logs its path: a history the check refused is the evidence
// to read.
func keepHistory(t *testing.T, h *fault.History) {
	t.Helper()
	f, err := os.CreateTemp("", "fault-history-*.txt")
	if err != nil {
		t.Logf("keeping the history: %v", err)
		return
	}
	defer f.Close()
	for _, o := range h.Ops() {
		fmt.Fprintln(f, o)
	}
	t.Logf("the history is in %s", f.Name())
}

// stale checks what the resource saw of stale writes, failing the test if one
// came from a holder whose lease was still live by its own deadline (the lock
// let someone else in), and describes for the figures what it measured: when
// the stale writes arrived, and how many Enters came too late to count.
func stale(t *testing.T, f fault.ResourceFigures) string {
	t.Helper()
	if f.StaleLive != 0 {
		t.Errorf("%d stale writes arrived while their writer's lease was live: the lock was taken over early", f.StaleLive)
	}
	enters := fmt.Sprintf("%d enters, %d refused as late (they arrived after their hold's lease deadline)", f.Enters+f.EntersLate, f.EntersLate)
	n := f.StaleAccepted + f.StaleRefused
	if n == 0 {
		return "no stale write; " + enters
	}
	var when []string
	if f.StaleAfter != 0 {
		when = append(when, fmt.Sprintf("%d after their writer's own lease deadline, by %v or more (a stall between the writer's check and its write)", f.StaleAfter, f.StaleLate))
	}
	if f.StaleLive != 0 {
		when = append(when, fmt.Sprintf("%d before it", f.StaleLive))
	}
	if rest := n - f.StaleAfter - f.StaleLive; rest != 0 {
		when = append(when, fmt.Sprintf("%d from writers that gave no deadline", rest))
	}
	return fmt.Sprintf("%d stale writes (%d accepted, %d refused): %s; %s",
		n, f.StaleAccepted, f.StaleRefused, strings.Join(when, ", "), enters)
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
