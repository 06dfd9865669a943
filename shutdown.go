package wakuwaku

import (
	"context"

	"github.com/wakuwaku-go/wakuwaku/cron"
)

// Crons is the handle of a service's running cron jobs, which
// ServiceBuilder.Start returns: jobs can be added, removed and replaced
// while they run ([Crons.Add], [Crons.Remove], [Crons.Replace],
// [Crons.Jobs]), and it must be shut down gracefully ([Crons.Shutdown]). A
// nil *Crons has no jobs; its Shutdown returns nil. Its methods are safe
// for concurrent use.
type Crons struct {
	rt *cron.Runtime
}

// newCrons wraps the runtime that runs a service's cron jobs.
func newCrons(rt *cron.Runtime) *Crons {
	return &Crons{rt: rt}
}

// Shutdown stops the cron jobs: no further run starts, and Shutdown waits
// for the runs in progress to return, then returns nil with no goroutine of
// the jobs' runtime left.
//
// If ctx ends first, Shutdown cancels the runs' contexts, with cause
// [cron.ErrShutdown] (see context.Cause), and returns ctx.Err(). Calling it
// again, with a new context, waits for the cancelled runs to return.
// Shutdown is safe to call more than once and from several goroutines.
func (c *Crons) Shutdown(ctx context.Context) error {
	if c == nil {
		return nil
	}
	return c.rt.Shutdown(ctx)
}
