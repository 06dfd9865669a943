package cron

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/wakuwaku-go/wakuwaku/cron/internal/record"
	"github.com/wakuwaku-go/wakuwaku/internal/redisscript"
	"github.com/wakuwaku-go/wakuwaku/interval"
)

// The bounds of LeaseConfig.History.
const (
	defaultHistory = 20
	maxHistory     = 1000
)

// maxErrorText is how many bytes of a failed run's error the record keeps.
const maxErrorText = 512

// The defaults of LeaseConfig's fields for the record.
const (
	defaultRunTTL  = 30 * time.Second
	defaultBackoff = time.Second
	maxBackoff     = 64 // times Backoff, at most
)

// claimMode is the event a claim is for: each of PROTOCOL.md's E1 to E6
// has its own, and only modeTick (and modeCatchUp, for a slot every
// replica missed) can open a slot.
type claimMode uint8

const (
	modeTick    claimMode = iota // E1: a tick of the schedule
	modeRetry                    // E2: this replica's attempt at a slot after its own failed
	modeFollow                   // E3: another look at a slot that a run or a back-off held up
	modeCatchUp                  // E4: the catch-up at start
	modeRequest                  // E5: a run-now request
	modeHello                    // E6: no run: the runtime's start announces the job
	// modeLook is E13 sent again: a look at a Cron slot whose tick or
	// look Redis did not answer, or whose run on this replica failed
	// after it lost its run lease (R12). It is no claim script's mode: a
	// look that finds the slot unclaimed claims it as its tick (E1).
	modeLook
	// modeSkip is E1 of a Cron slot whose tick came while this replica's
	// own run of the job went on: it never runs, and records the slot
	// skipped if a run holds the job (R2, R20).
	modeSkip
	// modeDue is E13 when a Cron slot is due, after a tick that came
	// before (mode early): as modeLook, but its answer is the tick's.
	modeDue
	// modeAfterRun is E13 once this replica's own run of the job has
	// ended, at a Cron slot whose tick came in mode skip and found no run
	// holding the job: that run had lost its lease. As modeDue, its
	// answer is the tick's; and as modeLook, a run it starts is announced
	// (E14).
	modeAfterRun
)

var modeNames = [...]string{"tick", "retry", "follow", "catchup", "request", "hello", "look", "skip", "due", "afterrun"}

// jobState keeps a leased job's record in Redis: the claim before each run,
// the heartbeat of its run lease while it runs, the completion after it.
// Its record.Job sends them; jobState decides when, and reads their
// answers for the runtime.
type jobState struct {
	*record.Job
	shared  bool // a Cron policy: slots that every replica names alike
	ttl     time.Duration
	backoff time.Duration
	base    time.Duration // the interval's length (its current slot's, for a Cron spec)
	now     func() time.Time

	// due returns when the job's tick of the Cron slot that starts at
	// start is due: start, or later with a spread; nil for start.
	due func(start time.Time) time.Time

	// own is the token of this replica's latest lease of a duration
	// policy's slot, "" before the first.
	mu  sync.Mutex
	own string

	// retry is the timer of this replica's next look at the job's newest
	// slot it knows of (E2 or E3), if one is planned: when, at which slot,
	// for which event, and the slot's record id. Guarded by Runtime.mu.
	retry     *time.Timer
	retryAt   time.Time
	retrySlot interval.Slot
	retryMode claimMode
	retryID   string

	// looks counts the looks in a row that Redis did not answer after a
	// tick it did not answer (modeLook), for their back-off.
	looks atomic.Uint32

	// group is the registry of the replicas that run the job with this
	// one, as the last beat read it (replicas.go); nil until then.
	group atomic.Pointer[replicaGroup]

	// helloing is set while an announcement of the job is on its way or
	// waits to be sent again after Redis did not answer (see
	// helloAfterError), whose timer is helloTimer (guarded by
	// Runtime.mu).
	helloing   atomic.Bool
	helloTimer *time.Timer
}

