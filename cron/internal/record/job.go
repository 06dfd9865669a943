package record

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/wakuwaku-go/wakuwaku/internal/redisscript"
)

// Job is the record of one leased job, as one replica keeps it: the
// record's keys, the clients its events go through, and what its scripts
// read besides each event's own arguments. Its methods are PROTOCOL.md's
// events; a Job is set up before its first event and not changed after,
// but for Batched and Completing, which the runtime sets before it starts
// the job.
type Job struct {
	// C is the job's client. Batched and Completing are C, or, for a DB
	// that waits for no replicas, the runtime's Batcher of C (its Later,
	// for Completing), which sends the claims, completions and looks that
	// come together in one pipeline, the completions after the others,
	// behind a few at most.
	C, Batched, Completing redisscript.Client
	Repl                   redisscript.Replication // the replicas that acknowledge a claim, completion or heartbeat (lock.WithReplicas)
	Name                   string                  // the lease's name
	Keys                   []string                // the record and its history (Keys[:2]), then, for a duration policy, the Rust crate's lease
	Replica                string                  // this replica's name
	ByJSON                 string                  // the replica's name as a JSON string, for the history's entries
	History                int                     // how many runs the history keeps
	Schedule               string                  // the job's interval, as the record states it
	RunTTL                 time.Duration
	Keep                   time.Duration // how long the record lives after its next use (see KeepFor)
	Attempts               int
	CatchUp                time.Duration
	Every                  time.Duration // a duration policy's interval
}

// KeepFor returns how long the record must live at least after a script
// that names a tick due at next (zero if unknown) and, for a claim, a
// slot whose claim window ends at end (zero if none): C2's margin after
// the later of the two.
func (j *Job) KeepFor(now, next, end time.Time) int64 {
	d := time.Duration(0)
	if !next.IsZero() {
		d = max(d, next.Sub(now))
	}
	if !end.IsZero() {
		d = max(d, end.Sub(now))
	}
	return (d + j.Keep).Milliseconds()
}

// ClaimArgs are a claim's own arguments; the Job gives the others.
type ClaimArgs struct {
	Mode     string // tick, early, retry, follow, catchup, request, hello, skip
	Slot     string // the slot's id, if known
	SlotAt   string // a Cron slot's start in ms
	Token    string // the run's token
	Keep     int64  // ms the record must live at least (see KeepFor)
	LeaseTTL int64  // ms, a duration policy's lease
	Lease    string // a duration policy's new lease token
	Prev     string // this replica's previous lease token
	Next     string // the next tick in ms, or empty
	DueAt    string // when a Cron slot's ticks are due, in ms
}

// Claim sends a claim (E1 to E6: a.Mode says which, hello included)
// through Batched, with its WAIT if Repl asks for one. acked is how many
// replicas acknowledged it. The error is Redis's, or an unexpected
// reply's.
func (j *Job) Claim(ctx context.Context, a ClaimArgs) (c Claimed, acked int64, err error) {
	cmd, acks, _ := claimScript.RunWait(ctx, j.Batched, j.Repl, j.Keys,
		a.Mode, a.Slot, a.SlotAt, a.Token, j.Replica, j.RunTTL.Milliseconds(),
		a.Keep, j.Attempts, a.LeaseTTL, a.Lease, a.Prev, a.Next,
		j.CatchUp.Milliseconds(), j.Every.Milliseconds(), j.History, a.DueAt)
	reply, err := cmd.Slice()
	if err != nil {
		return Claimed{}, 0, err
	}
	code, n, text, id := claimReply(reply)
	out := Claimed{Code: ClaimCode(code), N: n, Text: text, Slot: id}
	if len(reply) > 4 {
		out.Skip, _ = reply[4].(string)
		out.HasSkip = out.Skip != ""
	}
	if len(reply) > 5 {
		f, _ := reply[5].(int64)
		out.Fence = uint64(max(f, 0))
	}
	if out.Code < Run || out.Code > Skipped {
		return Claimed{}, 0, fmt.Errorf("unexpected reply %v", reply)
	}
	return out, acks, nil
}

// CompleteArgs are a completion's own arguments; the Job gives the
// others.
type CompleteArgs struct {
	Token   string
	Outcome string // ok, error, panic, timeout, lost
	Error   string // the error text, cut
	Backoff int64  // ms
	Keep    int64  // ms the record must live at least (see KeepFor)
	Next    string // the next tick in ms, or empty
	Due     int64  // when the run was due, ms of the replica's clock
	ErrJSON string // Error as a JSON string, or empty
	Left    string // ms the slot can still be claimed, or empty
}

