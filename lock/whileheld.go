package lock

import (
	"context"
	"errors"
	"time"
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

// WhileHeld runs work while keeping lease held, and returns work's result.
//
// Every third of the TTL it extends the lease. It cancels work's context, with
// [ErrLeaseLost] as the cause (see [context.Cause]), as soon as the lease can
// no longer be proven held: an extension reports that it had run out, or the
// lease's deadline (see [Token.Deadline]) passes without a successful
// extension, as it does when Redis stops answering. Extensions that fail with
// an error are retried until that deadline. WhileHeld then waits for work to
// return and returns [ErrLeaseLost], joined with work's error if it had one.
//
// Work must return soon after its context is cancelled; that context is the
// only signal that the lease is gone. Its Err method reports the loss as soon
// as the deadline has passed, even before Done is closed: a process that was
// stopped past its deadline (SIGSTOP, a frozen VM, a long pause) resumes with
// all its timers due at once, and work may run before the heartbeat that
// cancels it. So work checks ctx.Err(), on the context it was given (a
// context derived from it learns of the loss only through Done), right before
// each write the lease protects. Cancelling ctx cancels work too. No
// goroutine started by WhileHeld outlives the call. WhileHeld doesn't release
// the lease; the caller still owns the token.
//
// The lease bounds how long work is protected, not what it does after: see the
// package documentation on fencing.
func WhileHeld[T any](ctx context.Context, lease Lease, work func(context.Context) (T, error)) (T, error) {
	var zero T
	if lease == nil || work == nil {
		return zero, errors.New("lock: WhileHeld needs a lease and work")
	}
	inner, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	workCtx := &leaseContext{Context: inner, lease: lease, cancel: cancel}

	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1)
	go func() {
		v, err := work(workCtx)
		done <- result{v, err}
	}()

	h := newHeartbeat(lease)
	defer h.stop()
	lost, ended := h.lost, workCtx.Done()
	for {
		select {
		case r := <-done:
			if context.Cause(workCtx) == ErrLeaseLost {
				return zero, errors.Join(ErrLeaseLost, r.err)
			}
			return r.v, r.err
		case <-lost:
			cancel(ErrLeaseLost)
			lost = nil
		case <-ended:
			// Lost, or ctx ended: no more extensions; wait for work.
			h.stop()
			ended = nil
		}
	}
}

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
	ctx    context.Context // ends the extension in flight when quit closes
	cancel context.CancelFunc
}

func newHeartbeat(l Lease) *heartbeat {
	h := &heartbeat{lost: make(chan struct{}), quit: make(chan struct{}), exited: make(chan struct{})}
	h.ctx, h.cancel = context.WithCancel(context.Background())
	go h.run(l)
	return h
}

// stop ends the heartbeat and waits for it, including an extension in flight.
// Calling it again does nothing.
func (h *heartbeat) stop() {
	select {
	case <-h.quit:
	default:
		close(h.quit)
		h.cancel()
	}
	<-h.exited
}

// answer is the outcome of one extension.
type answer struct {
	ok  bool
	err error
}

// expired reports the lease lost at its deadline, then waits for the extension
// in flight, if any, and for stop.
func (h *heartbeat) expired(inflight chan answer) {
	close(h.lost)
	if inflight != nil {
		<-inflight
	}
	<-h.quit
}

func (h *heartbeat) run(l Lease) {
	defer close(h.exited)
	ttl := l.TTL()
	period := max(ttl/3, time.Millisecond)
	deadline := l.Deadline()
	// The first extension is due a period after the lease started.
	next := deadline.Add(period - ttl)

	var inflight chan answer
	wake := time.NewTimer(time.Until(next))
	defer wake.Stop()
	expire := time.NewTimer(time.Until(deadline))
	defer expire.Stop()
	for {
		select {
		case <-h.quit:
			if inflight != nil {
				<-inflight
			}
			return
		case <-expire.C:
			h.expired(inflight)
			return
		case <-wake.C:
			if !time.Now().Before(deadline) {
				// Due together with the deadline: too late to extend.
				h.expired(inflight)
				return
			}
			inflight = make(chan answer, 1)
			ch, dl := inflight, deadline
			go func() {
				// Whether the client honours this deadline on a stalled
				// socket depends on its options, so expire watches it too.
				ectx, ecancel := context.WithDeadline(h.ctx, dl)
				defer ecancel()
				ok, err := l.Extend(ectx)
				ch <- answer{ok, err}
			}()
		case a := <-inflight:
			inflight = nil
			switch {
			case a.err == nil && !a.ok:
				close(h.lost)
				<-h.quit
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
