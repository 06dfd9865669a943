package cronsim

import (
	"errors"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wakuwaku-go/wakuwaku/cron"
	"github.com/wakuwaku-go/wakuwaku/crontest"
	"github.com/wakuwaku-go/wakuwaku/internal/recordfmt"
	"github.com/wakuwaku-go/wakuwaku/lock"
)

// at is an instant of the crafted histories: Monday at hh:mm.
func at(hh, mm int) time.Time {
	return monday.Add(time.Duration(hh)*time.Hour + time.Duration(mm)*time.Minute)
}

// crafted is a scenario of one job from Monday 10:00 to 14:00, whose
// history a test writes by hand.
func crafted(p Policy, attempts int) *Scenario {
	return &Scenario{
		Start: at(10, 0), Span: 4 * time.Hour,
		Latencies: [Replicas]time.Duration{time.Millisecond, 2 * time.Millisecond, 3 * time.Millisecond},
		Jobs:      []Job{{Name: "j0", Versions: []Version{{Policy: p, Attempts: attempts}}}},
	}
}

var (
	hourlySpec = Policy{Kind: CronSpec, Spec: "CRON_TZ=UTC 0 * * * *"}
	everyHour  = Policy{Kind: AtLeast, D: time.Hour}
	errPlanned = errors.New("planned")
)

// run is a run of j0 on replica i from start for took, in the slot that
// policy p gives it, with the given trigger and attempt, returning err; its
// fence is its start in µs, as a claim at its start would give it (F1).
func run(p Policy, i int, start time.Time, took time.Duration, trigger cron.Trigger, attempt int, err error) Run {
	slot := p.Interval(false).Plan(start, start).Slot
	return Run{Job: "j0", Replica: i, Start: start, End: start.Add(took), Err: err,
		Tick: cron.Tick{Job: "j0", Slot: slot, Scheduled: slot.Start, Started: start, Trigger: trigger, Attempt: attempt,
			Fence: uint64(start.UnixMicro())}}
}

// hourlyRuns are the runs of a healthy hourly job from 10:00 to 14:00.
func hourlyRuns() []Run {
	var runs []Run
	for h := 10; h < 14; h++ {
		runs = append(runs, run(hourlySpec, h%3, at(h, 0), time.Second, cron.TriggerSchedule, 1, nil))
	}
	return runs
}

// aloneAtStart is the history of a slot run by one replica's start alone: slot 11:00, paused from
// 10:50 to 11:10, run once by r2's catch-up at its restart at 11:20 and
// killed at 11:22; or, with tick, by r2's tick at 11:00, killed at 11:02.
func aloneAtStart(tick bool) *History {
	runs := hourlyRuns()
	r := run(hourlySpec, 2, at(11, 20).Add(3*time.Millisecond), 2*time.Minute, cron.TriggerCatchUp, 1, crontest.ErrKilled)
	admin := []AdminOp{{At: at(10, 50), Kind: Pause, Job: "j0"}, {At: at(11, 10), Kind: Resume, Job: "j0"}}
	if tick {
		r = run(hourlySpec, 2, at(11, 0), 2*time.Minute, cron.TriggerSchedule, 1, crontest.ErrKilled)
		admin = nil
	}
	runs[1] = r
	return &History{Runs: runs, Admin: admin}
}

// requestAcross is a scenario whose Redis fails over (kind Failover,
// without WithReplicas) or restarts (RedisRestart) at 11:31, for a minute.
func requestAcross(kind EventKind) *Scenario {
	sc := crafted(everyHour, 1)
	e := Event{At: 91 * time.Minute, Kind: kind, D: time.Minute}
	if kind == Failover {
		e.At, e.Lag = e.At-5*time.Millisecond, 5*time.Millisecond
	}
	sc.Events = []Event{e}
	return sc
}

// requestAcrossHistory is an hourly job's history whose run-now request
// of 11:30:58 runs at 11:32:30, after Redis is back.
func requestAcrossHistory() *History {
	return &History{
		Runs: []Run{
			run(everyHour, 0, at(10, 0), time.Second, cron.TriggerSchedule, 1, nil),
			run(everyHour, 1, at(11, 0), time.Second, cron.TriggerSchedule, 1, nil),
			run(everyHour, 2, at(11, 32).Add(30*time.Second), time.Second, cron.TriggerRequest, 1, nil),
			run(everyHour, 0, at(12, 0), time.Second, cron.TriggerSchedule, 1, nil),
			run(everyHour, 0, at(13, 0), time.Second, cron.TriggerSchedule, 1, nil),
		},
		Admin: []AdminOp{{At: at(11, 30).Add(58 * time.Second), Kind: RunNow, Job: "j0"}},
	}
}

// attemptsAcross is a job of 2 attempts whose Redis fails over (without
// WithReplicas) at 11:00:30, for a second.
func attemptsAcross() *Scenario {
	sc := crafted(hourlySpec, 2)
	sc.Events = []Event{{At: 60*time.Minute + 30*time.Second - 5*time.Millisecond, Kind: Failover, Lag: 5 * time.Millisecond, D: time.Second}}
	return sc
}

