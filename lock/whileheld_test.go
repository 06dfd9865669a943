package lock_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/wakuwaku-go/wakuwaku/lock"
)

// fakeLease is a lease whose extensions answer what the test says, on the
// bubble's fake clock.
type fakeLease struct {
	ttl    time.Duration
	answer func(n int) (bool, error) // called for the nth extension, from 1; nil blocks until ctx ends

	mu       sync.Mutex
	n        int
	at       []time.Duration // when each extension was sent, since start
	start    time.Time
	deadline time.Time
}

func newFakeLease(ttl time.Duration, answer func(int) (bool, error)) *fakeLease {
	now := time.Now()
	return &fakeLease{ttl: ttl, answer: answer, start: now, deadline: now.Add(ttl)}
}

func (f *fakeLease) TTL() time.Duration { return f.ttl }

func (f *fakeLease) Deadline() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.deadline
}

func (f *fakeLease) Extend(ctx context.Context) (bool, error) {
	sent := time.Now()
	f.mu.Lock()
	f.n++
	n := f.n
	f.at = append(f.at, sent.Sub(f.start))
	f.mu.Unlock()
	if f.answer == nil {
		<-ctx.Done()
		return false, ctx.Err()
	}
	ok, err := f.answer(n)
	if ok && err == nil {
		f.mu.Lock()
		f.deadline = sent.Add(f.ttl)
		f.mu.Unlock()
	}
	return ok, err
}

func (f *fakeLease) extensions() []time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]time.Duration(nil), f.at...)
}

// waitCancelled is work that records when its context ended and why.
func waitCancelled(start time.Time, when *time.Duration, cause *error) func(context.Context) (int, error) {
	return func(ctx context.Context) (int, error) {
		<-ctx.Done()
		*when = time.Since(start)
		*cause = context.Cause(ctx)
		return 0, ctx.Err()
	}
}

func TestWhileHeldTiming(t *testing.T) {
	const ttl = 3 * time.Second
	errDown := errors.New("redis down")
	tests := []struct {
		name       string
		answer     func(n int) (bool, error)
		wantCancel time.Duration // when work's context must end, since start
		wantExt    []time.Duration
	}{
		{
			name:       "extension reports the lease lost",
			answer:     func(n int) (bool, error) { return n < 3, nil },
			wantCancel: 3 * time.Second,
			wantExt:    []time.Duration{1 * time.Second, 2 * time.Second, 3 * time.Second},
		},
		{
			name:       "redis stops answering",
			answer:     nil,
			wantCancel: ttl, // the first extension hangs until the deadline
			wantExt:    []time.Duration{1 * time.Second},
		},
		{
			name:       "extensions fail until the deadline",
			answer:     func(n int) (bool, error) { return n < 2, errorIf(n >= 2, errDown) },
			wantCancel: 4 * time.Second, // last success sent at 1s, plus ttl
			// After a failure it retries every period/4 = 250ms.
			wantExt: msDurations(1000, 2000, 2250, 2500, 2750, 3000, 3250, 3500, 3750),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				start := time.Now()
				fl := newFakeLease(ttl, tt.answer)
				var when time.Duration
				var cause error
				_, err := lock.WhileHeld(t.Context(), fl, waitCancelled(start, &when, &cause))
				if !errors.Is(err, lock.ErrLeaseLost) {
					t.Errorf("WhileHeld = %v, want ErrLeaseLost", err)
				}
				if !errors.Is(cause, lock.ErrLeaseLost) {
					t.Errorf("work's cause = %v, want ErrLeaseLost", cause)
				}
				if when != tt.wantCancel {
					t.Errorf("work cancelled at %v, want %v", when, tt.wantCancel)
				}
				if got := fl.extensions(); !slices.Equal(got, tt.wantExt) {
					t.Errorf("extensions sent at %v, want %v", got, tt.wantExt)
				}
			})
		})
	}
}