// newJobState checks a leased job's config, whose Name is set, and returns
// its record keeper.
func newJobState(every interval.Interval, l LeaseConfig, replica string, now func() time.Time) (*jobState, error) {
	if strings.ContainsAny(l.Name, "{}") {
		return nil, fmt.Errorf("%w: job %q: a leased job's name must not hold '{' or '}': it is its record's cluster hash tag", ErrInvalidJob, l.Name)
	}
	switch {
	case l.Attempts < 0:
		return nil, fmt.Errorf("%w: job %q: LeaseConfig.Attempts is %d", ErrInvalidJob, l.Name, l.Attempts)
	case l.Backoff < 0, l.CatchUp < 0, l.RunTTL < 0:
		return nil, fmt.Errorf("%w: job %q: LeaseConfig has a negative duration", ErrInvalidJob, l.Name)
	case l.History < 0 || l.History > maxHistory:
		return nil, fmt.Errorf("%w: job %q: LeaseConfig.History is %d, want 0 (for %d) to %d", ErrInvalidJob, l.Name, l.History, defaultHistory, maxHistory)
	}
	c, err := redisscript.ClientOf(l.DB, LeaseNamespace)
	if err != nil {
		return nil, fmt.Errorf("%w: job %q: its lease can't be taken: %w", ErrInvalidJob, l.Name, err)
	}
	repl := redisscript.ReplicationOf(l.DB)
	if repl.N > 0 {
		if err := redisscript.CanWait(c); err != nil {
			return nil, fmt.Errorf("%w: job %q: %w", ErrInvalidJob, l.Name, err)
		}
	}
	s := &jobState{
		Job: &record.Job{
			C: c, Batched: c, Completing: c, Repl: repl, Name: l.Name, Replica: replica,
			RunTTL: l.RunTTL, Attempts: max(l.Attempts, 1), CatchUp: l.CatchUp,
			History: l.History, Schedule: every.String(),
		},
		ttl: l.TTL, now: now, backoff: l.Backoff,
	}
	s.ByJSON = jsonString(replica)
	if s.History == 0 {
		s.History = defaultHistory
	}
	if s.backoff == 0 {
		s.backoff = defaultBackoff
	}
	// base is the length of the interval: of its current slot, for a
	// Cron spec, whose slots every replica names alike.
	start := now()
	var base time.Duration
	if slot := every.Plan(start, start).Slot; isShared(slot) {
		s.shared, base = true, slot.End.Sub(slot.Start)
		s.Keys = []string{record.Key(l.Name), record.HistoryKey(l.Name)}
	} else {
		next, _ := every.Next(start, start)
		s.Every, base = next.Sub(start), next.Sub(start)
		s.Keys = []string{record.Key(l.Name), record.HistoryKey(l.Name), record.LeaseKey(l.Name)}
	}
	if s.RunTTL == 0 {
		// A replica that dies mid-run holds the job this long: half an
		// interval at most, so that a short job loses one slot to it.
		s.RunTTL = min(defaultRunTTL, max(base/2, 10*time.Millisecond))
	}
	s.RunTTL = max(s.RunTTL, 3*time.Millisecond)
	// C2's margin, after the next tick and the slot's claim window: a
	// few intervals, the run lease and the catch-up window.
	s.Keep = max(3*base+s.RunTTL+s.CatchUp, time.Minute)
	s.base = base
	return s, nil
}

// isShared reports whether slot has a key that every replica computes
// alike: a Cron spec's.
func isShared(slot interval.Slot) bool {
	_, ok := slot.Key()
	return ok
}

