package main

import (
	"strings"
	"testing"
)

func TestAdmitLoad(t *testing.T) {
	for _, tc := range []struct {
		name       string
		load       string
		force      bool
		wantErr    bool
		wantForced bool
		wantBanner bool
	}{
		{"quiet", "0.40 0.50 0.60", false, false, false, false},
		{"one per CPU", "2.00 2.00 2.00", false, false, false, false},
		{"busy", "2.01 1.00 1.00", false, true, false, true},
		{"busy, forced", "3.50 1.00 1.00", true, false, true, true},
		{"unknown", "unknown", false, false, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			info := runInfo{LoadStart: tc.load, Machine: machine{CPUs: 2}}
			err := admitLoad(config{force: tc.force}, &info)
			if (err != nil) != tc.wantErr || info.Forced != tc.wantForced {
				t.Errorf("admitLoad(load %s, force %v) = %v, Forced %v; want error %v, Forced %v", tc.load, tc.force, err, info.Forced, tc.wantErr, tc.wantForced)
			}
			if got := strings.Contains(loadWarning(info), "NOT A QUIET RUN"); got != tc.wantBanner {
				t.Errorf("loadWarning(load %s) warns = %v, want %v", tc.load, got, tc.wantBanner)
			}
		})
	}
}
