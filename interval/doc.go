// Package interval says when a cron job runs next.
//
// An [Interval] is a policy: an immutable value, safe to share between
// goroutines and to keep in a package-level variable. There are four:
//
//   - [AtLeast](d): runs never overlap and start at least d apart; the next
//     run starts at max(previous start + d, previous finish).
//   - [AfterFinish](d): runs never overlap; the next run starts d after the
//     previous one finished.
//   - [AfterStart](d): the next run starts d after the previous one started,
//     whether or not that run has finished, so slow runs overlap.
//   - [Cron](spec): runs start at the slots of a crontab spec; a slot that
//     comes while the previous run is still going is skipped.
//
// The package only computes times: [Interval.Next], [Interval.NextSlot] and
// [Interval.LatestSlot] are pure functions of the times they are given, so a
// scheduler and its tests agree on them exactly. Running jobs is the business
// of package cron.
//
// # Cron specs
//
// A spec is read by github.com/robfig/cron/v3's parser: five fields (minute,
// hour, day of month, month, day of week) with an optional leading seconds
// field, or a descriptor such as "@hourly", "@daily" or "@every 90m". A
// "CRON_TZ=Zone " (or "TZ=Zone ") prefix puts the slots in that IANA time
// zone; without one, slots are in the zone of the time handed to
// [Interval.NextSlot]. Slots fall on whole seconds.
package interval