// claimed is a claim's answer.
type claimed struct {
	run     *record.RunLease // the run lease, if the run goes ahead
	reason  string           // why not, if it doesn't ("" with quiet)
	wait    time.Duration    // until another run's lease or a back-off ends, if known
	quiet   bool             // nothing to report (PROTOCOL.md's "nothing")
	follow  bool             // worth another look at the slot when wait has passed (E3)
	attempt int
	trigger Trigger
	slot    string // the slot's id in the record, if known
	// recorded is the reason of the skip of the tick's slot that this
	// claim recorded (R20: ReasonStillRunning or ReasonPaused), "" if
	// none: this replica reports it, the others see it recorded.
	recorded string
	// fence is the run's fencing number (F1), if run is set.
	fence uint64
	// due is when the slot's ticks are due, for a tick that came before
	// by this replica's clock (mode early); zero otherwise.
	due time.Time
	// early is R2 or R3 refusing a tick before its slot's ticks are due,
	// by this replica's clock or the server's (wait: until they are by
	// the server's): nothing recorded (R20).
	early bool
}

// claim asks the record whether this replica runs t now, for the event
// mode; slot is the record's id of t's slot for modeRetry and modeFollow
// (a duration policy's slot has no other name).
//
// With a DB that waits for replicas (lock.WithReplicas), a claim that
// won is confirmed before its run starts (R17): the replicas must have
// acknowledged its write, in its own round trip or, failing that, in a
// heartbeat's (E7, which covers every write before it). A heartbeat that
// finds the run lease gone (a failover lost the claim) claims again. If
// nothing is acknowledged within half the run lease, the run does not
// start: the answer is ReasonNotReplicated, and the run lease lapses.
func (s *jobState) claim(ctx context.Context, mode claimMode, t *Tick, next time.Time, slot string) (claimed, error) {
	until := time.Now().Add(s.RunTTL / 2)
	for {
		c, acked, err := s.claimOnce(ctx, mode, t, next, slot)
		if err != nil || c.run == nil || acked {
			return c, err
		}
		switch c.run.Confirm(ctx, until) {
		case record.Confirmed:
			return c, nil
		case record.ConfirmLost:
			if time.Now().Before(until) {
				continue
			}
		}
		return claimed{reason: ReasonNotReplicated, slot: c.slot}, nil
	}
}