// attemptsAcrossHistory is the history of attemptsAcross: the slot of 11:00
// fails its first attempt before Redis fails, and then a run of the given
// attempt loses its lease.
func attemptsAcrossHistory(attempt int) func() *History {
	return func() *History {
		runs := hourlyRuns()
		runs[1].Err = errPlanned
		r := run(hourlySpec, 2, at(11, 1), time.Minute, cron.TriggerRetry, attempt, lock.ErrLeaseLost)
		r.Cancelled = r.End
		return &History{Runs: slices.Insert(runs, 2, r)}
	}
}

// requestAfterOutage is a scenario of an hourly job whose Redis is down
// from 11:15 to 11:21, and its history: the run of 11:00 ends at 11:20,
// while Redis is down, and an operator asks for a run at 11:22, which runs
// at late (the zero time: never).
func requestAfterOutage(late time.Time) (*Scenario, *History) {
	sc := crafted(everyHour, 1)
	sc.Jobs[0].RunTTL = 6 * time.Minute
	sc.Events = []Event{{At: 75 * time.Minute, Kind: RedisDown, D: 6 * time.Minute}}
	runs := []Run{
		run(everyHour, 0, at(10, 0), time.Second, cron.TriggerSchedule, 1, nil),
		run(everyHour, 1, at(11, 0), 20*time.Minute, cron.TriggerSchedule, 1, nil),
	}
	if !late.IsZero() {
		runs = append(runs, run(everyHour, 1, late, time.Second, cron.TriggerRequest, 1, nil))
	}
	runs = append(runs, run(everyHour, 0, at(12, 0), time.Second, cron.TriggerSchedule, 1, nil),
		run(everyHour, 0, at(13, 0), time.Second, cron.TriggerSchedule, 1, nil))
	return sc, &History{Runs: runs, Admin: []AdminOp{{At: at(11, 22), Kind: RunNow, Job: "j0"}}}
}

// steppedBackIdle is an hourly duration policy's scenario whose replicas 1
// and 2 die at 10:30, and whose replica 0's clock is stepped back by 20
// minutes at 11:00 if step, with its history: runs at 10:00, then at 12:15
// and 13:15, the tick of 11:00 having found the lease of 10:00 held.
func steppedBackIdle(step bool) (*Scenario, *History) {
	sc := crafted(everyHour, 1)
	sc.Events = []Event{{At: 30 * time.Minute, Kind: Kill, Replica: 1}, {At: 30 * time.Minute, Kind: Kill, Replica: 2}}
	if step {
		sc.Events = append(sc.Events, Event{At: 60 * time.Minute, Kind: StepClock, Replica: 0, D: -20 * time.Minute})
	}
	return sc, &History{Runs: []Run{
		run(everyHour, 0, at(10, 0), time.Second, cron.TriggerSchedule, 1, nil),
		run(everyHour, 0, at(12, 15), time.Second, cron.TriggerSchedule, 1, nil),
		run(everyHour, 0, at(13, 15), time.Second, cron.TriggerSchedule, 1, nil),
	}}
}

// forwardStepped is an hourly job's scenario whose replicas 1 and 2 die at
// 10:30, whose replica 0's clock is stepped 5 minutes back at 10:20 and
// forward again at 11:30, and whose replica 0 dies after past 12:00: the
// timer it set at 11:05 for 12:00 by its clock fires at 12:05, when it
// reads 12:05.
func forwardStepped(after time.Duration) *Scenario {
	sc := crafted(hourlySpec, 1)
	sc.Events = []Event{
		{At: 20 * time.Minute, Kind: StepClock, Replica: 0, D: -5 * time.Minute},
		{At: 30 * time.Minute, Kind: Kill, Replica: 1}, {At: 30 * time.Minute, Kind: Kill, Replica: 2},
		{At: 90 * time.Minute, Kind: StepClock, Replica: 0, D: 5 * time.Minute},
		{At: 120*time.Minute + after, Kind: Kill, Replica: 0},
	}
	return sc
}

