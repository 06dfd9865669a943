package cron

import (
	"context"
	"errors"
	"log/slog"
	"reflect"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wakuwaku-go/wakuwaku/internal/redisscript"
	"github.com/wakuwaku-go/wakuwaku/interval"
)

// This file holds the runs of leased jobs that no tick of their schedule
// starts: another attempt at an open slot, the catch-up at start, and the
// runs that operators request, which come over Pub/Sub.

// followUp schedules another look at a slot that a claim refused because a
// run was in progress or its back-off had not passed, for a job whose slots
// get several attempts: that run may fail or die, and the slot stays open.
func (r *Runtime) followUp(ctx context.Context, e *entry, t *Tick, c claimed) {
	s := e.admit.state
	if s.attempts < 2 || c.wait <= 0 || (c.reason != ReasonRunning && c.reason != ReasonRetryWait) {
		return
	}
	if !r.now().Add(c.wait).Before(t.Slot.End) {
		return // past the slot: its next tick has it
	}
	r.scheduleRetry(ctx, e, t.Slot, c.wait+time.Millisecond)
}

// scheduleRetry makes this replica try e's slot again in d, unless it has
// an earlier try planned already.
func (r *Runtime) scheduleRetry(ctx context.Context, e *entry, slot interval.Slot, d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped.Load() {
		return
	}
	s := e.admit.state
	at := time.Now().Add(d)
	if s.retry != nil && !s.retryAt.After(at) {
		return
	}
	if s.retry != nil {
		s.retry.Stop()
	}
	var timer *time.Timer
	timer = time.AfterFunc(d, func() {
		r.mu.Lock()
		current := s.retry == timer
		if current {
			s.retry = nil
		}
		r.mu.Unlock()
		if current {
			r.extra(ctx, e, modeTick, slot)
		}
	})
	s.retry, s.retryAt = timer, at
}

// extra starts a run of e that no tick of its schedule started, for slot
// (the zero Slot: the one that starts now, as the replica's clock says).
func (r *Runtime) extra(ctx context.Context, e *entry, mode claimMode, slot interval.Slot) {
	r.mu.Lock()
	if r.stopped.Load() {
		r.mu.Unlock()
		return
	}
	now := r.now()
	if slot.IsZero() {
		slot = e.every.Plan(now, now).Slot
	}
	scheduled := now
	if _, shared := slot.Key(); shared {
		scheduled = slot.Start
	}
	e.ticks++
	a := getRun()
	a.e, a.extra, a.mode = e, true, mode
	a.tick = Tick{Scheduled: scheduled, Slot: slot, Started: now, Job: e.name, Run: e.ticks, Attempt: 1}
	if e.admit.queued {
		a.next = time.Unix(0, e.admit.due)
	}
	r.inflight.Add(1)
	r.mu.Unlock()
	r.alone(ctx, a)
}

// finishedExtra records the end of a run that extra started.
func (r *Runtime) finishedExtra() {
	if r.inflight.Add(-1) == 0 && r.stopped.Load() {
		r.idleOnce.Do(func() { close(r.idle) })
	}
}

// helloTimeout bounds the start's announcement of a job to Redis.
const helloTimeout = 5 * time.Second

// startRecords begins the leased jobs' work beside their schedules, at the
// runtime's start at now: the catch-up runs, an announcement of each job
// whose first tick is still to come (so that operators see it), and a
// listener for run-now requests per Redis client.
func (r *Runtime) startRecords(ctx context.Context, now time.Time) {
	// The listeners' own calls end at Shutdown; the runs they start get
	// the runs' context.
	lctx, cancel := context.WithCancel(ctx)
	r.endListens = cancel
	r.listeners.Add(1)
	go func() {
		defer r.listeners.Done()
		for _, e := range r.leased {
			if r.stopped.Load() {
				return
			}
			first, _ := e.every.First(now)
			if first.Equal(now) {
				continue // its startup run claims it
			}
			if slot, ok := r.catchUpSlot(e, now); ok {
				r.extra(ctx, e, modeCatchUp, slot)
				continue
			}
			r.hello(ctx, lctx, e)
		}
	}()

	// One listener per client, for the jobs whose records it keeps.
	type group struct {
		sub   subscriber
		names map[string]*entry
	}
	var groups []*group
	byClient := make(map[any]*group)
	for _, e := range r.leased {
		s := e.admit.state
		sub, ok := s.c.(subscriber)
		if !ok {
			continue // requests wait for the job's next tick
		}
		var g *group
		if reflect.TypeOf(s.c).Comparable() {
			g = byClient[s.c]
		}
		if g == nil {
			g = &group{sub: sub, names: make(map[string]*entry)}
			groups = append(groups, g)
			if reflect.TypeOf(s.c).Comparable() {
				byClient[s.c] = g
			}
		}
		g.names[s.name] = e
	}
	for _, g := range groups {
		r.listeners.Add(1)
		go r.listen(ctx, lctx, g.sub, g.names)
	}
	r.listeners.Add(1)
	go r.watchSkew(lctx)
}

// maxSkew is the clock skew above which the runtime warns: a second, or a
// twelfth of its shortest leased interval if that is shorter, the margin
// by which a duration policy's lease runs out before the next interval.
func (r *Runtime) maxSkew() time.Duration {
	limit := time.Second
	for _, e := range r.leased {
		limit = min(limit, e.admit.state.base/12)
	}
	return limit
}

