package cron

import (
	"context"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wakuwaku-go/wakuwaku/internal/redisscript"
)

// This file holds the clock check of a runtime with leased jobs: the
// record's times are the Redis server's, the slots' names the replica's.

// maxSkew is the clock skew above which the runtime warns: a second, or a
// twelfth of its shortest leased interval if that is shorter, the margin
// by which a duration policy's lease runs out before the next interval.
// It also returns the client of a leased job to measure it by, or false
// if the runtime has no leased job now. l.mu is held.
func (l *leasedJobs) maxSkew() (time.Duration, redisscript.Client, bool) {
	limit := time.Second
	var c redisscript.Client
	for _, e := range l.byLease {
		limit = min(limit, e.admit.state.base/12)
		if c == nil {
			c = e.admit.state.C
		}
	}
	return limit, c, c != nil
}

// watchSkew compares the runtime's clock with Redis's at start and every
// SkewCheckEvery, through a leased job's client, until Shutdown: it logs a
// warning when they disagree by more than maxSkew, and tells the observer.
func (l *leasedJobs) watchSkew(ctx context.Context) {
	defer l.workEnded()
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-timer.C:
		case <-l.stop:
			return
		}
		l.mu.Lock()
		limit, c, ok := l.maxSkew()
		l.mu.Unlock()
		if !ok {
			timer.Reset(SkewCheckEvery) // every leased job was removed
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, helloTimeout)
		skew, err := measureSkew(cctx, c, l.now)
		cancel()
		switch {
		case err != nil && ctx.Err() != nil:
			return // Shutdown ended the call
		case err != nil:
			l.rep.log.LogAttrs(ctx, slog.LevelDebug, "cron runtime could not compare its clock with Redis's", slog.Any("error", err))
		default:
			if skew > limit || skew < -limit {
				l.rep.log.LogAttrs(ctx, slog.LevelWarn, "cron runtime's clock disagrees with Redis's",
					slog.Duration("skew", skew), slog.Duration("limit", limit))
			}
			if l.rep.observer.ClockSkew != nil {
				l.rep.observer.ClockSkew(skew)
			}
		}
		timer.Reset(SkewCheckEvery)
	}
}

// measureSkew returns how far now is ahead of the server's clock: the
// server's TIME is taken as the time halfway through the round trip.
func measureSkew(ctx context.Context, c redisscript.Client, now func() time.Time) (time.Duration, error) {
	cmd := redis.NewTimeCmd(ctx, "time")
	sent := now()
	if err := redisscript.Process(ctx, c, cmd); err != nil {
		return 0, err
	}
	got := now()
	mid := sent.Add(got.Sub(sent) / 2)
	return mid.Sub(cmd.Val()), nil
}
