package cronsim

import (
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/wakuwaku-go/wakuwaku/cron"
)

// TestCheckRetryAndAdmission gives Check histories that break, or keep,
// I4's duration-policy retry and its admission check.
func TestCheckRetryAndAdmission(t *testing.T) {
	// An hourly duration job on replica 0: its slot of 11:00 fails its
	// first attempt of two; with retried, the retry runs after its back-off.
	duration := func(retried bool) *History {
		runs := []Run{
			run(everyHour, 0, at(10, 0), time.Second, cron.TriggerSchedule, 1, nil),
			run(everyHour, 0, at(11, 0), 30*time.Second, cron.TriggerSchedule, 1, errPlanned),
			run(everyHour, 0, at(12, 0), time.Second, cron.TriggerSchedule, 1, nil),
			run(everyHour, 0, at(13, 0), time.Second, cron.TriggerSchedule, 1, nil),
		}
		if retried {
			r := run(everyHour, 0, at(11, 0).Add(32*time.Second), time.Second, cron.TriggerRetry, 2, nil)
			r.Tick.Slot = runs[1].Tick.Slot
			runs = slices.Insert(runs, 2, r)
		}
		return &History{Runs: runs}
	}
	// An hourly Cron job whose slot of 11:00 replica 1 skipped as admission
	// failed, with err.
	skipped := func(err string) *History {
		runs := slices.Delete(hourlyRuns(), 1, 2)
		return &History{Runs: runs, Logs: []LogRecord{{At: at(11, 0).Add(time.Second), Level: slog.LevelWarn, Msg: "skipped",
			Replica: "replica-1", Job: "j0", Reason: cron.ReasonAdmissionFailed, Scheduled: at(11, 0), Err: err}}}
	}
	tests := []struct {
		name  string
		sc    func() *Scenario
		h     func() *History
		want  string // the invariant reported, "" for none
		about string // what its message says
		rule  string // if set, only the violations of this rule count
	}{
		{
			name: "a duration slot's failed attempt, not retried", want: "I4", about: "was not run again",
			sc: func() *Scenario { return crafted(everyHour, 2) },
			h:  func() *History { return duration(false) },
		},
		{
			name: "a duration slot's failed attempt, retried", want: "",
			sc: func() *Scenario { return crafted(everyHour, 2) },
			h:  func() *History { return duration(true) },
		},
		{
			name: "a duration slot's failed last attempt", want: "",
			sc: func() *Scenario { return crafted(everyHour, 1) },
			h:  func() *History { return duration(false) },
		},
		{
			name: "a duration slot's failed attempt, its replica killed in the back-off", want: "",
			sc: func() *Scenario {
				sc := crafted(everyHour, 2)
				sc.Events = []Event{{At: 60*time.Minute + 31*time.Second, Kind: Kill}, {At: 70 * time.Minute, Kind: Restart}}
				return sc
			},
			h: func() *History { return duration(false) },
		},
		{
			name: "admission failed with Redis well", want: "I4", about: "admission failed", rule: "admission",
			sc: func() *Scenario { return crafted(hourlySpec, 1) },
			h:  func() *History { return skipped("cron: claiming a run of \"j0\": unexpected reply") },
		},
		{
			name: "admission failed on a timeout", want: "", rule: "admission",
			sc: func() *Scenario { return crafted(hourlySpec, 1) },
			h:  func() *History { return skipped("cron: claiming a run of \"j0\": write pipe: i/o timeout") },
		},
		{
			name: "admission failed with Redis down", want: "", rule: "admission",
			sc: func() *Scenario {
				sc := crafted(hourlySpec, 1)
				sc.Events = []Event{{At: 59 * time.Minute, Kind: RedisDown, D: 2 * time.Minute}}
				return sc
			},
			h: func() *History { return skipped("cron: claiming a run of \"j0\": connection refused") },
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sc, h := tc.sc(), tc.h()
			h.End = sc.Start.Add(sc.Span)
			got := Check(sc, h)
			if tc.rule != "" {
				// The slot of a crafted history with no run is lost too
				// (I4 asks for a run or a recorded skip): only the rule
				// under test counts.
				got = slices.DeleteFunc(got, func(v Violation) bool { return v.Rule != tc.rule })
			}
			switch {
			case tc.want == "" && len(got) > 0:
				t.Errorf("Check = %v, want no violation", got)
			case tc.want != "" && (len(got) == 0 || got[0].Invariant != tc.want || !strings.Contains(got[0].Msg, tc.about)):
				t.Errorf("Check = %v, want %s first, saying %q", got, tc.want, tc.about)
			}
		})
	}
}
