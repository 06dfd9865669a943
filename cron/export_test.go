package cron

import "time"

// WithClock makes the runtime read the time from now instead of time.Now,
// so a test can step the runtime's clock away from its timers, the way a
// stalled machine or a clock step does.
func WithClock(now func() time.Time) Option {
	return func(o *options) error {
		o.now = now
		return nil
	}
}
