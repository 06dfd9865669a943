package lock_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
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
	stall  time.Duration             // if set, each extension ignores ctx, as go-redis does by default, and fails after stall

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
	if f.stall > 0 {
		time.Sleep(f.stall)
		return false, errStalled
	}
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

// errStalled is what a stalled extension fails with, as a client's read
// timeout would.
var errStalled = errors.New("i/o timeout")

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
	fl := newFakeLease(time.Second, func(int) (bool, error) { return true, nil })
	if _, err := lock.WhileHeld[int](t.Context(), fl, nil); err == nil {
		t.Error("WhileHeld(nil work) = nil error, want an error")
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

// panicValue is what work panics with in TestWhileHeldWorkPanics: a pointer,
// so that the test can tell the very value from a copy.
type panicValue struct{ msg string }

// TestWhileHeldWorkPanics checks that a panic in work stops the heartbeat
// and is raised again, with its own value, in the goroutine that called
// WhileHeld, as if work had run there: the cron runtime recovers it.
func TestWhileHeldWorkPanics(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fl := newFakeLease(3*time.Second, func(int) (bool, error) { return true, nil })
		boom := &panicValue{"boom"}
		var got any
		func() {
			defer func() { got = recover() }()
			lock.WhileHeld(t.Context(), fl, func(ctx context.Context) (int, error) {
				time.Sleep(1500 * time.Millisecond) // after the first extension
				panic(boom)
			})
		}()
		if got != boom {
			t.Errorf("recovered %#v, want work's panic value %#v", got, boom)
		}
		n := len(fl.extensions())
		time.Sleep(10 * time.Second)
		if m := len(fl.extensions()); m != n {
			t.Errorf("%d extensions after work panicked, want none", m-n)
		}
	})
}

// TestWhileHeldWorkGoexits checks that work that calls runtime.Goexit (as
// t.FailNow does) ends the caller's goroutine too, after stopping the
// heartbeat, instead of leaving WhileHeld waiting for a result.
func TestWhileHeldWorkGoexits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fl := newFakeLease(3*time.Second, func(n int) (bool, error) { return n < 3, nil })
		exited := make(chan bool)
		go func() {
			returned := false
			defer func() { exited <- returned }()
			lock.WhileHeld(t.Context(), fl, func(ctx context.Context) (int, error) {
				time.Sleep(1500 * time.Millisecond)
				runtime.Goexit()
				return 0, nil
			})
			returned = true
		}()
		if <-exited {
			t.Error("WhileHeld returned after work called runtime.Goexit, want the caller's goroutine to exit")
		}
		n := len(fl.extensions())
		time.Sleep(10 * time.Second)
		if m := len(fl.extensions()); m != n {
			t.Errorf("%d extensions after work exited, want none", m-n)
		}
	})
}

// TestWhileHeldNilLease checks that WhileHeld refuses a nil token, which is
// what an acquire of a busy lock returns, without running work.
func TestWhileHeldNilLease(t *testing.T) {
	tests := []struct {
		name  string
		lease lock.Lease
	}{
		{"nil Lease", nil},
		{"nil *Token", (*lock.Token)(nil)},
		{"nil *ReadToken", (*lock.ReadToken)(nil)},
		{"nil *fakeLease", (*fakeLease)(nil)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ran := false
				_, err := lock.WhileHeld(t.Context(), tt.lease, func(ctx context.Context) (int, error) {
					ran = true
					<-ctx.Done()
					return 0, ctx.Err()
				})
				if ran {
					t.Errorf("WhileHeld(%s) ran work", tt.name)
				}
				if !errors.Is(err, lock.ErrNilToken) {
					t.Errorf("WhileHeld(%s) = %v, want ErrNilToken", tt.name, err)
				}
			})
		})
	}
}

