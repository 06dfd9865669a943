package cronsim

import (
	"strings"
	"testing"
	"time"
)

// TestDeterministic runs seeds twice: each gives the same history, to the
// nanosecond, both times.
func TestDeterministic(t *testing.T) {
	for _, seed := range []int64{1, 2} {
		sc := Generate(seed, 12*time.Hour)
		first := traceAll(Simulate(t, sc))
		second := traceAll(Simulate(t, sc))
		if first != second {
			a, b := strings.Split(first, "\n"), strings.Split(second, "\n")
			for i := range min(len(a), len(b)) {
				if a[i] != b[i] {
					t.Errorf("seed %d: the histories of two runs differ at line %d:\n%s\n%s", seed, i+1, a[i], b[i])
					break
				}
			}
			if len(a) != len(b) {
				t.Errorf("seed %d: the histories of two runs have %d and %d lines", seed, len(a), len(b))
			}
		}
		if strings.Count(first, "\n") < 50 {
			t.Errorf("seed %d: a history of %d lines, want a busy one", seed, strings.Count(first, "\n"))
		}
	}
}

func traceAll(h *History) string { return h.Trace("", true) }
