package fault

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// The suite runs short by default, as CI runs it; the long mode, for the
// published figures, is chosen by flag or environment:
//
//	go test -race ./proof/internal/fault/ -fault.long -fault.report=figures.jsonl
//	WAKUWAKU_FAULT_LONG=1 WAKUWAKU_FAULT_REPORT=figures.jsonl go test -race ./proof/internal/fault/
var (
	longFlag   = flag.Bool("fault.long", false, "run the fault suite's long mode, for the published figures")
	reportFlag = flag.String("fault.report", "", "append each scenario's figures to this file, as JSON lines")
)

// Long reports whether the suite runs in its long mode.
func Long() bool {
	return *longFlag || os.Getenv("WAKUWAKU_FAULT_LONG") == "1"
}

// Pick returns short in the short mode and long in the long mode.
func Pick[T any](short, long T) T {
	if Long() {
		return long
	}
	return short
}

// Figures is what one scenario measured, as RELIABILITY.md publishes it.
type Figures struct {
	Scenario       string
	Mode           string // "short" or "long"
	Date           string
	Seconds        float64 // how long the scenario's load ran
	Ops            int     // lock operations in the history
	Acquired       int     // acquires that got a token
	Errors         int     // operations that returned an error to the caller
	Faults         string  // the faults injected, with their counts
	Overlaps       int     // holders both live at once (must be 0)
	WritesAccepted int64   // writes the resource accepted
	StaleAccepted  int64   // stale writes the resource accepted (must be 0)
	StaleRefused   int64   // stale writes the resource refused
	EntersLate     int64   // Enters the resource refused: they arrived after their hold's lease deadline
	Linearizable   string  // the linearizability check's verdict, or "-" when not checked
	Notes          []string
}

var reportMu sync.Mutex

// Publish logs the figures and, when a report file was named, appends them
// to it as one JSON line.
func Publish(tb testing.TB, f Figures) {
	tb.Helper()
	f.Mode = Pick("short", "long")
	f.Date = time.Now().UTC().Format(time.RFC3339)
	if f.Linearizable == "" {
		f.Linearizable = "-"
	}
	tb.Logf("figures: %s: %.1fs, %d ops (%d acquired), %d errors, faults: %s; overlaps %d; writes accepted %d, stale accepted %d, stale refused %d; late enters refused %d; linearizable %s; %s",
		f.Scenario, f.Seconds, f.Ops, f.Acquired, f.Errors, f.Faults, f.Overlaps,
		f.WritesAccepted, f.StaleAccepted, f.StaleRefused, f.EntersLate, f.Linearizable, strings.Join(f.Notes, "; "))
	path := *reportFlag
	if path == "" {
		path = os.Getenv("WAKUWAKU_FAULT_REPORT")
	}
	if path == "" {
		return
	}
	b, err := json.Marshal(f)
	if err != nil {
		tb.Errorf("fault: %v", err)
		return
	}
	reportMu.Lock()
	defer reportMu.Unlock()
	file, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		tb.Errorf("fault: report: %v", err)
		return
	}
	defer file.Close()
	if _, err := fmt.Fprintf(file, "%s\n", b); err != nil {
		tb.Errorf("fault: report: %v", err)
	}
}