// TestWhileHeldStalledExtension has the first extension stall for longer
// than the lease, ignoring its context as go-redis does unless
// ContextTimeoutEnabled is set. WhileHeld must return soon after both work
// has returned and the lease's deadline has passed, not when the client
// gives up on the call.
func TestWhileHeldStalledExtension(t *testing.T) {
	const (
		ttl   = 900 * time.Millisecond
		stall = 5 * time.Second // go-redis's default ReadTimeout
		grace = 100 * time.Millisecond
	)
	tests := []struct {
		name     string
		work     func(ctx context.Context) (int, error)
		want     time.Duration // when WhileHeld must return, since start
		wantLost bool
	}{
		{
			name: "work returns before the deadline",
			work: func(ctx context.Context) (int, error) { time.Sleep(400 * time.Millisecond); return 1, nil },
			want: ttl + grace,
		},
		{
			name:     "work stops at the deadline",
			work:     func(ctx context.Context) (int, error) { <-ctx.Done(); return 0, ctx.Err() },
			want:     ttl + grace,
			wantLost: true,
		},
		{
			name:     "work returns after the deadline",
			work:     func(ctx context.Context) (int, error) { time.Sleep(2 * time.Second); return 1, nil },
			want:     2 * time.Second,
			wantLost: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				start := time.Now()
				fl := newFakeLease(ttl, nil)
				fl.stall = stall
				v, err := lock.WhileHeld(t.Context(), fl, tt.work)
				if got := time.Since(start); got != tt.want {
					t.Errorf("WhileHeld returned at %v, want %v (the extension stalls until %v)", got, tt.want, ttl/3+stall)
				}
				if lost := errors.Is(err, lock.ErrLeaseLost); lost != tt.wantLost || (!lost && (v != 1 || err != nil)) {
					t.Errorf("WhileHeld = %d, %v, want lost %v", v, err, tt.wantLost)
				}
				// The stalled call ends when the client gives up on it; the
				// bubble then checks that no goroutine is left.
				time.Sleep(stall)
			})
		})
	}
}

// TestWhileHeldOutlivesLeaseAfterCancel: the caller cancels, the heartbeat
// stops, and work goes on past the lease's deadline before it returns.
// WhileHeld must report the loss, not work's success.
func TestWhileHeldOutlivesLeaseAfterCancel(t *testing.T) {
	const ttl = 3 * time.Second // extensions every second; the one at 1s is the last
	tests := []struct {
		name     string
		returnAt time.Duration
		wantLost bool
	}{
		{"returns within the lease", 2 * time.Second, false},
		{"returns after the deadline", 5 * time.Second, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx, cancel := context.WithCancel(t.Context())
				time.AfterFunc(1500*time.Millisecond, cancel)
				fl := newFakeLease(ttl, func(int) (bool, error) { return true, nil })
				v, err := lock.WhileHeld(ctx, fl, func(context.Context) (int, error) {
					time.Sleep(tt.returnAt) // ignores the cancellation
					return 1, nil
				})
				if lost := errors.Is(err, lock.ErrLeaseLost); lost != tt.wantLost {
					t.Errorf("WhileHeld = %d, %v, want lost %v", v, err, tt.wantLost)
				}
			})
		})
	}
}

// TestWhileHeldLostError checks how the lease-lost error reads: one line
// that names the loss and work's own error, and that both satisfy
// errors.Is.
func TestWhileHeldLostError(t *testing.T) {
	errRebuild := errors.New("rebuild stopped")
	tests := []struct {
		name    string
		workErr func(ctx context.Context) error
		want    string
		is      []error
	}{
		{"nil", func(context.Context) error { return nil }, "lock: lease lost", []error{lock.ErrLeaseLost}},
		{"ctx.Err", func(ctx context.Context) error { return ctx.Err() }, "lock: lease lost: context canceled", []error{lock.ErrLeaseLost, context.Canceled}},
		{"own error", func(context.Context) error { return errRebuild }, "lock: lease lost: rebuild stopped", []error{lock.ErrLeaseLost, errRebuild}},
		{"cause", func(ctx context.Context) error { return context.Cause(ctx) }, "lock: lease lost", []error{lock.ErrLeaseLost}},
		{"wrapped cause", func(ctx context.Context) error { return fmt.Errorf("rebuild: %w", context.Cause(ctx)) }, "rebuild: lock: lease lost", []error{lock.ErrLeaseLost}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				fl := newFakeLease(3*time.Second, func(int) (bool, error) { return false, nil })
				_, err := lock.WhileHeld(t.Context(), fl, func(ctx context.Context) (int, error) {
					<-ctx.Done()
					return 0, tt.workErr(ctx)
				})
				if err == nil || err.Error() != tt.want {
					t.Errorf("WhileHeld error = %q, want %q", err, tt.want)
				}
				for _, target := range tt.is {
					if !errors.Is(err, target) {
						t.Errorf("errors.Is(%q, %v) = false, want true", err, target)
					}
				}
			})
		})
	}
}
