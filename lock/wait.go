package lock

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"
)

// Backoff is how [Lock.Lock] spaces its attempts on a busy lock: exponential
// back-off with full jitter. Before attempt k+1 it sleeps a random time,
// uniform between zero and min(Max, Min×2^k) (k counts from 0), so that
// waiters spread out instead of retrying together, and no wait is longer
// than Max. A Backoff is a plain value, safe to share; its zero value takes
// the defaults below.
type Backoff struct {
	// Min caps the first sleep, and so how soon a lock released right
	// after the first attempt is seen; 0 means 10 ms.
	Min time.Duration
	// Max caps every sleep, and so how long a waiter may stay asleep after
	// the lock became free; 0 means 1 s.
	Max time.Duration
}

// Default back-off bounds, for the zero Backoff.
const (
	defaultMinBackoff = 10 * time.Millisecond
	defaultMaxBackoff = time.Second
)

// bounds returns b's Min and Max with defaults filled in, or an error if
// they are negative or Max is below Min.
func (b Backoff) bounds() (lo, hi time.Duration, err error) {
	lo, hi = b.Min, b.Max
	if lo == 0 {
		lo = defaultMinBackoff
		if hi > 0 {
			lo = min(lo, hi)
		}
	}
	if hi == 0 {
		hi = max(defaultMaxBackoff, lo)
	}
	if lo < 0 || hi < lo {
		return 0, 0, fmt.Errorf("lock: Backoff{Min: %v, Max: %v}: want 0 <= Min <= Max", b.Min, b.Max)
	}
	return lo, hi, nil
}

// jitter returns a uniform random duration in [0, n]. Tests replace it to
// make a run repeatable.
var jitter = func(n time.Duration) time.Duration { return rand.N(n + 1) }

// Lock takes the lock called name, waiting for it until ctx ends. It makes
// attempts as [Lock.TryLock] does, one command each, and sleeps between them
// as b says; it returns the token of the attempt that found the lock free,
// or ctx's error once ctx is done. Any other error of an attempt (Redis
// unreachable, [ErrNotPermitted]) ends the wait at once and is returned.
// TryLock itself never waits.
//
// Waiters are not queued: whoever attempts first after a release gets the
// lock, and a waiter that has waited long sleeps longer between attempts
// than one that just came, so a lock busy without pause can leave one waiter
// without it for long. Lock is for locks held briefly; BENCHMARKS.md gives
// figures of its fairness.
//
// Lock returns an error without sending anything if b is invalid: a
// negative bound, or Max below Min.
func (l Lock[N]) Lock(ctx context.Context, db DB, name N, b Backoff) (*Token, error) {
	var tok *Token
	err := wait(ctx, b, func() (bool, error) {
		var err error
		tok, err = l.TryLock(ctx, db, name)
		return tok != nil, err
	})
	if err != nil {
		return nil, err
	}
	return tok, nil
}

// wait calls try until it reports success or an error, sleeping between
// calls as b says, or until ctx ends.
func wait(ctx context.Context, b Backoff, try func() (bool, error)) error {
	lo, hi, err := b.bounds()
	if err != nil {
		return err
	}
	var timer *time.Timer
	limit := lo
	for {
		ok, err := try()
		if err != nil || ok {
			return err
		}
		d := jitter(limit)
		if timer == nil {
			timer = time.NewTimer(d)
			defer timer.Stop()
		} else {
			timer.Reset(d)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-timer.C:
		}
		if limit < hi {
			limit = min(2*limit, hi)
		}
	}
}
