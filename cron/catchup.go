package cron

import (
	"context"
	"log/slog"
	"reflect"
	"time"

	"github.com/wakuwaku-go/wakuwaku/interval"
)

// This file holds what a runtime with leased jobs does at its start and
// stop beside the schedules: E4 of PROTOCOL.md, the catch-up of a slot
// every replica missed, E6, the announcement of a job whose first tick is
// to come, and the run-now listeners and retry timers it starts and stops.

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
				r.offSchedule(ctx, e, modeCatchUp, slot, "")
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
	if _, err := e.admit.state.claim(hctx, modeHello, &t, next, ""); err != nil && lctx.Err() == nil {
		r.log.LogAttrs(ctx, slog.LevelDebug, "cron job's record could not be announced",
			slog.String("job", e.name), slog.Any("error", err))
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
