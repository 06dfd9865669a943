package wakuwaku

import (
	"context"

	"github.com/wakuwaku-go/wakuwaku/cron"
)

// Add starts job beside the service's cron jobs while they run, as
// [cron.Runtime.Add] does: its startup run begins at once. A job that needs
// a dependency gets it from the caller, who can look it up in the services
// that [ServiceBuilder.Start] returned. On a nil *Crons it returns an error
// wrapping [cron.ErrShutdown].
func (c *Crons) Add(job cron.Job) error {
	if c == nil {
		return cron.ErrShutdown
	}
	return c.rt.Add(job)
}

// Remove stops the cron job named name, waiting for its runs in progress
// until ctx ends, as [cron.Runtime.Remove] does. On a nil *Crons it
// returns an error wrapping [cron.ErrShutdown].
func (c *Crons) Remove(ctx context.Context, name string) error {
	if c == nil {
		return cron.ErrShutdown
	}
	return c.rt.Remove(ctx, name)
}

// Replace puts job in the place of the cron job of its name: a new
// interval, lease config or run deadline from its next tick on, as
// [cron.Runtime.Replace] does. On a nil *Crons it returns an error wrapping
// [cron.ErrShutdown].
func (c *Crons) Replace(job cron.Job) error {
	if c == nil {
		return cron.ErrShutdown
	}
	return c.rt.Replace(job)
}

// Jobs lists the service's cron jobs with when each one's next tick is
// due, as [cron.Runtime.Jobs] does; nil on a nil *Crons.
func (c *Crons) Jobs() []cron.Entry {
	if c == nil {
		return nil
	}
	return c.rt.Jobs()
}
