// Package record is the job record's protocol (cron/PROTOCOL.md): the
// scripts that every replica of a leased job runs against the job's record
// in Redis, their arguments and their answers, the record's keys, the
// batching transport that carries them, the replicas' acknowledgement
// (WAIT), and the reading of its packed fields. Each event of PROTOCOL.md
// that reaches Redis is one method of a job's record (Job): Claim (E1 to
// E6, hello included), Look (E13), Heartbeat (E7; RunLease.Extend is its
// run lease's) and Complete (E8); Control (E12), an operator's, is a
// function of the record's name. It knows nothing of the runtime that
// sends them: when an event comes, and what a replica does with its
// answer, is the cron package's.
package record

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/wakuwaku-go/wakuwaku/internal/recordfmt"
	"github.com/wakuwaku-go/wakuwaku/internal/redisscript"
	"github.com/wakuwaku-go/wakuwaku/lock"
)

// ClaimCode is the claim script's answer.
type ClaimCode int64

// The claim's answers (claimScript's reply codes).
const (
	Run       ClaimCode = 1 // the run goes ahead: N is its attempt, Text its trigger
	Held      ClaimCode = 2 // R1, R2: the run lease is held for N ms more (Text: same, mine, other; early)
	Past      ClaimCode = 3 // R7, D4: the slot ran, or is past, or its lease is held by hand
	Paused    ClaimCode = 4 // R3 (Text early: N ms before the slot's ticks are due)
	RetryWait ClaimCode = 5 // R6: the slot waits N ms for its next attempt
	Nothing   ClaimCode = 6 // nothing to do, quietly
	UsedUp    ClaimCode = 7 // R8
	Skipped   ClaimCode = 8 // R20: the slot is recorded skipped (Text: why; N: 1 if this claim recorded it)
)

// Claimed is a claim's answer, as its script gave it.
type Claimed struct {
	Code ClaimCode
	N    int64
	Text string
	Slot string // the slot's id, if known
	// Skip is the record's reason ("still running", "paused") of the skip
	// this claim recorded while it served a request (R20), if HasSkip.
	Skip    string
	HasSkip bool
	// Fence is a run's fencing number (F1), for Code Run: above every
	// number the record handed out before.
	Fence uint64
}

// claimReply reads a claim's reply: its code, its integer, its text and
// the slot's id, each zero if absent.
func claimReply(reply []any) (code, n int64, text, slot string) {
	if len(reply) > 0 {
		code, _ = reply[0].(int64)
	}
	if len(reply) > 1 {
		n, _ = reply[1].(int64)
	}
	if len(reply) > 2 {
		text, _ = reply[2].(string)
	}
	if len(reply) > 3 {
		slot, _ = reply[3].(string)
	}
	return code, n, text, slot
}

// Completed is a completion's answer.
type Completed struct {
	Held   bool   // the run still held its lease
	State  string // its slot's state after it: open, done, failed, or empty
	Wanted bool   // a run-now request waits
	Closed bool   // its slot failed with attempts left: claim window over (R12)
}

// Control sends an operator's command (E12: op is pause, resume or run)
// to the record of the job whose lease is named name, as by. err is
// Redis's; found is false if the job has no record; short, if the command
// was recorded, wraps lock.ErrNotReplicated if the replicas did not
// acknowledge it (see Replicated).
func Control(ctx context.Context, c redisscript.Client, repl redisscript.Replication, name, op, by string) (found bool, short, err error) {
	cmd, acked, werr := controlScript.RunWait(ctx, c, repl, []string{Key(name)}, op, by)
	n, err := cmd.Int64()
	switch {
	case err != nil:
		return false, nil, err
	case n < 0:
		return false, nil, nil
	}
	return true, Replicated(repl, acked, werr), nil
}

// look reads the fields of the record key that E13 decides on, with one
// HMGET through c: slot, paused and skip, and run if withRun (see
// Job.Look).
func look(ctx context.Context, c redisscript.Client, key string, withRun bool) (Looked, error) {
	fields := []any{"hmget", key, "slot", "paused", "skip"}
	if withRun {
		fields = append(fields, "run")
	}
	cmd := redis.NewSliceCmd(ctx, fields...)
	if err := redisscript.Process(ctx, c, cmd); err != nil {
		return Looked{}, err
	}
	v := cmd.Val()
	str := func(i int) string {
		if i < len(v) {
			if x, ok := v[i].(string); ok {
				return x
			}
		}
		return ""
	}
	return Looked{Slot: ParseSlot(str(0)), Skip: ParseSkip(str(2)), Run: recordfmt.ParseRun(str(3))}, nil
}

// Looked is what a look read: the record's slot, the slot recorded
// skipped, and the run in progress (all empty if absent, or not read).
type Looked struct {
	Slot Slot
	Skip Skip
	Run  RunField
}

// Replicated returns nil if acked replicas are as many as repl asks to
// acknowledge a write, else an error wrapping lock.ErrNotReplicated, with
// werr, the WAIT's own error, if any.
func Replicated(repl redisscript.Replication, acked int64, werr error) error {
	switch {
	case werr != nil:
		return fmt.Errorf("%w: WAIT: %w", lock.ErrNotReplicated, werr)
	case acked < int64(repl.N):
		return fmt.Errorf("%w: %d of %d replicas within %d ms", lock.ErrNotReplicated, acked, repl.N, repl.WaitMs)
	}
	return nil
}
