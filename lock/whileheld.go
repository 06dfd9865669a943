package lock

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"time"

	"github.com/wakuwaku-go/wakuwaku/internal/typednil"
)

// ErrLeaseLost is the cause with which [WhileHeld] cancels its work's context,
// and the error it returns, when the lease could no longer be proven held.
var ErrLeaseLost = errors.New("lock: lease lost")

// Lease is what [WhileHeld] needs of a token: *[Token] and *[ReadToken]
// implement it.
type Lease interface {
	// Extend restarts the lease for another TTL, reporting false if it had
	// already run out.
	Extend(ctx context.Context) (bool, error)
	// TTL is the length of the lease.
	TTL() time.Duration
	// Deadline is the monotonic time until which the lease is surely held.
	Deadline() time.Time
}

// abandonGrace is how long past its deadline WhileHeld waits for an
// extension in flight. Each extension's context ends at the lease's
// deadline, so a client that honours context deadlines returns by then; one
// that doesn't, as go-redis by default, is left to finish on its own.
const abandonGrace = 100 * time.Millisecond

// WhileHeld runs work while keeping lease held, and returns work's result.
//
// Every third of the TTL it extends the lease. It cancels work's context, with
// [ErrLeaseLost] as the cause (see [context.Cause]), as soon as the lease can
// no longer be proven held: an extension reports that it had run out, or the
// lease's deadline (see [Token.Deadline]) passes without a successful
// extension, as it does when Redis stops answering. Extensions that fail with
// an error are retried until that deadline. Cancelling ctx cancels work too,
// and stops the extensions.
//
// WhileHeld returns an error that satisfies errors.Is with [ErrLeaseLost]
// when the lease was lost while work ran, or when work returned after the
// lease's deadline (say, after ctx was cancelled, which stops the
// extensions). The error reads "lock: lease lost: " followed by work's error,
// and satisfies errors.Is with that error too; it is work's error itself if
// that already wraps ErrLeaseLost, and ErrLeaseLost if work returned none.
//
// Work must return soon after its context is cancelled; that context is the
// only signal that the lease is gone. Its Err method reports the loss as soon
// as the deadline has passed, even before Done is closed: a process that was
// stopped past its deadline (SIGSTOP, a frozen VM, a long pause) resumes with
// all its timers due at once, and work may run before the heartbeat that
// cancels it. So work checks ctx.Err(), on the context it was given (a
// context derived from it learns of the loss only through Done), right before
// each write the lease protects. WhileHeld doesn't release the lease; the
// caller still owns the token.
//
// A panic in work stops the extensions and is raised again, with the same
// value, in the goroutine that called WhileHeld, as if work had run there:
// a recover in the caller (the cron runtime's, for a job) catches it. The
// stack it prints is the caller's. Likewise, work that calls
// [runtime.Goexit] (as t.FailNow does) ends the caller's goroutine.
//
// When work returns while an extension is in flight, WhileHeld waits for
// that extension, but not much past the lease's deadline, which is also the
// deadline of the extension's context. So it returns soon after both work has
// returned and the deadline has passed, whatever Redis does. A client that
// honours context deadlines (go-redis with ContextTimeoutEnabled) has ended
// the call by then, and no goroutine started by WhileHeld outlives it. One
// that doesn't (go-redis by default) can't be made to give up on a
// connection that stopped answering, so the goroutine making that one call
// is left to end when the client does, after its own read timeout; it holds
// nothing of WhileHeld's.
//
// WhileHeld returns [ErrNilToken] without running work if lease is nil or
// holds a nil pointer, such as the nil token of a busy lock.
//
// The lease bounds how long work is protected, not what it does after: see
// the package documentation on what a lease can't guarantee.
func WhileHeld[T any](ctx context.Context, lease Lease, work func(context.Context) (T, error)) (T, error) {
	var zero T
	if typednil.Is(lease) { // its methods would prove nothing held
		return zero, ErrNilToken
	}
	if work == nil {
		return zero, errors.New("lock: WhileHeld needs work")
	}
	inner, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	workCtx := &leaseContext{Context: inner, lease: lease, cancel: cancel}

	done := make(chan outcome[T], 1)
	go runWork(workCtx, lease, work, done)

	h := newHeartbeat(lease)
	lost, ended := h.lost, workCtx.Done()
	for {
		select {
		case r := <-done:
			// Whether the lease was lost is judged as of work's return, on
			// inner: workCtx's Err would judge it as of now, after stop.
			lost := r.late || context.Cause(inner) == ErrLeaseLost
			h.stop()
			switch {
			case r.goexit:
				runtime.Goexit()
			case r.panicked:
				panic(r.panic)
			case lost:
				return zero, leaseLost(r.err)
			}
			return r.v, r.err
		case <-lost:
			cancel(ErrLeaseLost)
			lost = nil
		case <-ended:
			// Lost, or ctx ended: no more extensions; wait for work.
			h.signal()
			ended = nil
		}
	}
}

// outcome is how work ended: it returned v and err, late if the lease's
// deadline had passed by then, or it panicked, or it called runtime.Goexit.
type outcome[T any] struct {
	v        T
	err      error
	late     bool
	panicked bool
	panic    any
	goexit   bool
}