// TestCheck gives Check histories that break each invariant, and the ones
// that the protocol allows: it reports the first, and not the second.
func TestCheck(t *testing.T) {
	tests := []struct {
		name  string
		sc    func() *Scenario
		h     func() *History
		want  string // the invariant reported, "" for none
		about string // what its message says
	}{
		{
			name: "healthy", want: "",
			sc: func() *Scenario { return crafted(hourlySpec, 1) },
			h:  func() *History { return &History{Runs: hourlyRuns()} },
		},
		{
			name: "two runs at once", want: "I1", about: "two runs at once",
			sc: func() *Scenario { return crafted(hourlySpec, 2) },
			h: func() *History {
				runs := hourlyRuns()
				runs[1].End = at(11, 10)
				return &History{Runs: append(runs, run(hourlySpec, 2, at(11, 5), time.Second, cron.TriggerRetry, 2, nil))}
			},
		},
		{
			name: "two runs at once, Redis lost every key between", want: "",
			sc: func() *Scenario {
				sc := crafted(hourlySpec, 2)
				sc.Events = []Event{{At: 62 * time.Minute, Kind: RedisRestart}}
				return sc
			},
			h: func() *History {
				runs := hourlyRuns()
				runs[1].End = at(11, 2).Add(20 * time.Second) // its next heartbeat found the record gone
				return &History{Runs: append(runs, run(hourlySpec, 2, at(11, 2).Add(5*time.Second), time.Second, cron.TriggerSchedule, 1, nil))}
			},
		},
		{
			name: "two runs at once, for longer than a run lease after Redis lost every key", want: "I1", about: "after Redis lost the record",
			sc: func() *Scenario {
				sc := crafted(hourlySpec, 2)
				sc.Events = []Event{{At: 62 * time.Minute, Kind: RedisRestart}}
				return sc
			},
			h: func() *History {
				runs := hourlyRuns()
				runs[1].End = at(11, 10)
				return &History{Runs: append(runs, run(hourlySpec, 2, at(11, 5), time.Second, cron.TriggerSchedule, 1, nil))}
			},
		},
		{
			name: "two runs at once, a failover without WithReplicas between", want: "",
			sc: func() *Scenario {
				sc := crafted(hourlySpec, 2)
				sc.Events = []Event{{At: 62 * time.Minute, Kind: Failover, Lag: 5 * time.Millisecond, D: time.Second}}
				return sc
			},
			h: func() *History {
				runs := hourlyRuns()
				runs[1].End = at(11, 2).Add(20 * time.Second)
				return &History{Runs: append(runs, run(hourlySpec, 2, at(11, 2).Add(5*time.Second), time.Second, cron.TriggerSchedule, 1, nil))}
			},
		},
		{
			name: "two runs at once, a failover with WithReplicas between", want: "I1", about: "two runs at once",
			sc: func() *Scenario {
				sc := crafted(hourlySpec, 2)
				sc.Replicated = true
				sc.Events = []Event{{At: 62 * time.Minute, Kind: Failover, Lag: 5 * time.Millisecond, D: time.Second}}
				return sc
			},
			h: func() *History {
				runs := hourlyRuns()
				runs[1].End = at(11, 10)
				return &History{Runs: append(runs, run(hourlySpec, 2, at(11, 5), time.Second, cron.TriggerSchedule, 1, nil))}
			},
		},
		{
			// Seed 16: the pause outlived a failover that lost other
			// writes; the checker owed the slot after it.
			name: "a pause that a failover without WithReplicas kept", want: "",
			sc: func() *Scenario {
				sc := crafted(hourlySpec, 1)
				sc.Events = []Event{{At: 90 * time.Minute, Kind: Failover, Lag: 5 * time.Millisecond, D: time.Second}}
				return sc
			},
			h: func() *History {
				return &History{Runs: hourlyRuns()[:2], Admin: []AdminOp{{At: at(11, 10), Kind: Pause, Job: "j0"}}}
			},
		},
		{
			name: "a pause that a failover with WithReplicas kept, not kept", want: "I5", about: "while paused",
			sc: func() *Scenario {
				sc := crafted(hourlySpec, 1)
				sc.Replicated = true
				sc.Events = []Event{{At: 90 * time.Minute, Kind: Failover, Lag: 5 * time.Millisecond, D: time.Second}}
				return sc
			},
			h: func() *History {
				return &History{Runs: hourlyRuns(), Admin: []AdminOp{{At: at(11, 10), Kind: Pause, Job: "j0"}}}
			},
		},
		{
			// Seed 3886: the failover kept the slot's first attempt; the
			// checker counted the runs after it, and owed another.
			name: "attempts that a failover without WithReplicas kept", want: "",
			sc: attemptsAcross, h: attemptsAcrossHistory(2),
		},
		{
			name: "attempts that a failover without WithReplicas lost", want: "I4", about: "with attempts left",
			sc: attemptsAcross, h: attemptsAcrossHistory(1),
		},
		{
			// Seed 19170: the request waits for the completion of the run
			// in progress, which is sent again a back-off after Redis
			// came back (R13).
			name: "a request served by a completion sent again", want: "",
			sc: func() *Scenario { sc, _ := requestAfterOutage(time.Time{}); return sc },
			h:  func() *History { _, h := requestAfterOutage(at(11, 23)); return h },
		},
		{
			name: "a request not served after a completion sent again", want: "I6", about: "did not run by",
			sc: func() *Scenario { sc, _ := requestAfterOutage(time.Time{}); return sc },
			h:  func() *History { _, h := requestAfterOutage(time.Time{}); return h },
		},
		{
			// Seed 31831: a clock stepped back delays the replica's next
			// tick of a duration policy by as much.
			name: "a duration policy idle after its replica's clock stepped back", want: "",
			sc: func() *Scenario { sc, _ := steppedBackIdle(true); return sc },
			h:  func() *History { _, h := steppedBackIdle(true); return h },
		},
		{
			name: "a duration policy idle, no clock stepped", want: "I4", about: "no run from",
			sc: func() *Scenario { sc, _ := steppedBackIdle(false); return sc },
			h:  func() *History { _, h := steppedBackIdle(false); return h },
		},
		{
			name: "a request that a failover without WithReplicas kept", want: "",
			sc: func() *Scenario { return requestAcross(Failover) },
			h:  requestAcrossHistory,
		},
		{
			name: "a request that a restart lost, run", want: "I6", about: "no request waiting",
			sc: func() *Scenario { return requestAcross(RedisRestart) },
			h:  requestAcrossHistory,
		},
		{
			name: "a run that ignored its cancelled context", want: "",
			sc: func() *Scenario { return crafted(hourlySpec, 2) },
			h: func() *History {
				runs := hourlyRuns()
				runs[1].End, runs[1].Cancelled = at(11, 10), at(11, 1)
				return &History{Runs: append(runs, run(hourlySpec, 2, at(11, 5), time.Second, cron.TriggerRetry, 2, nil))}
			},
		},
		{
			name: "a slot run more times than its attempts", want: "I2", about: "had 2 runs, attempts 1",
			sc: func() *Scenario { return crafted(hourlySpec, 1) },
			h: func() *History {
				runs := hourlyRuns()
				runs[1].Err = errPlanned
				return &History{Runs: append(runs, run(hourlySpec, 2, at(11, 5), time.Second, cron.TriggerSchedule, 1, nil))}
			},
		},
		{
			name: "a duration policy's slot opened within the last one's lease", want: "I2", about: "within its lease (55m0s)",
			sc: func() *Scenario { return crafted(everyHour, 1) },
			h: func() *History {
				return &History{Runs: []Run{
					run(everyHour, 0, at(10, 0), time.Second, cron.TriggerSchedule, 1, nil),
					run(everyHour, 1, at(10, 54), time.Second, cron.TriggerSchedule, 1, nil),
					run(everyHour, 1, at(11, 54), time.Second, cron.TriggerSchedule, 1, nil),
					run(everyHour, 1, at(12, 54), time.Second, cron.TriggerSchedule, 1, nil),
				}}
			},
		},
		{
			name: "a duration policy's slots a lease apart", want: "",
			sc: func() *Scenario { return crafted(everyHour, 1) },
			h: func() *History {
				return &History{Runs: []Run{
					run(everyHour, 0, at(10, 0), time.Second, cron.TriggerSchedule, 1, nil),
					run(everyHour, 1, at(10, 55), time.Second, cron.TriggerSchedule, 1, nil),
					run(everyHour, 2, at(11, 50), time.Second, cron.TriggerSchedule, 1, nil),
					run(everyHour, 2, at(12, 50), time.Second, cron.TriggerSchedule, 1, nil),
				}}
			},
		},
		{
			name: "a retry of a slot that was done", want: "I3", about: "ran after it was closed",
			sc: func() *Scenario { return crafted(hourlySpec, 3) },
			h: func() *History {
				return &History{Runs: append(hourlyRuns(), run(hourlySpec, 2, at(11, 5), time.Second, cron.TriggerRetry, 2, nil))}
			},
		},
		{
			name: "a slot done while Redis was down, retried", want: "",
			sc: func() *Scenario {
				sc := crafted(hourlySpec, 3)
				sc.Events = []Event{{At: 59 * time.Minute, Kind: RedisDown, D: 2 * time.Minute}}
				return sc
			},
			h: func() *History {
				return &History{Runs: append(hourlyRuns(), run(hourlySpec, 2, at(11, 5), time.Second, cron.TriggerRetry, 2, nil))}
			},
		},
		{
			name: "a slot lost without a Warn", want: "I4", about: "did not run, and no replica recorded it skipped",
			sc: func() *Scenario { return crafted(hourlySpec, 1) },
			h: func() *History {
				return &History{Runs: slices.Delete(hourlyRuns(), 2, 3)}
			},
		},
		{
			name: "a slot lost with a Warn that records nothing", want: "I4", about: "did not run, and no replica recorded it skipped",
			sc: func() *Scenario { return crafted(hourlySpec, 1) },
			h: func() *History {
				return &History{Runs: slices.Delete(hourlyRuns(), 2, 3), Logs: []LogRecord{
					{At: at(12, 0), Level: slog.LevelWarn, Msg: "cron job skipped a run", Job: "j0", Reason: cron.ReasonStillRunning, Scheduled: at(12, 0)},
				}}
			},
		},
		{
			name: "a slot recorded skipped", want: "",
			sc: func() *Scenario { return crafted(hourlySpec, 1) },
			h: func() *History {
				return &History{Runs: slices.Delete(hourlyRuns(), 2, 3), Logs: []LogRecord{
					{At: at(12, 0), Level: slog.LevelWarn, Msg: msgSkipRecorded, Replica: "replica-0", Job: "j0", Reason: cron.ReasonPaused, Scheduled: at(12, 0)},
				}}
			},
		},
		{
			name: "a slot recorded skipped that ran", want: "I10", about: "recorded slot 2000-01-03T12:00:00Z skipped",
			sc: func() *Scenario { return crafted(hourlySpec, 1) },
			h: func() *History {
				return &History{Runs: hourlyRuns(), Logs: []LogRecord{
					{At: at(11, 59), Level: slog.LevelWarn, Msg: msgSkipRecorded, Replica: "replica-0", Job: "j0", Reason: cron.ReasonPaused, Scheduled: at(12, 0)},
				}}
			},
		},
		{
			name: "completions starved behind claims", want: "I11", about: "while 5 batches of claims and looks went first",
			sc: func() *Scenario { return crafted(hourlySpec, 1) },
			h: func() *History {
				return &History{Runs: hourlyRuns(), Starved: []Starved{{At: at(12, 0), Passed: 5}}}
			},
		},
		{
			name: "a slot lost while its replicas' clocks were stepped", want: "",
			sc: func() *Scenario {
				sc := crafted(hourlySpec, 1)
				sc.Events = []Event{{At: 90 * time.Minute, Kind: StepClock, D: time.Hour}}
				return sc
			},
			h: func() *History { return &History{Runs: slices.Delete(hourlyRuns(), 2, 3)} },
		},
		{
			name: "a slot lost whose tick a forward step put after its replica's death", want: "",
			sc: func() *Scenario { return forwardStepped(5 * time.Minute) },
			h: func() *History {
				return &History{Runs: []Run{
					run(hourlySpec, 0, at(10, 0), time.Second, cron.TriggerSchedule, 1, nil),
					run(hourlySpec, 0, at(11, 5), time.Second, cron.TriggerSchedule, 1, nil),
				}}
			},
		},
		{
			name: "a slot lost whose tick a forward step delayed, its replica up", want: "I4", about: "did not run, and no replica recorded it skipped",
			sc: func() *Scenario { return forwardStepped(30 * time.Minute) },
			h: func() *History {
				return &History{Runs: []Run{
					run(hourlySpec, 0, at(10, 0), time.Second, cron.TriggerSchedule, 1, nil),
					run(hourlySpec, 0, at(11, 5), time.Second, cron.TriggerSchedule, 1, nil),
				}}
			},
		},
		{
			name: "a slot lost while Redis was down", want: "",
			sc: func() *Scenario {
				sc := crafted(hourlySpec, 1)
				sc.Events = []Event{{At: 119 * time.Minute, Kind: RedisDown, D: 2 * time.Minute}}
				return sc
			},
			h: func() *History { return &History{Runs: slices.Delete(hourlyRuns(), 2, 3)} },
		},
		{
			name: "a failed run not retried", want: "I4", about: "was not run again",
			sc: func() *Scenario { return crafted(hourlySpec, 2) },
			h: func() *History {
				runs := hourlyRuns()
				runs[1].Err = errPlanned
				return &History{Runs: runs}
			},
		},
		{
			name: "a killed run retried", want: "",
			sc: func() *Scenario {
				sc := crafted(hourlySpec, 2)
				sc.Events = []Event{{At: 61 * time.Minute, Kind: Kill, Replica: 2}}
				return sc
			},
			h: func() *History {
				runs := hourlyRuns()
				runs[1].End, runs[1].Err = at(11, 1), crontest.ErrKilled
				return &History{Runs: append(runs, run(hourlySpec, 0, at(11, 1).Add(30*time.Second), time.Second, cron.TriggerRetry, 2, nil))}
			},
		},
		{
			// r2 restarts at 11:20 and its start's catch-up runs 11:00,
			// which the others ticked while paused; r2 is killed in it and
			// stays down. Its follow notice (E14) tells the others to look
			// at 11:00, so a second attempt is owed.
			name: "a catch-up alone at a start, its replica killed", want: "I4", about: "was not run again",
			sc: func() *Scenario {
				sc := crafted(hourlySpec, 2)
				sc.Events = []Event{{At: 80 * time.Minute, Kind: Restart, Replica: 2}, {At: 82 * time.Minute, Kind: Kill, Replica: 2}}
				return sc
			},
			h: func() *History { return aloneAtStart(false) },
		},
		{
			name: "a catch-up alone at a start, its replica back", want: "I4", about: "was not run again",
			sc: func() *Scenario {
				sc := crafted(hourlySpec, 2)
				sc.Events = []Event{{At: 80 * time.Minute, Kind: Restart, Replica: 2}, {At: 82 * time.Minute, Kind: Kill, Replica: 2},
					{At: 82*time.Minute + 30*time.Second, Kind: Restart, Replica: 2}}
				return sc
			},
			h: func() *History { return aloneAtStart(false) },
		},
		{
			name: "a tick's run killed, not at a start", want: "I4", about: "was not run again",
			sc: func() *Scenario {
				sc := crafted(hourlySpec, 2)
				sc.Events = []Event{{At: 62 * time.Minute, Kind: Kill, Replica: 2}}
				return sc
			},
			h: func() *History { return aloneAtStart(true) },
		},
		{
			name: "a duration policy's job idle", want: "I4", about: "no run from Mon 10:00:01.000 to Mon 14:00:00.000",
			sc: func() *Scenario { return crafted(everyHour, 1) },
			h: func() *History {
				return &History{Runs: []Run{run(everyHour, 0, at(10, 0), time.Second, cron.TriggerSchedule, 1, nil)}}
			},
		},
		{
			name: "a run while paused", want: "I5", about: "a run while paused since Mon 10:30",
			sc: func() *Scenario { return crafted(hourlySpec, 1) },
			h: func() *History {
				return &History{Runs: hourlyRuns(), Admin: []AdminOp{
					{At: at(10, 30), Kind: Pause, Job: "j0"},
					{At: at(11, 30), Kind: Resume, Job: "j0"},
				}}
			},
		},
		{
			name: "a pause that Redis lost", want: "",
			sc: func() *Scenario {
				sc := crafted(hourlySpec, 1)
				sc.Events = []Event{{At: 45 * time.Minute, Kind: RedisRestart}}
				return sc
			},
			h: func() *History {
				return &History{Runs: hourlyRuns(), Admin: []AdminOp{{At: at(10, 30), Kind: Pause, Job: "j0"}}}
			},
		},
		{
			name: "a requested run with no request", want: "I6", about: "no request waiting",
			sc: func() *Scenario { return crafted(hourlySpec, 1) },
			h: func() *History {
				return &History{Runs: append(hourlyRuns(), run(hourlySpec, 1, at(10, 30), time.Second, cron.TriggerRequest, 1, nil))}
			},
		},
		{
			name: "a request not run", want: "I6", about: "did not run by Mon 10:30:05",
			sc: func() *Scenario { return crafted(hourlySpec, 1) },
			h: func() *History {
				return &History{Runs: hourlyRuns(), Admin: []AdminOp{{At: at(10, 30), Kind: RunNow, Job: "j0"}}}
			},
		},
		{
			name: "two requests, one run", want: "",
			sc: func() *Scenario { return crafted(hourlySpec, 1) },
			h: func() *History {
				runs := hourlyRuns()
				runs[0].End = at(10, 40)
				return &History{Runs: append(runs, run(hourlySpec, 1, at(10, 40), time.Second, cron.TriggerRequest, 1, nil)), Admin: []AdminOp{
					{At: at(10, 30), Kind: RunNow, Job: "j0"},
					{At: at(10, 31), Kind: RunNow, Job: "j0"},
				}}
			},
		},
		{
			name: "a record that expires before its slot's lease", want: "I7", about: "before its slot",
			sc: func() *Scenario { return crafted(hourlySpec, 1) },
			h: func() *History {
				return &History{Runs: hourlyRuns(), Probes: []Probe{
					{At: at(11, 5), Job: "j0", Exists: true, TTL: 50 * time.Minute, Slot: "2000-01-03T11:00:00Z", SlotAt: at(11, 0), State: "done"},
				}}
			},
		},
		{
			name: "a record that outlives its slot's lease", want: "",
			sc: func() *Scenario { return crafted(hourlySpec, 1) },
			h: func() *History {
				return &History{Runs: hourlyRuns(), Probes: []Probe{
					{At: at(11, 5), Job: "j0", Exists: true, TTL: 3 * time.Hour, Slot: "2000-01-03T11:00:00Z", SlotAt: at(11, 0), State: "done"},
				}}
			},
		},
		{
			name: "a catch-up of a slot from before the job", want: "I8", about: "from before the job first started",
			sc: func() *Scenario { return crafted(hourlySpec, 1) },
			h: func() *History {
				catchUp := run(hourlySpec, 0, at(9, 0), time.Second, cron.TriggerCatchUp, 1, nil)
				catchUp.Start, catchUp.End = at(10, 0), at(10, 0).Add(time.Second)
				return &History{Runs: append(hourlyRuns()[1:], catchUp)}
			},
		},
		{
			name: "a run whose fence is not above the one before", want: "I16", about: "which returned before it began",
			sc: func() *Scenario { return crafted(hourlySpec, 1) },
			h: func() *History {
				runs := hourlyRuns()
				runs[2].Tick.Fence = runs[1].Tick.Fence // taken before the claim decided
				return &History{Runs: runs}
			},
		},
		{
			name: "a stale run's write taken after its successor's", want: "I16", about: "the fenced store took the write",
			sc: func() *Scenario { return crafted(hourlySpec, 1) },
			h: func() *History {
				runs := hourlyRuns()
				// The 11:00 run, cancelled as it lost its lease, goes on
				// past the 12:00 run's end and writes then, with a fence
				// above that run's: the store takes its late write.
				runs[1].Cancelled, runs[1].Cause = runs[1].Start.Add(30*time.Minute), lock.ErrLeaseLost
				runs[1].End = runs[2].End.Add(time.Minute)
				runs[1].Tick.Fence = runs[2].Tick.Fence + 1
				return &History{Runs: runs}
			},
		},
		{
			name: "a command after Shutdown returned", want: "I12", about: "after its Shutdown returned",
			sc: func() *Scenario { return crafted(hourlySpec, 1) },
			h: func() *History {
				return &History{Runs: hourlyRuns(), AfterShutdown: []crontest.Sent{{Replica: 1, At: at(11, 30), Command: "evalsha 1f3c"}}}
			},
		},
		{
			name: "a run that returned with Redis well, recorded lost", want: "I13", about: "records it lost",
			sc: func() *Scenario { return crafted(hourlySpec, 1) },
			h: func() *History {
				h := &History{Runs: hourlyRuns()}
				h.Entries = okEntries(h.Runs)
				h.Entries["j0"][1] = entry(&h.Runs[1], "lost")
				h.HistoryReads = map[string][]time.Time{"j0": {at(13, 5)}}
				return h
			},
		},
		{
			name: "a run that returned with Redis well, its entry missing", want: "I13", about: "no read of the history found its entry",
			sc: func() *Scenario { return crafted(hourlySpec, 1) },
			h: func() *History {
				h := &History{Runs: hourlyRuns(), HistoryReads: map[string][]time.Time{"j0": {at(13, 5)}}}
				h.Entries = okEntries(h.Runs)
				h.Entries["j0"] = slices.Delete(h.Entries["j0"], 2, 3)
				return h
			},
		},
		{
			name: "a run recorded lost, its Shutdown's context ended in an outage", want: "",
			sc: func() *Scenario {
				sc := crafted(hourlySpec, 1)
				sc.Events = []Event{{At: 60*time.Minute + 500*time.Millisecond, Kind: RedisDown, D: 3 * time.Second},
					{At: 59 * time.Minute, Kind: Shutdown, Replica: 2, D: 62 * time.Second}}
				return sc
			},
			h: func() *History {
				h := &History{Runs: hourlyRuns()}
				h.Shutdowns = []ShutdownOp{{Replica: 2, At: at(10, 59), Deadline: at(11, 0).Add(2 * time.Second), Done: at(11, 0).Add(2 * time.Second), Err: errPlanned}}
				h.Entries = okEntries(h.Runs)
				h.Entries["j0"][1] = entry(&h.Runs[1], "lost")
				h.HistoryReads = map[string][]time.Time{"j0": {at(13, 5)}}
				return h
			},
		},
		{
			name: "a run recorded lost after a blip, its Shutdown without a deadline", want: "I13", about: "records it lost",
			sc: func() *Scenario {
				sc := crafted(hourlySpec, 1)
				sc.Events = []Event{{At: 60*time.Minute + 500*time.Millisecond, Kind: RedisDown, D: 3 * time.Second},
					{At: 59 * time.Minute, Kind: Shutdown, Replica: 2, D: -1}}
				return sc
			},
			h: func() *History {
				h := &History{Runs: hourlyRuns()}
				h.Shutdowns = []ShutdownOp{{Replica: 2, At: at(10, 59), Done: at(11, 0).Add(2 * time.Second)}}
				h.Entries = okEntries(h.Runs)
				h.Entries["j0"][1] = entry(&h.Runs[1], "lost")
				h.HistoryReads = map[string][]time.Time{"j0": {at(13, 5)}}
				return h
			},
		},
		{
			name: "a skip said that the history lacks", want: "I14", about: "the history has no such skip",
			sc: func() *Scenario { return crafted(hourlySpec, 1) },
			h: func() *History {
				h := &History{Runs: hourlyRuns()}
				h.Entries = okEntries(h.Runs)
				h.HistoryReads = map[string][]time.Time{"j0": {at(13, 5)}}
				h.Skips = []crontest.Skip{{Job: "j0", Replica: 0, Tick: h.Runs[1].Tick, Reason: cron.ReasonPaused, At: at(11, 0).Add(time.Second)}}
				return h
			},
		},
		{
			name: "a skip recorded that its replica did not say", want: "I14", about: "who reported no such skip",
			sc: func() *Scenario { return crafted(hourlySpec, 1) },
			h: func() *History {
				h, _ := pausedSlot()
				return h
			},
		},
		{
			name: "a skip recorded and said once", want: "",
			sc: func() *Scenario { return crafted(hourlySpec, 1) },
			h: func() *History {
				h, skipped := pausedSlot()
				h.Skips = []crontest.Skip{{Job: "j0", Replica: 2, Tick: skipped.Tick, Reason: cron.ReasonPaused, At: skipped.Start.Add(time.Millisecond)}}
				return h
			},
		},
		{
			name: "a run listed twice by Admin.Status", want: "I14", about: "listed a run twice",
			sc: func() *Scenario { return crafted(hourlySpec, 1) },
			h: func() *History {
				return &History{Runs: hourlyRuns(), Listed: []string{"j0: slot 11:00 attempt 1 by replica-1, lost"}}
			},
		},
		{
			name: "a slot not run again after Redis restarted empty mid-run", want: "I15", about: "did not run again",
			sc: func() *Scenario {
				sc := crafted(hourlySpec, 2)
				sc.Events = []Event{{At: 60*time.Minute + 10*time.Second, Kind: RedisRestart}}
				return sc
			},
			h: func() *History {
				runs := hourlyRuns()
				runs[1].End = runs[1].Start.Add(20 * time.Second)
				runs[1].Cancelled, runs[1].Cause, runs[1].Err = runs[1].End, lock.ErrLeaseLost, lock.ErrLeaseLost
				return &History{Runs: runs}
			},
		},
		{
			name: "a slot run again after Redis restarted empty mid-run", want: "",
			sc: func() *Scenario {
				sc := crafted(hourlySpec, 2)
				sc.Events = []Event{{At: 60*time.Minute + 10*time.Second, Kind: RedisRestart}}
				return sc
			},
			h: func() *History {
				runs := hourlyRuns()
				runs[1].End = runs[1].Start.Add(20 * time.Second)
				runs[1].Cancelled, runs[1].Cause, runs[1].Err = runs[1].End, lock.ErrLeaseLost, lock.ErrLeaseLost
				again := run(hourlySpec, 1, runs[1].End.Add(time.Second), time.Second, cron.TriggerSchedule, 1, nil)
				return &History{Runs: slices.Insert(runs, 2, again)}
			},
		},
		{
			name: "a slot due while the last run held the job, run after it ended", want: "I10", about: "while r1 j0 run",
			sc: func() *Scenario { return crafted(hourlySpec, 1) },
			h: func() *History {
				runs := hourlyRuns()
				runs[0].End = at(11, 1)
				runs[1] = run(hourlySpec, 2, at(11, 2), time.Second, cron.TriggerSchedule, 1, nil)
				return &History{Runs: runs}
			},
		},
		{
			name: "a slot due while a run held the job, run after a later run", want: "",
			sc: func() *Scenario { return crafted(hourlySpec, 1) },
			h: func() *History {
				runs := hourlyRuns()
				runs[0].End = at(11, 1)
				requested := run(hourlySpec, 0, at(11, 1).Add(time.Second), time.Second, cron.TriggerRequest, 1, nil)
				runs[1] = run(hourlySpec, 2, at(11, 2), time.Second, cron.TriggerSchedule, 1, nil)
				return &History{Runs: slices.Insert(runs, 1, requested),
					Admin: []AdminOp{{At: at(11, 1), Kind: RunNow, Job: "j0"}}}
			},
		},
		{
			name: "the harness failed", want: "H", about: "refused",
			sc: func() *Scenario { return crafted(hourlySpec, 1) },
			h:  func() *History { return &History{Runs: hourlyRuns(), Harness: []string{"cron.Start refused the jobs"}} },
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sc, h := tc.sc(), tc.h()
			h.End = sc.Start.Add(sc.Span)
			got := Check(sc, h)
			switch {
			case tc.want == "" && len(got) > 0:
				t.Errorf("Check = %v, want no violation", got)
			case tc.want != "" && (len(got) == 0 || got[0].Invariant != tc.want || !strings.Contains(got[0].Msg, tc.about)):
				t.Errorf("Check = %v, want %s first, saying %q", got, tc.want, tc.about)
			}
			for _, v := range Check(sc, h, tc.want) {
				if v.Invariant == tc.want {
					t.Errorf("Check(ignoring %s) = %v", tc.want, v)
				}
			}
		})
	}
}

