package main

import (
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestRun runs the demo briefly, both ways, and checks that every interval
// was run by exactly one replica while the others found the lease held.
func TestRun(t *testing.T) {
	for _, builtin := range []bool{false, true} {
		name := map[bool]string{false: "job takes the lease", true: "runtime takes the lease"}[builtin]
		t.Run(name, func(t *testing.T) {
			var out strings.Builder
			if err := run(&out, 300*time.Millisecond, 1500*time.Millisecond, "", 3, builtin); err != nil {
				t.Fatalf("run = %v", err)
			}
			line := regexp.MustCompile(`^interval (\d+) at +[\d.]+s: report by (replica-\d)(; held for .*)?$`)
			intervals := 0
			for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
				m := line.FindStringSubmatch(l)
				if m == nil {
					continue
				}
				intervals++
				if strings.Contains(m[3], m[2]) {
					t.Errorf("%q: the replica that ran the report also found it held", l)
				}
			}
			if intervals < 3 {
				t.Errorf("%d interval lines in 5 intervals; output:\n%s", intervals, out.String())
			}
			if !strings.HasSuffix(strings.TrimSpace(out.String()), "all replicas stopped") {
				t.Errorf("output does not end with the shutdown:\n%s", out.String())
			}
		})
	}
}

func TestRunRefusesBadFlags(t *testing.T) {
	var out strings.Builder
	if err := run(&out, 0, time.Second, "", 3, false); err == nil {
		t.Error("run with -hour 0 = nil error, want an error")
	}
	if err := run(&out, time.Second, time.Second, "not a url", 3, false); err == nil {
		t.Error("run with a bad -redis = nil error, want an error")
	}
}
