package cron

import (
	"context"
	"errors"
	"log/slog"
)

// ErrShutdown is the cause of a run's context when [Runtime.Shutdown] gave
// up waiting for it: context.Cause(ctx) returns it inside the job.
var ErrShutdown = errors.New("cron: shut down")

// Shutdown stops the runtime: no tick starts a run any more, and Shutdown
// waits for the runs in progress to return. It returns nil once they have,
// and the runtime has no goroutine left.
//
// If ctx ends first, Shutdown cancels the runs' contexts with cause
// [ErrShutdown] and returns ctx.Err() without waiting further; a job that
// honours its context returns soon after. The same holds for a leased
// job's calls to Redis that Shutdown waits for (a start's announcement, a
// clock check, leaving the replica registry), which a Redis that stopped
// answering can hold up. To wait
// for those runs and calls too, call Shutdown again with a new context.
//
// Shutdown is safe to call more than once and from several goroutines; each
// call waits as described. Shutdown on a nil *Runtime returns nil.
func (r *Runtime) Shutdown(ctx context.Context) error {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	first := !r.stopped.Load()
	if first {
		r.stopped.Store(true)
		for _, it := range r.queue {
			it.e.pos = -1
		}
		clear(r.queue)
		r.queue = nil
		if r.inflight.Load() == 0 {
			r.idleOnce.Do(func() { close(r.idle) })
		}
		close(r.stop)
		r.stopRecords()
		if r.listenersRunning == 0 {
			close(r.listenersDone) // else the last to end closes it
		}
	}
	r.mu.Unlock()
	if first {
		r.rep.log.LogAttrs(ctx, slog.LevelInfo, "cron runtime shutting down", slog.Int64("runs", r.inflight.Load()))
	}

	// The scheduler only hands runs to the workers and reports skipped
	// ticks, so it returns at once: wait for it whatever ctx says. The
	// leased jobs' listeners may be stuck in a call to a Redis that
	// stopped answering, which a go-redis client without
	// ContextTimeoutEnabled does not end when its context does: ctx
	// bounds the wait for them too.
	<-r.loopDone
	if !r.listenersEnded(ctx) {
		r.cancel(ErrShutdown)
		r.rep.log.LogAttrs(ctx, slog.LevelWarn, "cron runtime gave up waiting for its calls to Redis",
			slog.Int64("runs", r.inflight.Load()))
		return ctx.Err()
	}
	select {
	case <-r.idle:
	case <-ctx.Done():
		// Runs that finished as ctx ended finished in time.
		select {
		case <-r.idle:
		default:
			r.cancel(ErrShutdown)
			r.rep.log.LogAttrs(ctx, slog.LevelWarn, "cron runtime gave up waiting for its runs; their contexts are cancelled",
				slog.Int64("runs", r.inflight.Load()))
			return ctx.Err()
		}
	}
	// The workers end as soon as they see the runtime idle.
	r.pool.wait()
	// Nothing uses the context any more; cancelling it releases it.
	r.cancel(ErrShutdown)
	r.stopLog.Do(func() { r.rep.log.LogAttrs(ctx, slog.LevelInfo, "cron runtime stopped") })
	return nil
}

// listenersEnded waits for the leased jobs' listeners to end after
// Shutdown, until ctx ends, and reports whether they did: listeners that
// end as ctx does ended in time.
func (r *Runtime) listenersEnded(ctx context.Context) bool {
	select {
	case <-r.listenersDone:
		return true
	case <-ctx.Done():
		select {
		case <-r.listenersDone:
			return true
		default:
			return false
		}
	}
}
