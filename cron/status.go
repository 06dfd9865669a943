package cron

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wakuwaku-go/wakuwaku/cron/internal/record"
	"github.com/wakuwaku-go/wakuwaku/internal/redisscript"
)

// This file holds what [Admin] reads of the records: a job's status and
// history, parsed from the stored format.

// JobStatus is what a leased job's record says, cluster-wide: the run in
// progress, the last run and the last failure, its pause and its run-now
// request, and its next tick. Times are the Redis server's, to the
// millisecond. It marshals to JSON with the names in its tags, times in RFC
// 3339 and a run's duration as durationMs (see [RunRecord.MarshalJSON]).
type JobStatus struct {
	// Job is the name of the job's lease.
	Job string `json:"job"`
	// Running is the run in progress, if any.
	Running *RunRecord `json:"running,omitempty"`
	// Last is the last run that ended, whatever its outcome.
	Last *RunRecord `json:"last,omitempty"`
	// LastFailure is the last run that did not succeed.
	LastFailure *RunRecord `json:"lastFailure,omitempty"`
	// Slot is the latest slot a run was claimed for; SlotState is "open"
	// (running, or waiting for another attempt), "done" or "failed", and
	// Attempts how many runs it had.
	Slot      string `json:"slot,omitempty"`
	SlotState string `json:"slotState,omitempty"`
	Attempts  int    `json:"attempts,omitempty"`
	// Paused reports a pause (see [Admin.Pause]): since when and by whom.
	Paused   bool      `json:"paused"`
	PausedAt time.Time `json:"pausedAt,omitzero"`
	PausedBy string    `json:"pausedBy,omitempty"`
	// RunRequested reports a run-now request that no run has served yet.
	RunRequested bool      `json:"runRequested"`
	RequestedAt  time.Time `json:"requestedAt,omitzero"`
	// NextDue is when the earliest replica's next tick is due, as the
	// replicas said at their last tick; zero if unknown.
	NextDue time.Time `json:"nextDue,omitzero"`
	// SeenAt is when a replica last ticked or announced the job, and SeenBy
	// which one.
	SeenAt time.Time `json:"seenAt,omitzero"`
	SeenBy string    `json:"seenBy,omitempty"`
	// History is the job's last runs that ended, newest first, as many as
	// its [LeaseConfig.History] says; a run its replica never finished
	// (outcome lost) included.
	History []RunRecord `json:"history,omitempty"`
	// LastSuccess is when the last run that succeeded ended; zero if none
	// did while the record lived.
	LastSuccess time.Time `json:"lastSuccess,omitzero"`
	// Schedule is the job's interval, as the replica that last finished a
	// run stated it: `cron "0 * * * *"`, "at least 1h0m0s".
	Schedule string `json:"schedule,omitempty"`
}

// RunRecord is one run of a leased job, as its record keeps it.
type RunRecord struct {
	// Slot is the slot the run was for: a Cron job's slot key, or, for a
	// duration policy, the millisecond its slot opened.
	Slot string `json:"slot"`
	// Replica is the replica that ran it (see [WithReplica]).
	Replica string  `json:"replica"`
	Trigger Trigger `json:"trigger"`
	Attempt int     `json:"attempt"`
	// Scheduled is when the run was due, by its replica's clock (its
	// Tick's Scheduled), for a run of the history; zero if unknown.
	// Started minus Scheduled is how late it began.
	Scheduled time.Time `json:"scheduled,omitzero"`
	Started   time.Time `json:"started"`
	// Finished and Duration are set for a run that ended; Deadline, when
	// its run lease ends unless extended, for one in progress. A run in
	// progress whose Deadline has passed has lost its replica; the next
	// claim of any replica records it as lost, finished when it was last
	// known alive: its last heartbeat, or its start if none came (its
	// Error says how long after that its run lease expired).
	Finished time.Time     `json:"finished,omitzero"`
	Duration time.Duration `json:"-"` // durationMs in JSON
	Deadline time.Time     `json:"deadline,omitzero"`
	// Outcome is "ok", "error", "panic", "timeout" (it outlasted its
	// deadline, see [Deadlined]) or "lost" (its run lease ran out: its
	// replica died or lost Redis) for a run that ended; "skipped" for an
	// entry of the history that records a slot no replica ran (Attempt
	// 0, Started and Finished when Replica recorded it; see Reason).
	Outcome string `json:"outcome,omitempty"`
	// Error is the failure's error text, cut to 512 bytes.
	Error string `json:"error,omitempty"`
	// Reason is why a skipped slot was skipped ("still running": a run
	// held the job when its tick was due; "paused"), or why a failed
	// attempt closed its slot with attempts left ("claim window over":
	// the retry would have come after the slot's claim window).
	Reason string `json:"reason,omitempty"`
}