// runWork runs work and sends how it ended. A panic is recovered here, so
// that WhileHeld can raise it again in its caller's goroutine.
func runWork[T any](ctx context.Context, lease Lease, work func(context.Context) (T, error), done chan<- outcome[T]) {
	returned := false
	defer func() {
		if !returned {
			// Since Go 1.21 recover returns nil only for runtime.Goexit:
			// panic(nil) recovers as a *runtime.PanicNilError.
			p := recover()
			done <- outcome[T]{panicked: p != nil, panic: p, goexit: p == nil}
		}
	}()
	v, err := work(ctx)
	returned = true
	done <- outcome[T]{v: v, err: err, late: !time.Now().Before(lease.Deadline())}
}

// leaseLost returns WhileHeld's error for a lost lease, given work's error.
func leaseLost(err error) error {
	switch {
	case err == nil:
		return ErrLeaseLost
	case errors.Is(err, ErrLeaseLost):
		return err
	}
	return &lostError{err}
}

// lostError is a lost lease together with work's own error: one line that
// names both, and errors.Is finds both.
type lostError struct{ err error }

func (e *lostError) Error() string   { return ErrLeaseLost.Error() + ": " + e.err.Error() }
func (e *lostError) Unwrap() []error { return []error{ErrLeaseLost, e.err} }

// leaseContext is work's context: a cancelable context whose Err also looks
// at the lease's deadline, and cancels the context with ErrLeaseLost once it
// has passed. The heartbeat cancels it too, but only once it runs: after a
// process stop, work woken by its own timer or by the network may run first.
// Done, Value and Cause are the inner context's, so contexts derived from it
// are cancelled with it.
type leaseContext struct {
	context.Context
	lease  Lease
	cancel context.CancelCauseFunc
}

func (c *leaseContext) Err() error {
	if err := c.Context.Err(); err != nil {
		return err
	}
	if !time.Now().Before(c.lease.Deadline()) {
		c.cancel(ErrLeaseLost)
		return c.Context.Err()
	}
	return nil
}

// heartbeat extends a lease every third of its TTL in a goroutine of its own,
// and closes lost when the lease can no longer be proven held.
type heartbeat struct {
	lost   chan struct{}
	quit   chan struct{}
	exited chan struct{}
	once   sync.Once
	ctx    context.Context // ends the extension in flight when quit closes
	cancel context.CancelFunc
}

func newHeartbeat(l Lease) *heartbeat {
	h := &heartbeat{lost: make(chan struct{}), quit: make(chan struct{}), exited: make(chan struct{})}
	h.ctx, h.cancel = context.WithCancel(context.Background())
	go h.run(l)
	return h
}

// signal tells the heartbeat to stop, without waiting. Calling it again does
// nothing.
func (h *heartbeat) signal() {
	h.once.Do(func() {
		close(h.quit)
		h.cancel()
	})
}

// stop ends the heartbeat and waits for it, and for an extension in flight
// up to a little past that extension's deadline (see abandonGrace).
func (h *heartbeat) stop() {
	h.signal()
	<-h.exited
}

// answer is the outcome of one extension.
type answer struct {
	ok  bool
	err error
}

func (h *heartbeat) run(l Lease) {
	defer close(h.exited)
	ttl := l.TTL()
	period := max(ttl/3, time.Millisecond)
	deadline := l.Deadline()
	// The first extension is due a period after the lease started.
	next := deadline.Add(period - ttl)

	var inflight chan answer
	var inflightEnd time.Time // the deadline of the extension in flight
	defer func() { await(inflight, inflightEnd) }()
	wake := time.NewTimer(time.Until(next))
	defer wake.Stop()
	expire := time.NewTimer(time.Until(deadline))
	defer expire.Stop()
	for {
		select {
		case <-h.quit:
			return
		case <-expire.C:
			close(h.lost)
			return
		case <-wake.C:
			if !time.Now().Before(deadline) {
				// Due together with the deadline: too late to extend.
				close(h.lost)
				return
			}
			inflight, inflightEnd = make(chan answer, 1), deadline
			go h.extend(l, deadline, inflight)
		case a := <-inflight:
			inflight = nil
			switch {
			case a.err == nil && !a.ok:
				close(h.lost)
				return
			case a.err == nil:
				deadline = l.Deadline()
				next = deadline.Add(period - ttl)
				expire.Reset(time.Until(deadline))
			default:
				// Redis may be back soon: try again, more often than
				// every period, until the deadline says otherwise.
				next = time.Now().Add(max(period/4, time.Millisecond))
			}
			wake.Reset(time.Until(next))
		}
	}
}

// extend makes one extension, with a context that ends at the lease's
// deadline, and sends its answer on ch, which has room for it. Whether the
// client honours that deadline on a stalled connection depends on its
// options, so the heartbeat's own timer watches the deadline too.
func (h *heartbeat) extend(l Lease, deadline time.Time, ch chan<- answer) {
	ctx, cancel := context.WithDeadline(h.ctx, deadline)
	defer cancel()
	ok, err := l.Extend(ctx)
	ch <- answer{ok, err}
}

// await waits for the extension in flight, if any, until a little past its
// deadline. A client that honours its context has answered by then; one
// that doesn't is not waited for, as nothing could make it answer sooner.
func await(inflight <-chan answer, deadline time.Time) {
	if inflight == nil {
		return
	}
	t := time.NewTimer(time.Until(deadline.Add(abandonGrace)))
	defer t.Stop()
	select {
	case <-inflight:
	case <-t.C:
	}
}