// claimOnce sends one claim; acked reports that the replicas acknowledged
// it, as the DB asks (always, for a DB that asks for none).
func (s *jobState) claimOnce(ctx context.Context, mode claimMode, t *Tick, next time.Time, slot string) (c claimed, acked bool, err error) {
	slotAt, dueAt := "", ""
	var leaseMS int64
	var token, prev string
	now := s.now()
	end := t.Slot.LeaseEnd(s.ttl)
	name := modeNames[mode]
	if s.shared {
		slot, _ = t.Slot.Key()
		slotAt = strconv.FormatInt(t.Slot.Start.UnixMilli(), 10)
		dueAt = slotAt
		due := t.Slot.Start
		if s.due != nil {
			// R2 asks whether a run held the job when the slot's ticks
			// came: with a spread, after its start.
			due = s.due(t.Slot.Start)
			dueAt = strconv.FormatInt(due.UnixMilli(), 10)
		}
		if mode == modeTick && now.Before(due) {
			// A tick before the slot's ticks are due (a start's): R2 and
			// R3 do not record the slot skipped (R20); the replica looks
			// again when it is due.
			name, c.due = "early", due
		}
	}
	if (mode == modeTick || mode == modeRetry || mode == modeFollow) && !now.Before(end) {
		// Its claim window is over; a duration policy's lease would
		// last into the replica's next slot.
		return claimed{reason: ReasonTooLate, quiet: mode != modeTick}, true, nil
	}
	if !s.shared && mode != modeHello && mode != modeRequest {
		leaseMS = max(end.Sub(now).Milliseconds(), 1)
		token = record.NewLeaseToken()
		s.mu.Lock()
		prev = s.own
		s.mu.Unlock()
	}
	if mode == modeHello || mode == modeRequest {
		end = time.Time{}
	}
	runToken := randomHex(16)
	nextMS := ""
	if !next.IsZero() {
		nextMS = strconv.FormatInt(next.UnixMilli(), 10)
	}
	sent := time.Now()
	r, acks, err := s.Claim(ctx, record.ClaimArgs{
		Mode: name, Slot: slot, SlotAt: slotAt, Token: runToken, Keep: s.KeepFor(now, next, end),
		LeaseTTL: leaseMS, Lease: token, Prev: prev, Next: nextMS, DueAt: dueAt,
	})
	if err != nil {
		return claimed{}, false, fmt.Errorf("cron: claiming a run of %q: %w", s.Name, err)
	}
	acked = acks >= int64(s.Repl.N)
	n, text := r.N, r.Text
	c = claimed{slot: r.Slot, quiet: mode == modeCatchUp, due: c.due}
	if r.HasSkip {
		// R20: a skip recorded while a request was served.
		c.recorded = skipReason(r.Skip)
	}
	switch r.Code {
	case record.Run:
		c.trigger = parseTrigger(text)
		if token != "" && n == 1 && c.trigger != TriggerRequest {
			// The claim opened a slot, with token as its lease.
			s.mu.Lock()
			s.own = token
			s.mu.Unlock()
		}
		c.run, c.attempt, c.fence = s.NewRun(runToken, end, sent.Add(s.RunTTL)), int(n), r.Fence
		return c, acked, nil
	case record.Held: // R1, R2
		c.wait = time.Duration(n) * time.Millisecond
		c.reason = ReasonRunning
		switch {
		case text == "early":
			// R2 before the slot is due: nothing recorded (R20).
			c.reason, c.early = ReasonStillRunning, true
		case mode == modeRequest:
			c.quiet = true
		case mode != modeTick:
			c.follow = true
		case text == "same":
			c.follow = s.Attempts > 1
		}
		// Else R2 refused a tick of a slot that is not none (a run-now's
		// run holds the job after the slot's, or the record names a newer
		// slot, or a duration policy's interval had its slot): the slot
		// is in other hands, and no skip is its outcome (R20 records one
		// for a slot that is none). Reported so, as a tick elsewhere.
		return c, true, nil
	case record.Past: // R7, D4
		c.reason = ReasonLeaseHeld
	case record.Paused: // R3
		c.reason = ReasonPaused
		switch {
		case text == "early":
			c.wait, c.early = time.Duration(n)*time.Millisecond, true
		case mode == modeTick:
			// R3 refused a tick of a slot that is not none: it was
			// claimed before the pause (or the record names a newer
			// slot, or a duration policy's interval had its slot). Its
			// outcome is its runs', in the history; a skip is recorded
			// only for a slot that is none (R20). So the tick is one
			// elsewhere, as R7 would have answered.
			c.reason = ReasonLeaseHeld
		}
	case record.RetryWait: // R6
		c.reason, c.wait, c.follow = ReasonRetryWait, time.Duration(n)*time.Millisecond, true
		c.quiet = c.quiet || mode != modeTick
	case record.Nothing:
		c.quiet = true
	case record.UsedUp: // R8
		c.reason = ReasonAttemptsUsedUp
	case record.Skipped: // R20: S is recorded skipped
		if n == 1 {
			c.reason, c.recorded = skipReason(text), skipReason(text)
		} else {
			c.reason = ReasonSkippedElsewhere
		}
	}
	return c, true, nil
}

// skipReason is the runtime's reason for the record's reason of a skip
// (R20).
func skipReason(why string) string {
	if why == "paused" {
		return ReasonPaused
	}
	return ReasonStillRunning
}

// jsonString returns s as a JSON string, quoted, for a script to put in a
// history entry as it is.
func jsonString(s string) string {
	b, _ := json.Marshal(s) // a string always marshals
	return string(b)
}

// randomHex returns n random bytes in hex.
func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// cut returns s cut to at most n bytes, at a rune boundary, marked with an
// ellipsis when it was cut.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := n - len("…")
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + "…"
}
