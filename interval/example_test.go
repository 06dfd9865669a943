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
	fmt.Println(slot)
	fmt.Println(slot.In(tokyo))
	// Output:
	// 2026-03-09 00:00:00 +0000 UTC
	// 2026-03-09 09:00:00 +0900 JST
}

// This example shows the error for a spec that cannot be used.
func ExampleCron_invalid() {
	_, err := interval.Cron("0 9 * *")
	fmt.Println(err)
	// Output: interval: invalid cron spec "0 9 * *": expected 5 to 6 fields, found 4: [0 9 * *]
}

// This example shows what a scheduler reads from a policy.
func ExampleInterval_Period() {
	for _, every := range []interval.Interval{interval.AtLeast(time.Hour), hourly} {
		period, hasPeriod := every.Period()
		spec, isCron := every.Spec()
		fmt.Printf("%v: period %v %t, spec %q %t, overlaps %t\n", every, period, hasPeriod, spec, isCron, every.Overlaps())
	}
	// Output:
	// at least 1h0m0s: period 1h0m0s true, spec "" false, overlaps false
	// cron "@hourly": period 0s false, spec "@hourly" true, overlaps false
}

// This example finds the one slot a scheduler that woke up late runs: the
// latest it missed.
func ExampleInterval_LatestSlot() {
	asleep := time.Date(2026, time.March, 1, 12, 0, 0, 0, time.UTC)
	awake := asleep.Add(3*time.Hour + 20*time.Minute)
	slot, ok := hourly.LatestSlot(asleep, awake)
	fmt.Println(slot.Format("15:04"), ok)
	// Output: 15:00 true
}