// watchSkew compares the runtime's clock with Redis's at start and every
// SkewCheckEvery, through the first leased job's client, until Shutdown:
// it logs a warning when they disagree by more than maxSkew, and tells the
// observer.
func (r *Runtime) watchSkew(ctx context.Context) {
	defer r.listeners.Done()
	c := r.leased[0].admit.state.c
	limit := r.maxSkew()
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-timer.C:
		case <-r.stop:
			return
		}
		cctx, cancel := context.WithTimeout(ctx, helloTimeout)
		skew, err := measureSkew(cctx, c, r.now)
		cancel()
		switch {
		case err != nil && ctx.Err() != nil:
			return // Shutdown ended the call
		case err != nil:
			r.log.LogAttrs(ctx, slog.LevelDebug, "cron runtime could not compare its clock with Redis's", slog.Any("error", err))
		default:
			if skew > limit || skew < -limit {
				r.log.LogAttrs(ctx, slog.LevelWarn, "cron runtime's clock disagrees with Redis's",
					slog.Duration("skew", skew), slog.Duration("limit", limit))
			}
			if r.observer.ClockSkew != nil {
				r.observer.ClockSkew(skew)
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

// catchUpSlot returns the slot that e's catch-up at a start at now is
// for, if e catches up: for a Cron spec the latest slot that began within
// its window, for a duration policy the zero Slot (the one that starts
// now; the record says whether the last interval ran).
func (r *Runtime) catchUpSlot(e *entry, now time.Time) (interval.Slot, bool) {
	s := e.admit.state
	switch {
	case s.catchUp <= 0:
		return interval.Slot{}, false
	case !s.shared:
		return interval.Slot{}, true
	}
	return e.every.LatestSlot(now.Add(-s.catchUp), now)
}

// hello announces e to its record: the replica and its next tick.
func (r *Runtime) hello(ctx, lctx context.Context, e *entry) {
	r.mu.Lock()
	var next time.Time // none, for a job with no tick to come
	if e.admit.due != 0 {
		next = time.Unix(0, e.admit.due)
	}
	t := Tick{Job: e.name, Scheduled: next, Slot: e.every.Plan(next, next).Slot}
	r.mu.Unlock()
	hctx, cancel := context.WithTimeout(lctx, helloTimeout)
	defer cancel()
	if _, err := e.admit.state.claim(hctx, modeHello, &t, next); err != nil && lctx.Err() == nil {
		r.log.LogAttrs(ctx, slog.LevelDebug, "cron job's record could not be announced",
			slog.String("job", e.name), slog.Any("error", err))
	}
}

// subscriber is a client that can subscribe to Pub/Sub channels: every
// go-redis client can.
type subscriber interface {
	Subscribe(ctx context.Context, channels ...string) *redis.PubSub
}

// requestRetry is how long a listener waits after its subscription failed
// (Redis down) before it tries again. A subscription the server refused
// (the client's ACL user lacks the channel) is asked for again after
// requestRetry, then twice as long each time, up to refusedRetryMax.
const (
	requestRetry    = time.Second
	refusedRetryMax = time.Minute
)

// listen runs the run-now requests for the jobs named in names that come
// over sub's Pub/Sub channel, until Shutdown closes the subscription.
//
// A subscription the server refuses, with an error reply such as NOPERM
// for an ACL user without the channel, would leave the replica deaf to
// requests: the first refusal is logged at Error, the subscription asked
// for again with back-off, and the recovery logged once it is granted.
func (r *Runtime) listen(ctx, lctx context.Context, sub subscriber, names map[string]*entry) {
	defer r.listeners.Done()
	ps := sub.Subscribe(lctx, runNowChannel)
	r.mu.Lock()
	stopped := r.stopped.Load()
	if !stopped {
		r.subs = append(r.subs, ps)
	}
	r.mu.Unlock()
	if stopped {
		_ = ps.Close()
		return
	}
	refused, backoff := false, requestRetry
	for {
		v, err := ps.Receive(lctx)
		if r.stopped.Load() {
			return
		}
		switch v := v.(type) {
		case *redis.Subscription:
			if refused && v.Kind == "subscribe" {
				refused, backoff = false, requestRetry
				r.log.LogAttrs(ctx, slog.LevelInfo, "cron runtime hears run-now requests again",
					slog.String("channel", runNowChannel))
			}
			continue
		case *redis.Message:
			if e := names[v.Payload]; e != nil {
				r.extra(ctx, e, modeRequest, interval.Slot{})
			}
			continue
		case *redis.Pong:
			continue
		}
		if err == nil {
			continue // a kind of message the runtime does not use
		}
		var reply redis.Error
		wait := requestRetry
		if errors.As(err, &reply) {
			if !refused {
				refused = true
				r.log.LogAttrs(ctx, slog.LevelError, "cron runtime can't hear run-now requests: Redis refused its subscription; a requested run waits for its job's next tick",
					slog.String("channel", runNowChannel), slog.Any("error", err))
			}
			wait, backoff = backoff, min(2*backoff, refusedRetryMax)
		}
		timer := time.NewTimer(wait)
		select {
		case <-timer.C:
		case <-r.stop:
			timer.Stop()
			return
		}
		if reply != nil {
			// The refused subscription is not retried by the client, as a
			// lost connection is: ask again.
			_ = ps.Subscribe(lctx, runNowChannel)
		}
	}
}

// stopRecords stops the leased jobs' retry timers and run-now listeners.
// r.mu is held; Shutdown waits for the listeners after releasing it.
func (r *Runtime) stopRecords() {
	if r.endListens != nil {
		r.endListens()
	}
	for _, e := range r.leased {
		if s := e.admit.state; s.retry != nil {
			s.retry.Stop()
			s.retry = nil
		}
	}
	for _, c := range r.subs {
		_ = c.Close()
	}
	r.subs = nil
}
