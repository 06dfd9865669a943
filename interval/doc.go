// Package interval says when a cron job runs. It is the one place that
// states each policy's rules: package cron's runtime asks an [Interval] at
// every tick and queues what it answers.
//
// An Interval is a policy: an immutable value, safe to share between
// goroutines and to keep in a package-level variable. Its methods are pure
// functions of the times they are given, so a scheduler and its tests agree
// on them exactly.
//
// # Policies
//
// A job runs once when its runtime starts (unless its Interval is
// [Interval.WithoutStartupRun]), then as its policy says:
//
//   - [AtLeast](d): runs never overlap and start at least d apart: the next
//     run starts at max(previous start + d, previous finish).
//   - [AfterFinish](d): runs never overlap; the next run starts d after the
//     previous one finished.
//   - [AfterStart](d): the next run is due d after the previous one was
//     due, whether or not that run has finished, so slow runs overlap (the
//     runtime bounds how many).
//   - [Cron](spec): runs start at the slots of a crontab spec; a slot that
//     comes while the previous run is still going is skipped, not queued.
//
// A skipped tick counts as a run that finished when it started.
//
// # Late ticks
//
// A tick handled late (a stalled process, a clock step) does not make up
// the ticks it missed. A duration policy's tick more than d late runs once,
// and the schedule goes on from then. A Cron tick that comes after later
// slots have passed runs once, as the latest of them ([Plan.Scheduled]).
//
// # Slots
//
// Every run belongs to a [Slot], and a job that runs once per interval
// across replicas runs once per slot. A Cron spec's slots are the same on
// every replica and across restarts, so a leased job's lease key names its
// slot ([Slot.Key]); the startup run belongs to the slot the start falls in.
// A duration policy's slot is its replica's own: it opens when the tick is
// handled (for AfterStart, when it was due) and lasts d, and its lease is
// the job's own, as in the Rust crate's pattern. The lease of a slot ends where
// [Slot.LeaseEnd] says, however late it was taken.
//
// # Spread
//
// Jobs that share a spec start together at each of its slots. An Interval
// [Interval.WithSpread] starts each job's run at an offset of its own into
// the slot, derived from the job's name ([Interval.Due]), the same on every
// replica, so that ten thousand hourly jobs don't all start at :00. The run
// still belongs to its slot.
//
// # Cron specs
//
// A spec is read by github.com/robfig/cron/v3's parser: five fields (minute,
// hour, day of month, month, day of week) with an optional leading seconds
// field, or a descriptor such as "@hourly" or "@daily". Slots fall on whole
// seconds. A "CRON_TZ=Zone " (or "TZ=Zone ") prefix puts the slots in that
// IANA time zone; without one, slots are in the zone of the time they are
// asked about, which in package cron is the process's local zone (so give
// every replica of a job one zone, or a CRON_TZ).
//
// Daylight-saving changes are handled as classic cron does, which
// robfig/cron's own schedule does not:
//
//   - a wall time that shows twice (clocks fall back) is one slot, at its
//     first instant: "30 1 * * *" in America/New_York runs once on
//     2026-11-01, at 01:30 EDT;
//   - a wall time that never shows (clocks spring forward) runs once, right
//     after the skipped stretch: "30 2 * * *" runs at 03:00 EDT on
//     2027-03-14, and a day whose midnight doesn't exist still gets its
//     midnight run, at the first instant of that day.
//
// The key of a slot of a zoned spec is its wall date and time with the zone,
// so every replica names it alike.
//
// [Cron] parses a spec's text once while an Interval of it is in use: jobs
// that read their specs one by one from configuration share the parsed
// policies of equal texts, as jobs of one package-level Interval do.
//
// "@every d" differs from robfig/cron's: its slots lie on a grid of
// multiples of d since the Unix epoch (1970-01-01T00:00:00Z), not d apart
// from each process's start, so replicas started at different moments, and
// a replica restarted in the middle of a slot, agree on the slot; the ticks
// come at the grid's points. "@every 2s" ticks at every even second,
// "@every 1h" on the hour. d may have a fraction of a second, and is kept
// exactly; it must be between a second and ten years.
package interval
