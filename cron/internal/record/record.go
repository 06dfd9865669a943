// Package record is the job record's protocol (cron/PROTOCOL.md): the
// scripts that every replica of a leased job runs against the job's record
// in Redis, their arguments and their answers, the record's keys, and the
// reading of its packed fields. Each event of PROTOCOL.md that reaches
// Redis is one function here: Claim (E1 to E6, hello included), Look
// (E13), Heartbeat (E7), Complete (E8) and Control (E12). It knows nothing
// of the runtime that sends them: when an event comes, and what a replica
// does with its answer, is the cron package's.
package record

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/wakuwaku-go/wakuwaku/internal/redisscript"
	"github.com/wakuwaku-go/wakuwaku/lock"
)

// ClaimArgs are a claim's arguments, the claim script's ARGV in order (see
// claimScript).
type ClaimArgs struct {
	Mode     string // tick, early, retry, follow, catchup, request, hello, skip
	Slot     string // the slot's id, if known
	SlotAt   string // a Cron slot's start in ms
	Token    string // the run's token
	Replica  string
	RunTTL   int64 // ms
	Keep     int64 // ms the record must live at least
	Attempts int
	LeaseTTL int64  // ms, a duration policy's lease
	Lease    string // a duration policy's new lease token
	Prev     string // this replica's previous lease token
	Next     string // the next tick in ms, or empty
	CatchUp  int64  // ms
	Every    int64  // ms, a duration policy's interval
	History  int    // how many runs the history keeps
	DueAt    string // when a Cron slot's ticks are due, in ms
}

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
}

// Claim sends a claim (E1 to E6) of the job whose record and history are
// keys[:2] (and, for a duration policy, its lease keys[2]) through c,
// with its WAIT if repl asks for one. acked is how many replicas
// acknowledged it. The error is Redis's, or an unexpected reply's.
func Claim(ctx context.Context, c redisscript.Client, repl redisscript.Replication, keys []string, a ClaimArgs) (Claimed, int64, error) {
	cmd, acks, _ := claimScript.RunWait(ctx, c, repl, keys,
		a.Mode, a.Slot, a.SlotAt, a.Token, a.Replica, a.RunTTL,
		a.Keep, a.Attempts, a.LeaseTTL, a.Lease, a.Prev, a.Next,
		a.CatchUp, a.Every, a.History, a.DueAt)
	reply, err := cmd.Slice()
	if err != nil {
		return Claimed{}, 0, err
	}
	code, n, text, id := claimReply(reply)
	out := Claimed{Code: ClaimCode(code), N: n, Text: text, Slot: id}
	if len(reply) > 4 {
		out.Skip, _ = reply[4].(string)
		out.HasSkip = true
	}
	if out.Code < Run || out.Code > Skipped {
		return Claimed{}, 0, fmt.Errorf("unexpected reply %v", reply)
	}
	return out, acks, nil
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

// CompleteArgs are a completion's arguments, the completion script's ARGV
// in order (see completeScript).
type CompleteArgs struct {
	Token    string
	Outcome  string // ok, error, panic, timeout, lost
	Error    string // the error text, cut
	Attempts int
	Backoff  int64 // ms
	Keep     int64 // ms the record must live at least
	Next     string
	History  int
	Due      int64  // when the run was due, ms of the replica's clock
	Schedule string // the job's interval, as the replica states it
	ByJSON   string // the replica's name as a JSON string
	ErrJSON  string // Error as a JSON string, or empty
	Left     string // ms the slot can still be claimed, or empty
}

// Completed is a completion's answer.
type Completed struct {
	Held   bool   // the run still held its lease
	State  string // its slot's state after it: open, done, failed, or empty
	Wanted bool   // a run-now request waits
	Closed bool   // its slot failed with attempts left: claim window over (R12)
}

// Complete sends a completion (E8) of the job whose record and history
// are keys through c, with its WAIT if repl asks for one. A completion
// that the replicas did not acknowledge returns its answer and an error
// wrapping lock.ErrNotReplicated; any other error comes with the zero
// Completed.
func Complete(ctx context.Context, c redisscript.Client, repl redisscript.Replication, keys []string, a CompleteArgs) (Completed, error) {
	cmd, acked, werr := completeScript.RunWait(ctx, c, repl, keys, a.Token, a.Outcome, a.Error,
		a.Attempts, a.Backoff, a.Keep, a.Next,
		a.History, a.Due, a.Schedule, a.ByJSON, a.ErrJSON, a.Left)
	reply, rerr := cmd.Slice()
	if rerr != nil {
		return Completed{}, rerr
	}
	if code, _ := reply[0].(int64); code == 0 {
		return Completed{}, nil
	} else if len(reply) < 3 {
		return Completed{}, fmt.Errorf("unexpected reply %v", reply)
	}
	state, _ := reply[1].(string)
	want, _ := reply[2].(int64)
	out := Completed{Held: true, State: state, Wanted: want == 1, Closed: len(reply) > 3}
	return out, Replicated(repl, acked, werr)
}

// Heartbeat sends a heartbeat (E7) of the run whose token is token,
// through c: it restarts the run lease for runTTL ms, and the record lives
// keep ms at least. held is false if the run no longer holds the run
// lease. With a DB that waits for replicas, one they did not acknowledge
// fails with an error wrapping lock.ErrNotReplicated.
func Heartbeat(ctx context.Context, c redisscript.Client, repl redisscript.Replication, keys []string, token string, runTTL, keep int64) (held bool, err error) {
	cmd, acked, werr := heartbeatScript.RunWait(ctx, c, repl, keys, token, runTTL, keep)
	n, err := cmd.Int64()
	if err != nil {
		return false, err
	}
	if n != 1 {
		return false, nil
	}
	if err := Replicated(repl, acked, werr); err != nil {
		return false, err
	}
	return true, nil
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

// Look reads the record's fields that E13 decides on (PROTOCOL.md, "Owners
// and looks"), with one HMGET of key through c: slot, paused and skip,
// and run if withRun. It writes nothing.
func Look(ctx context.Context, c redisscript.Client, key string, withRun bool) (Looked, error) {
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
	return Looked{Slot: ParseSlot(str(0)), Skip: ParseSkip(str(2)), Run: parseRun(str(3))}, nil
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
