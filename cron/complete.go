package cron

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/wakuwaku-go/wakuwaku/cron/internal/record"
	"github.com/wakuwaku-go/wakuwaku/lock"
)

// This file holds E8 of PROTOCOL.md, the completion of a leased job's run,
// as its record keeper sends it.

// completed is a completion's answer.
type completed struct {
	held    bool // the run still held its lease
	open    bool // its slot waits for another attempt
	wanted  bool // a run-now request waits
	closed  bool // its slot failed with attempts left: its claim window ends before the back-off does (R12)
	backoff time.Duration
}

// complete is E8: it records the end of run, which was due at scheduled
// and returned err (a *PanicError if it panicked), and the next tick if
// known (R12), and adds the run to the job's history. A failed attempt
// whose back-off ends after its slot's claim window (run.window) closes
// the slot as failed. With a DB that waits
// for replicas, a completion they did not acknowledge returns its answer
// and an error wrapping lock.ErrNotReplicated: the caller sends it again
// (R18).
func (s *jobState) complete(ctx context.Context, run *record.RunLease, attempt int, scheduled time.Time, err error, next time.Time) (completed, error) {
	outcome, text := outcome(err), ""
	var p *PanicError
	switch {
	case errors.As(err, &p):
		text = p.Error()
	case outcome == "error" && errors.Is(err, lock.ErrLeaseLost):
		outcome, text = "lost", err.Error()
	case err != nil:
		text = err.Error()
	}
	backoff := s.backoffAfter(attempt)
	nextMS := ""
	if !next.IsZero() {
		nextMS = strconv.FormatInt(next.UnixMilli(), 10)
	}
	text = cut(text, maxErrorText)
	errJSON := ""
	if text != "" {
		errJSON = jsonString(text)
	}
	now := s.now()
	left := ""
	if !run.Window.IsZero() {
		left = strconv.FormatInt(run.Window.Sub(now).Milliseconds(), 10)
	}
	r, rerr := s.Complete(ctx, record.CompleteArgs{
		Token: run.Token, Outcome: outcome, Error: text, Backoff: backoff.Milliseconds(),
		Keep: s.KeepFor(now, next, time.Time{}), Next: nextMS, Due: scheduled.UnixMilli(), ErrJSON: errJSON, Left: left,
	})
	var c completed
	if r.Held {
		c = completed{held: true, open: r.State == "open", wanted: r.Wanted, backoff: backoff, closed: r.Closed}
	}
	if rerr != nil {
		return c, fmt.Errorf("cron: recording a run of %q: %w", s.Name, rerr)
	}
	return c, nil
}

// backoffAfter returns how long the slot waits after a failed attempt:
// Backoff after the first, doubled after each further one, at most
// maxBackoff times Backoff.
func (s *jobState) backoffAfter(attempt int) time.Duration {
	d := s.backoff
	for i := 1; i < attempt && d < maxBackoff*s.backoff; i++ {
		d *= 2
	}
	return min(d, maxBackoff*s.backoff)
}
