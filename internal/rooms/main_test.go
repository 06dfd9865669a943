package main

import (
	"slices"
	"testing"
)

// TestFloors lays out a chain with one cycle: the cycle costs one arrow
// that runs back up, and the chain stands on as many floors as files.
func TestFloors(t *testing.T) {
	arrows := map[string]map[string]int{
		"run.go":     {"record.go": 3, "queue.go": 1},
		"record.go":  {"script.go": 2},
		"script.go":  {},
		"queue.go":   {"run.go": 1}, // the cycle run → queue → run
		"unused.go":  {},
		"runtime.go": {"run.go": 1, "queue.go": 1},
	}
	files := []string{"queue.go", "record.go", "run.go", "runtime.go", "script.go", "unused.go"}
	floor, up := floors(files, arrows)
	if len(up) != 1 || up[0] != [2]string{"queue.go", "run.go"} && up[0] != [2]string{"run.go", "queue.go"} {
		t.Errorf("arrows that run back up: %v, want one, of the cycle between run.go and queue.go", up)
	}
	if floor["script.go"] != 1 || floor["record.go"] != 2 || floor["unused.go"] != 1 {
		t.Errorf("floors %v: want script.go 1, record.go 2, unused.go 1", floor)
	}
	if floor["runtime.go"] <= floor["run.go"] || floor["runtime.go"] <= floor["queue.go"] {
		t.Errorf("floors %v: runtime.go uses run.go and queue.go, so stands above both", floor)
	}
	reversed := slices.Clone(files)
	slices.Reverse(reversed)
	if a, b := feedbackOrder(files, arrows), feedbackOrder(reversed, arrows); !slices.Equal(a, b) {
		t.Errorf("the order depends on the files' order: %v and %v", a, b)
	}
}
