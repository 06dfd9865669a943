package cron

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wakuwaku-go/wakuwaku/cron/internal/record"
	"github.com/wakuwaku-go/wakuwaku/internal/redisscript"
)

// This file holds the replica registry and the owner of a Cron slot
// (PROTOCOL.md, "Owners and looks"). Every runtime with leased jobs beats
// in a sorted set per group of replicas (the runtimes that run the same
// leased jobs on one Redis), a few commands per replica per period
// whatever its number of jobs. From the live replicas it reads there, a
// replica picks the owner of each Cron slot by rendezvous hashing: the
// owner claims the slot at its tick (E1), the others only look at the
// record a grace period later (E13), without writing, and claim only if
// the owner did not.

// The bounds of a registry's beat period: a quarter of the group's
// shortest leased interval within them. A replica counts as live for
// liveBeats periods after its last beat.
const (
	minBeat   = time.Second
	maxBeat   = time.Minute
	liveBeats = 3
)

// beatTimeout bounds one beat, and the farewell at Shutdown.
const beatTimeout = 2 * time.Second

// beatPeriod is how often a replica beats in its groups: a quarter of the
// shortest interval of its leased jobs, from minBeat to maxBeat.
func (l *leasedJobs) beatPeriod() time.Duration {
	p := maxBeat
	for _, e := range l.byLease {
		p = min(p, e.admit.state.base/4)
	}
	return max(p, minBeat)
}

// groupClient is a client and the leased jobs whose records it keeps.
type groupClient struct {
	c     redisscript.Client
	names []string
	jobs  []*jobState
}

// groups returns the leased jobs by client. l.mu is held.
func (l *leasedJobs) groups() []*groupClient {
	var out []*groupClient
	byClient := make(map[any]*groupClient)
	for name, e := range l.byLease {
		s := e.admit.state
		var key any = s
		if reflect.ValueOf(s.C).Comparable() {
			key = s.C
		}
		g := byClient[key]
		if g == nil {
			g = &groupClient{c: s.C}
			byClient[key] = g
			out = append(out, g)
		}
		g.names = append(g.names, name)
		g.jobs = append(g.jobs, s)
	}
	for _, g := range out {
		slices.Sort(g.names)
	}
	return out
}

// beat keeps this replica in its groups' registries until Shutdown, every
// beatPeriod, and gives each leased job its group's live replicas; at
// Shutdown it takes the replica out of them, so that its slots' owners
// change at once.
func (l *leasedJobs) beat(ctx context.Context) {
	defer l.workEnded()
	timer := time.NewTimer(0)
	defer timer.Stop()
	mine := make(map[string]redisscript.Client) // the registries this replica is in
	views := make(map[string]*replicaGroup)     // each one's view, shared by its jobs
	failing := false                            // Redis refused the last beat: warned once
	for {
		select {
		case <-timer.C:
		case <-l.stop:
			l.farewell(mine)
			return
		}
		l.mu.Lock()
		period := l.beatPeriod()
		groups := l.groups()
		l.mu.Unlock()
		keep := make(map[string]bool, len(groups))
		for _, g := range groups {
			key := groupKey(g.names)
			keep[key] = true
			mine[key] = g.c
			cctx, cancel := context.WithTimeout(ctx, beatTimeout)
			live, err := beatOnce(cctx, g.c, key, l.replica, l.now(), period)
			cancel()
			switch {
			case err != nil && ctx.Err() != nil:
				l.farewell(mine)
				return
			case err != nil && !failing && refused(err):
				// Once: a Redis that refuses the registry's commands (an
				// ACL without them) leaves every replica claiming at each
				// tick, which works and costs more. A Redis that does not
				// answer is the claims' to report (admission failed).
				failing = true
				l.rep.log.LogAttrs(ctx, slog.LevelWarn, "cron runtime could not beat in its replica registry; it claims every slot at its tick until it can",
					slog.Any("error", err))
			case err != nil:
				l.rep.log.LogAttrs(ctx, slog.LevelDebug, "cron runtime could not beat in its replica registry", slog.Any("error", err))
			case failing:
				failing = false
				l.rep.log.LogAttrs(ctx, slog.LevelInfo, "cron runtime beats in its replica registry again")
			}
			grp := views[key]
			if grp == nil {
				grp = &replicaGroup{}
				views[key] = grp
			}
			if err == nil {
				grp.live.Store(&liveView{replicas: live, until: l.now().Add(period + period/2)})
			}
			for _, s := range g.jobs {
				if s.group.Load() != grp {
					s.group.Store(grp)
				}
			}
		}
		for key, c := range mine {
			if !keep[key] {
				delete(mine, key) // the job set changed: leave the old group
				delete(views, key)
				l.leave(ctx, c, key)
			}
		}
		timer.Reset(period)
	}
}

