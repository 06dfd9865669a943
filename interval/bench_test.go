package interval_test

import (
	"testing"
	"time"

	robfig "github.com/robfig/cron/v3"

	"github.com/wakuwaku-go/wakuwaku/interval"
)

// BenchmarkRobfigNext is the baseline of BenchmarkPlan: one call of
// robfig/cron's own Next, which is all a scheduler that ignored slots and
// daylight saving would ask.
func BenchmarkRobfigNext(b *testing.B) {
	sched, err := robfig.NewParser(robfig.SecondOptional | robfig.Minute | robfig.Hour |
		robfig.Dom | robfig.Month | robfig.Dow | robfig.Descriptor).Parse("* * * * * *")
	if err != nil {
		b.Fatal(err)
	}
	due := time.Date(2026, time.March, 1, 12, 0, 0, 0, time.Local)
	for b.Loop() {
		due = sched.Next(due)
	}
}

// BenchmarkPlan measures what a scheduler's question at one tick costs,
// for a job due every second, in UTC, in the process's local zone and in a
// zone with daylight saving.
func BenchmarkPlan(b *testing.B) {
	for _, tc := range []struct {
		name string
		spec string
		loc  *time.Location
	}{
		{"UTC", "* * * * * *", time.UTC},
		{"Local", "* * * * * *", time.Local},
		{"CRON_TZ", "CRON_TZ=America/New_York * * * * * *", time.UTC},
		{"every", "@every 1s", time.Local},
		{"AtLeast", "", time.Local},
	} {
		b.Run(tc.name, func(b *testing.B) {
			every := interval.AtLeast(time.Second)
			if tc.spec != "" {
				every = interval.MustCron(tc.spec)
			}
			due := time.Date(2026, time.March, 1, 12, 0, 0, 0, tc.loc)
			for b.Loop() {
				p := every.Plan(due, due.Add(time.Millisecond))
				if p.HasNext {
					due = p.Next
				} else {
					due = due.Add(time.Second)
				}
			}
		})
	}
}