// Complete sends a completion (E8) through Completing, with its WAIT if
// Repl asks for one. A completion that the replicas did not acknowledge
// returns its answer and an error wrapping lock.ErrNotReplicated; any
// other error comes with the zero Completed.
func (j *Job) Complete(ctx context.Context, a CompleteArgs) (Completed, error) {
	cmd, acked, werr := completeScript.RunWait(ctx, j.Completing, j.Repl, j.Keys[:2], a.Token, a.Outcome, a.Error,
		j.Attempts, a.Backoff, a.Keep, a.Next,
		j.History, a.Due, j.Schedule, j.ByJSON, a.ErrJSON, a.Left)
	reply, rerr := cmd.Slice()
	if rerr != nil {
		return Completed{}, rerr
	}
	if len(reply) == 0 {
		return Completed{}, fmt.Errorf("unexpected reply %v", reply)
	}
	if code, _ := reply[0].(int64); code == 0 {
		return Completed{}, nil
	} else if len(reply) < 3 {
		return Completed{}, fmt.Errorf("unexpected reply %v", reply)
	}
	state, _ := reply[1].(string)
	want, _ := reply[2].(int64)
	out := Completed{Held: true, State: state, Wanted: want == 1, Closed: len(reply) > 3}
	return out, Replicated(j.Repl, acked, werr)
}

// Heartbeat sends a heartbeat (E7) of the run whose token is token,
// through C: it restarts the run lease for RunTTL (R11), and the record
// lives Keep at least. held is false if the run no longer holds the run
// lease. With a DB that waits for replicas, one they did not acknowledge
// fails with an error wrapping lock.ErrNotReplicated.
func (j *Job) Heartbeat(ctx context.Context, token string) (held bool, err error) {
	cmd, acked, werr := heartbeatScript.RunWait(ctx, j.C, j.Repl, j.Keys[:2], token, j.RunTTL.Milliseconds(), j.Keep.Milliseconds())
	n, err := cmd.Int64()
	if err != nil {
		return false, err
	}
	if n != 1 {
		return false, nil
	}
	if err := Replicated(j.Repl, acked, werr); err != nil {
		return false, err
	}
	return true, nil
}

// Look reads the record's fields that E13 decides on (PROTOCOL.md, "Owners
// and looks"), with one HMGET through Batched: slot, paused and skip, and
// run with more than one attempt a slot. It writes nothing.
func (j *Job) Look(ctx context.Context) (Looked, error) {
	return look(ctx, j.Batched, j.Keys[0], j.Attempts > 1)
}

// NewRun returns the lease of a run that a claim won: its token, when its
// slot's claim window ends (zero for a requested run), and when it surely
// ends unless extended.
func (j *Job) NewRun(token string, window, deadline time.Time) *RunLease {
	return &RunLease{job: j, Token: token, Window: window, deadline: deadline}
}

// RunLease is the lease of a run in progress, which [lock.WhileHeld] keeps
// by heartbeat: it implements lock.Lease.
type RunLease struct {
	job    *Job
	Token  string
	Window time.Time // when its slot's claim window ends; zero for a requested run

	mu       sync.Mutex
	deadline time.Time
}

// Extend is E7: it restarts the run lease for another run TTL (R11).
// With a DB that waits for replicas, an extension they did not
// acknowledge fails with an error wrapping lock.ErrNotReplicated, and
// Deadline stays where the last acknowledged one left it.
func (l *RunLease) Extend(ctx context.Context) (bool, error) {
	sent := time.Now()
	held, err := l.job.Heartbeat(ctx, l.Token)
	if err != nil {
		return false, fmt.Errorf("cron: extending the run lease of %q: %w", l.job.Name, err)
	}
	if !held {
		return false, nil
	}
	l.mu.Lock()
	if d := sent.Add(l.job.RunTTL); d.After(l.deadline) {
		l.deadline = d
	}
	l.mu.Unlock()
	return true, nil
}

// TTL is the run lease's length.
func (l *RunLease) TTL() time.Duration { return l.job.RunTTL }

// Deadline is when the run lease surely ends unless extended.
func (l *RunLease) Deadline() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.deadline
}

// The outcomes of Confirm.
const (
	Confirmed      = iota // the replicas acknowledged the claim
	ConfirmLost           // the run lease is gone from Redis: claim again
	ConfirmTimeout        // neither, before until or the end of ctx
)

// Confirm waits for the replicas to acknowledge the claim that won l (R17,
// with a DB that waits for replicas): it sends E7 with its WAIT, first
// after 50 ms, then twice as long after each, at most a second apart,
// until the replicas acknowledge it (the claim's write is older, so they
// have it too), the run lease is gone, until passes or ctx ends.
func (l *RunLease) Confirm(ctx context.Context, until time.Time) int {
	wait := 50 * time.Millisecond
	for time.Now().Add(wait).Before(until) {
		timer := time.NewTimer(wait)
		select {
		case <-timer.C:
		case <-ctx.Done():
			timer.Stop()
			return ConfirmTimeout
		}
		held, err := l.Extend(ctx)
		switch {
		case err == nil && held:
			return Confirmed
		case err == nil:
			return ConfirmLost
		}
		wait = min(2*wait, time.Second)
	}
	return ConfirmTimeout
}
