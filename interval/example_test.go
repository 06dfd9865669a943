package interval_test

import (
	"fmt"
	"time"

	"github.com/wakuwaku-go/wakuwaku/interval"
)

// hourly is a package-level policy, built from a constant.
var hourly = interval.MustCron("@hourly")

// This example shows when each policy starts the run after one that
// started at 12:00 and took 25 minutes, with a period of 10 minutes.
func ExampleInterval_Next() {
	start := time.Date(2026, time.March, 1, 12, 0, 0, 0, time.UTC)
	finish := start.Add(25 * time.Minute)
	for _, every := range []interval.Interval{
		interval.AtLeast(10 * time.Minute),
		interval.AfterFinish(10 * time.Minute),
		interval.AfterStart(10 * time.Minute),
		interval.MustCron("*/10 * * * *"),
	} {
		next, _ := every.Next(start, finish)
		fmt.Printf("%-26v %s\n", every, next.Format("15:04"))
	}
	// Output:
	// at least 10m0s             12:25
	// after finish 10m0s         12:35
	// after start 10m0s          12:10
	// cron "*/10 * * * *"        12:30
}

// This example reads a spec with a time zone and finds its next slot.
func ExampleCron() {
	every, err := interval.Cron("CRON_TZ=Asia/Tokyo 0 9 * * MON-FRI")
	if err != nil {
		fmt.Println(err)
		return
	}
	friday := time.Date(2026, time.March, 6, 12, 0, 0, 0, time.UTC)
	slot, _ := every.NextSlot(friday)
	tokyo, _ := time.LoadLocation("Asia/Tokyo")
	fmt.Println(slot.Start)
	fmt.Println(slot.Start.In(tokyo))
	fmt.Println(slot.Key())
	// Output:
	// 2026-03-09 00:00:00 +0000 UTC
	// 2026-03-09 09:00:00 +0900 JST
	// 2026-03-09T09:00:00[Asia/Tokyo] true
}

// This example shows a night on which New York's clocks fall back: 01:30
// shows twice, and is one slot, run at its first instant.
func ExampleCron_fallBack() {
	every := interval.MustCron("CRON_TZ=America/New_York 30 1 * * *")
	newYork, _ := time.LoadLocation("America/New_York")
	after := time.Date(2026, time.October, 31, 12, 0, 0, 0, newYork)
	for range 3 {
		slot, _ := every.NextSlot(after)
		key, _ := slot.Key()
		fmt.Println(slot.Start.Format(time.RFC3339), key)
		after = slot.Start
	}
	// Output:
	// 2026-11-01T01:30:00-04:00 2026-11-01T01:30:00[America/New_York]
	// 2026-11-02T01:30:00-05:00 2026-11-02T01:30:00[America/New_York]
	// 2026-11-03T01:30:00-05:00 2026-11-03T01:30:00[America/New_York]
}

// This example shows the error for a spec that cannot be used.
func ExampleCron_invalid() {
	_, err := interval.Cron("0 9 * *")
	fmt.Println(err)
	// Output: interval: invalid cron spec "0 9 * *": expected 5 to 6 fields, found 4: [0 9 * *]
}

// This example shows what a scheduler asks a policy at a tick: the slot
// the run belongs to and when the next tick is due.
func ExampleInterval_Plan() {
	due := time.Date(2026, time.March, 1, 12, 0, 0, 0, time.UTC)
	now := due.Add(3 * time.Millisecond) // the timer's latency
	for _, every := range []interval.Interval{interval.AtLeast(time.Hour), hourly, interval.MustCron("@every 90m")} {
		p := every.Plan(due, now)
		key, shared := p.Slot.Key()
		fmt.Printf("%v: slot %q %t, next %s %t, at finish %t\n", every, key, shared, p.Next.Format("15:04"), p.HasNext, p.AtFinish)
	}
	// Output:
	// at least 1h0m0s: slot "" false, next 00:00 false, at finish true
	// cron "@hourly": slot "2026-03-01T12:00:00Z" true, next 13:00 true, at finish false
	// cron "@every 90m": slot "2026-03-01T12:00:00Z" true, next 13:30 true, at finish false
}

// This example shows a nightly job that does not run at every deploy: its
// first tick is its first slot.
func ExampleInterval_WithoutStartupRun() {
	nightly := interval.MustCron("0 3 * * *").WithoutStartupRun()
	deploy := time.Date(2026, time.March, 1, 12, 0, 0, 0, time.UTC)
	first, _ := nightly.First(deploy)
	fmt.Println(nightly)
	fmt.Println(first)
	// Output:
	// cron "0 3 * * *", no startup run
	// 2026-03-02 03:00:00 +0000 UTC
}

// This example finds the one slot a scheduler that woke up late runs: the
// latest it missed.
func ExampleInterval_LatestSlot() {
	asleep := time.Date(2026, time.March, 1, 12, 0, 0, 0, time.UTC)
	awake := asleep.Add(3*time.Hour + 20*time.Minute)
	slot, ok := hourly.LatestSlot(asleep, awake)
	fmt.Println(slot.Start.Format("15:04"), ok)
	// Output: 15:00 true
}

// This example spreads the runs of jobs that share a spec over the first
// half hour of each slot: each job's offset comes from its name, the same
// on every replica and in every slot.
func ExampleInterval_WithSpread() {
	nightly := interval.MustCron("0 2 * * *").WithSpread(30 * time.Minute)
	slot := time.Date(2026, time.March, 2, 2, 0, 0, 0, time.UTC)
	for _, job := range []string{"export:tenant-7", "export:tenant-42", "export:tenant-99"} {
		fmt.Println(job, nightly.Due(job, slot).Format("15:04:05.000"))
	}
	fmt.Println(nightly)
	// Output:
	// export:tenant-7 02:21:31.601
	// export:tenant-42 02:28:12.679
	// export:tenant-99 02:08:41.515
	// cron "0 2 * * *", spread 30m0s
}