// MarshalJSON marshals r with the names in its fields' tags, and its
// Duration as durationMs, a number of whole milliseconds (the record's own
// resolution), for the readers of JSON that have no parser of Go's
// durations. A run in progress, which has not finished, has none.
func (r RunRecord) MarshalJSON() ([]byte, error) {
	type fields RunRecord // its fields without its methods
	v := struct {
		fields
		DurationMs *int64 `json:"durationMs,omitempty"`
	}{fields: fields(r)}
	if !r.Finished.IsZero() {
		ms := r.Duration.Milliseconds()
		v.DurationMs = &ms
	}
	// Without HTML escaping, which json.Marshal would do and an Encoder
	// that was told not to could not undo: an Encoder escapes what this
	// returns if it escapes at all.
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// UnmarshalJSON reads what MarshalJSON writes.
func (r *RunRecord) UnmarshalJSON(b []byte) error {
	type fields RunRecord
	var v struct {
		fields
		DurationMs int64 `json:"durationMs"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*r = RunRecord(v.fields)
	r.Duration = time.Duration(v.DurationMs) * time.Millisecond
	return nil
}

// Status returns what the record of the job says, its history included,
// or an error wrapping [ErrUnknownJob] if it has none. One round trip with
// a client that pipelines (every go-redis client does), two otherwise.
func (a Admin) Status(ctx context.Context, job string) (JobStatus, error) {
	c, err := a.client()
	if err != nil {
		return JobStatus{}, err
	}
	// Two reads, pipelined where the client can: not a script, which
	// Redis lets only a user with write access to its keys run, so that
	// a read-only ACL user can read the status.
	rec := redis.NewMapStringStringCmd(ctx, "hgetall", record.Key(job))
	hist := redis.NewStringSliceCmd(ctx, "lrange", record.HistoryKey(job), 0, -1)
	if p, ok := c.(interface{ Pipeline() redis.Pipeliner }); ok {
		pipe := p.Pipeline()
		pipe.Process(ctx, rec)
		pipe.Process(ctx, hist)
		_, err = pipe.Exec(ctx)
	} else if err = redisscript.Process(ctx, c, rec); err == nil {
		err = redisscript.Process(ctx, c, hist)
	}
	if err != nil && !errors.Is(err, redis.Nil) {
		return JobStatus{}, fmt.Errorf("cron: reading the record of %q: %w", job, err)
	}
	fields, runs := rec.Val(), hist.Val()
	if len(fields) == 0 {
		return JobStatus{}, fmt.Errorf("%w %q: no record of the job: no replica runs it", ErrUnknownJob, job)
	}
	st := parseStatus(job, fields)
	st.History = parseHistory(runs, st.Last)
	return st, nil
}

// parseHistory reads a history's entries, newest first, skipping any it
// can't read. last, the record's last run, leads it if it was lost and the
// history doesn't have it anywhere (a skip recorded after it comes before
// it): a claim adds each run it records lost to both, but an earlier
// version's claims left it to the next completion.
func parseHistory(runs []string, last *RunRecord) []RunRecord {
	entries := record.ParseHistory(runs)
	out := make([]RunRecord, 0, len(runs)+1)
	for _, e := range entries {
		r := RunRecord{
			Slot:      slotName(e.Slot),
			Replica:   e.By,
			Trigger:   parseTrigger(e.Why),
			Scheduled: msTime(e.Due),
			Started:   msTime(e.Start),
			Finished:  msTime(e.End),
			Outcome:   e.Outcome,
			Error:     e.Error,
			Reason:    e.Reason,
		}
		r.Attempt, _ = strconv.Atoi(e.Try)
		if !r.Finished.IsZero() {
			r.Duration = r.Finished.Sub(r.Started)
		}
		out = append(out, r)
	}
	if last != nil && last.Outcome == "lost" && !slices.ContainsFunc(out, func(r RunRecord) bool { return sameRun(r, *last) }) {
		out = slices.Insert(out, 0, *last)
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// Jobs returns the status of every leased job that has a record, by name:
// it scans the keys of every master of a Redis Cluster, or every shard of
// a Ring, then reads each record.
func (a Admin) Jobs(ctx context.Context) ([]JobStatus, error) {
	c, err := a.client()
	if err != nil {
		return nil, err
	}
	keys, err := scanKeys(ctx, c, record.Prefix+"*")
	if err != nil {
		return nil, fmt.Errorf("cron: listing the job records: %w", err)
	}
	var names []string
	for _, k := range keys {
		if name, ok := record.NameOf(k); ok {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	names = slices.Compact(names)
	out := make([]JobStatus, 0, len(names))
	for _, n := range names {
		st, err := a.Status(ctx, n)
		if errors.Is(err, ErrUnknownJob) {
			continue // expired since the scan
		}
		if err != nil {
			return nil, err
		}
		out = append(out, st)
	}
	return out, nil
}

// parseStatus reads a record's fields, some of which pack several parts
// (PROTOCOL.md, the record; package record reads them).
func parseStatus(job string, hash map[string]string) JobStatus {
	f := record.Parse(hash)
	st := JobStatus{
		Job:       job,
		Slot:      slotName(f.Slot.ID),
		SlotState: f.Slot.State,
		Paused:    f.Paused.MS != "",
		PausedAt:  msTime(f.Paused.MS),
		PausedBy:  f.Paused.By,
		NextDue:   msTime(f.Next),
		SeenAt:    msTime(f.Seen.MS),
		SeenBy:    f.Seen.By,

		LastSuccess: msTime(f.Good),
		Schedule:    f.Every,
	}
	st.Attempts, _ = strconv.Atoi(f.Slot.Tries)
	st.RunRequested = f.Want.MS != ""
	st.RequestedAt = msTime(f.Want.MS)
	// A run of an earlier layout (a token alone) is none to the scripts,
	// and so to the status.
	if run := f.Run; run.Valid {
		r := RunRecord{
			Slot:     slotName(run.Slot),
			Replica:  run.By,
			Trigger:  parseTrigger(run.Why),
			Started:  msTime(run.Since),
			Deadline: msTime(run.Until),
		}
		r.Attempt, _ = strconv.Atoi(run.Try)
		st.Running = &r
	}
	if last := f.Last; last.Start != "" {
		r := endedRun(last)
		st.Last = &r
	}
	if fail := f.Fail; fail.Start != "" {
		r := endedRun(fail)
		r.Error = f.FailError
		st.LastFailure = &r
		// A lost run's last.end is its run lease's end, until which it
		// held the job; it ended when it was last known alive, fail.end
		// (C1).
		if l := st.Last; l != nil && l.Outcome == "lost" && sameRun(*l, r) {
			l.Finished, l.Duration = r.Finished, r.Duration
		}
	}
	return st
}

// endedRun is the status of a run that ended, as the record's last or
// fail holds it.
func endedRun(e record.Ended) RunRecord {
	r := RunRecord{
		Slot:     slotName(e.Slot),
		Replica:  e.By,
		Trigger:  parseTrigger(e.Why),
		Started:  msTime(e.Start),
		Finished: msTime(e.End),
		Outcome:  e.Outcome,
	}
	r.Attempt, _ = strconv.Atoi(e.Try)
	if !r.Finished.IsZero() {
		r.Duration = r.Finished.Sub(r.Started)
	}
	return r
}

// sameRun reports whether a and b are one run: of one slot and attempt,
// started at one millisecond.
func sameRun(a, b RunRecord) bool {
	return a.Slot == b.Slot && a.Attempt == b.Attempt && a.Started.Equal(b.Started)
}

// slotName shows a duration policy's slot, the millisecond it opened, as
// a time; a Cron job's slot key is shown as it is.
func slotName(s string) string {
	if t := msTime(s); !t.IsZero() {
		return t.Format(time.RFC3339Nano)
	}
	return s
}

// msTime reads milliseconds since the epoch; the zero time if s is not a
// number.
func msTime(s string) time.Time {
	ms, err := strconv.ParseInt(s, 10, 64)
	if err != nil || s == "" {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}