// beatOnce adds replica to the registry key as live for liveBeats
// periods from now, drops the replicas whose time ran out, and returns
// the live ones, sorted: one round trip on a client that pipelines.
func beatOnce(ctx context.Context, c redisscript.Client, key, replica string, now time.Time, period time.Duration) ([]string, error) {
	ms := now.UnixMilli()
	until := ms + (liveBeats * period).Milliseconds()
	cmds := []redis.Cmder{
		redis.NewIntCmd(ctx, "zadd", key, until, replica),
		redis.NewIntCmd(ctx, "zremrangebyscore", key, "-inf", "("+strconv.FormatInt(ms, 10)),
		redis.NewBoolCmd(ctx, "pexpire", key, (2 * liveBeats * period).Milliseconds()),
	}
	live := redis.NewStringSliceCmd(ctx, "zrange", key, ms, "+inf", "byscore")
	cmds = append(cmds, live)
	if err := record.Pipelined(ctx, c, cmds); err != nil {
		return nil, err
	}
	out := live.Val()
	slices.Sort(out)
	return out, nil
}

// farewell takes this replica out of its registries at Shutdown, bounded
// by beatTimeout and by Shutdown's ctx: once Shutdown gave up waiting, the
// runtime's context ends, and nothing is sent after.
func (l *leasedJobs) farewell(mine map[string]redisscript.Client) {
	ctx, cancel := context.WithTimeout(l.rctx, beatTimeout)
	defer cancel()
	for key, c := range mine {
		l.leave(ctx, c, key)
	}
}

// leave takes this replica out of registry key.
func (l *leasedJobs) leave(ctx context.Context, c redisscript.Client, key string) {
	if err := redisscript.Process(ctx, c, redis.NewIntCmd(ctx, "zrem", key, l.replica)); err != nil {
		l.rep.log.LogAttrs(ctx, slog.LevelDebug, "cron runtime could not leave its replica registry", slog.Any("error", err))
	}
}

// lookFirst is E13 for the tick a that this replica does not own: it
// waits lookGrace after the tick, then reads whether the slot's owner
// claimed it. It returns the look's answer, or claim true if the replica
// must claim the slot itself (PROTOCOL.md, E13), or ok false if Shutdown
// came first.
func (l *leasedJobs) lookFirst(ctx context.Context, a *runArgs, s *jobState) (c claimed, claim, ok bool, err error) {
	timer := time.NewTimer(lookGrace(s.base))
	select {
	case <-timer.C:
	case <-l.stop:
		timer.Stop()
		return claimed{}, false, false, nil
	case <-ctx.Done():
		timer.Stop()
		return claimed{}, false, false, nil
	}
	c, claim, err = s.look(ctx, &a.tick)
	return c, claim, true, err
}

// look reads whether Cron slot t.Slot was claimed, for E13: with one
// attempt a slot, its id, the pause and the slot recorded skipped; with
// more, also its state and the slot of the run in progress, and when that
// run's lease ends. It writes nothing. claim is true when the owner did
// not claim it (it is not the record's slot, nor recorded skipped) or when
// it waits for another attempt: the claim script then decides, as for any
// tick (with a pause, R3 records the slot skipped if the owner did not).
func (s *jobState) look(ctx context.Context, t *Tick) (c claimed, claim bool, err error) {
	slot, _ := t.Slot.Key()
	v, err := s.Look(ctx)
	if err != nil {
		return claimed{}, false, fmt.Errorf("cron: looking at the record of %q: %w", s.Name, err)
	}
	// The run's parts read here are the same in the previous release's
	// layout, without beat.
	rec, run := v.Slot, v.Run
	c.slot = slot
	skipAt, perr := strconv.ParseInt(v.Skip.At, 10, 64)
	switch {
	case rec.ID != slot && perr == nil && skipAt == t.Slot.Start.UnixMilli():
		c.reason = ReasonSkippedElsewhere // L0, R20
	case rec.ID != slot && perr == nil && skipAt > t.Slot.Start.UnixMilli():
		c.reason = ReasonLeaseHeld // L0: past, as R7
	case rec.ID != slot:
		// L1, L2: the owner did not claim it, nor record it skipped
		// (with a pause): take over (E1).
		return c, true, nil
	case s.Attempts == 1:
		c.reason = ReasonLeaseHeld // R7, or R1 with one attempt
	case run.Slot == slot:
		// R1: its run goes on; with attempts left, look again when its
		// lease ends (E3), in case it fails.
		until, _ := strconv.ParseInt(run.Until, 10, 64)
		c.reason, c.follow = ReasonRunning, true
		c.wait = max(time.Until(time.UnixMilli(until)), time.Millisecond)
	case rec.State == "open":
		return c, true, nil // R5 or R6: the claim script says which
	case rec.State == "failed":
		c.reason = ReasonAttemptsUsedUp // R8
	default:
		c.reason = ReasonLeaseHeld // R7
	}
	return c, false, nil
}

// refused reports whether err is Redis's own answer (an error reply, such
// as NOPERM), not a failure to reach it.
func refused(err error) bool {
	var rerr redis.Error
	return errors.As(err, &rerr)
}