func errorIf(cond bool, err error) error {
	if cond {
		return err
	}
	return nil
}

func msDurations(ms ...int) []time.Duration {
	d := make([]time.Duration, len(ms))
	for i, m := range ms {
		d[i] = time.Duration(m) * time.Millisecond
	}
	return d
}

func TestWhileHeldKeepsLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const ttl = 3 * time.Second
		// The third extension fails once; the lease is still proven by the
		// second, so work goes on.
		fl := newFakeLease(ttl, func(n int) (bool, error) { return n != 3, errorIf(n == 3, errors.New("blip")) })
		got, err := lock.WhileHeld(t.Context(), fl, func(ctx context.Context) (string, error) {
			select {
			case <-time.After(10 * ttl):
				return "done", nil
			case <-ctx.Done():
				return "", context.Cause(ctx)
			}
		})
		if got != "done" || err != nil {
			t.Fatalf("WhileHeld = %q, %v, want done, nil", got, err)
		}
		if n := len(fl.extensions()); n < 29 {
			t.Errorf("%d extensions in 10 TTLs, want about 30", n)
		}
	})
}

func TestWhileHeldParentCancelled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		fl := newFakeLease(3*time.Second, func(int) (bool, error) { return true, nil })
		time.AfterFunc(5*time.Second, cancel)
		_, err := lock.WhileHeld(ctx, fl, func(ctx context.Context) (int, error) {
			<-ctx.Done()
			return 0, ctx.Err()
		})
		if !errors.Is(err, context.Canceled) || errors.Is(err, lock.ErrLeaseLost) {
			t.Errorf("WhileHeld = %v, want context.Canceled only", err)
		}
	})
}

func TestWhileHeldWorkErrorAndValue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		boom := errors.New("boom")
		fl := newFakeLease(time.Second, func(int) (bool, error) { return true, nil })
		v, err := lock.WhileHeld(t.Context(), fl, func(context.Context) (int, error) { return 7, boom })
		if v != 7 || !errors.Is(err, boom) {
			t.Errorf("WhileHeld = %d, %v, want 7, boom", v, err)
		}
	})
}

func TestWhileHeldBadInput(t *testing.T) {
	if _, err := lock.WhileHeld[int](t.Context(), nil, func(context.Context) (int, error) { return 0, nil }); err == nil {
		t.Error("WhileHeld(nil lease) = nil error, want an error")
	}
	var tok *lock.Token
	if _, err := lock.WhileHeld(t.Context(), tok, func(ctx context.Context) (int, error) { <-ctx.Done(); return 0, nil }); !errors.Is(err, lock.ErrLeaseLost) {
		t.Errorf("WhileHeld(nil *Token) = %v, want ErrLeaseLost", err)
	}
}

// TestWhileHeldErrAtDeadline: once the lease's deadline has passed, the
// work's ctx.Err reports the loss at once, before the heartbeat has run. A
// process stopped past its deadline resumes with every timer due, and its
// work may run first; here the deadline moves into the past behind the
// heartbeat's back instead, which is what the work sees in both cases.
func TestWhileHeldErrAtDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fl := newFakeLease(3*time.Second, func(int) (bool, error) { return true, nil })
		_, err := lock.WhileHeld(t.Context(), fl, func(ctx context.Context) (int, error) {
			time.Sleep(time.Second)
			fl.mu.Lock()
			fl.deadline = time.Now()
			fl.mu.Unlock()
			if err := ctx.Err(); err == nil {
				t.Error("ctx.Err() = nil once the lease's deadline passed, want an error")
			}
			if c := context.Cause(ctx); c != lock.ErrLeaseLost {
				t.Errorf("context.Cause(ctx) = %v, want ErrLeaseLost", c)
			}
			return 0, nil
		})
		if !errors.Is(err, lock.ErrLeaseLost) {
			t.Errorf("WhileHeld = %v, want ErrLeaseLost", err)
		}
	})
}