// entry is the history's entry of run r, with outcome, as a read found it
// five minutes after r began.
func entry(r *Run, outcome string) Entry {
	key, _ := r.Tick.Slot.Key()
	return Entry{Entry: recordfmt.Entry{Slot: key, By: byName(r.Replica), Why: r.Tick.Trigger.String(), Try: strconv.Itoa(r.Tick.Attempt),
		Start: strconv.FormatInt(r.Start.UnixMilli(), 10), End: strconv.FormatInt(r.End.UnixMilli(), 10), Outcome: outcome},
		Seen: r.Start.Add(5 * time.Minute)}
}

// okEntries are the entries of runs, each ok, as reads found them.
func okEntries(runs []Run) map[string][]Entry {
	out := make(map[string][]Entry)
	for i := range runs {
		out["j0"] = append(out["j0"], entry(&runs[i], "ok"))
	}
	return out
}

// pausedSlot is the history of an hourly job paused from 10:59 to 11:01:
// replica 2's claim recorded slot 11:00 skipped (paused), which a read
// found. It returns the tick replica 2 would have run, as a run.
func pausedSlot() (*History, Run) {
	h := &History{Runs: hourlyRuns()}
	skipped := h.Runs[1]
	skipped.Replica = 2
	e := entry(&skipped, "skipped")
	e.Try, e.Reason = "0", "paused"
	h.Runs = slices.Delete(h.Runs, 1, 2)
	h.Entries = okEntries(h.Runs)
	h.Entries["j0"] = append(h.Entries["j0"], e)
	h.HistoryReads = map[string][]time.Time{"j0": {at(13, 5)}}
	h.Admin = []AdminOp{{At: at(10, 59), Kind: Pause, Job: "j0"}, {At: at(11, 1), Kind: Resume, Job: "j0"}}
	return h, skipped
}
