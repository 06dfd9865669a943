package cron

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wakuwaku-go/wakuwaku/cron/internal/record"
	"github.com/wakuwaku-go/wakuwaku/interval"
)

// This file holds what comes and goes on the run-now channel: E5 of
// PROTOCOL.md, the run-now requests, which come over Pub/Sub (R16), and
// E14, the follow notices.

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

// listen runs the run-now requests for the leased jobs that come over
// sub's Pub/Sub channel, until Shutdown closes the subscription. A request
// names a job by its lease; one for a job this runtime does not have, or
// whose record is another client's, is nothing to it (its claim would find
// no request waiting).
//
// A subscription the server refuses, with an error reply such as NOPERM
// for an ACL user without the channel, would leave the replica deaf to
// requests: the first refusal is logged at Error, the subscription asked
// for again with back-off, and the recovery logged once it is granted.
func (l *leasedJobs) listen(ctx, lctx context.Context, sub subscriber) {
	defer l.workEnded()
	ps := sub.Subscribe(lctx, record.RunNowChannel)
	l.mu.Lock()
	stopped := l.stopped.Load()
	if !stopped {
		l.subs = append(l.subs, ps)
	}
	l.mu.Unlock()
	if stopped {
		_ = ps.Close()
		return
	}
	refused, backoff := false, requestRetry
	for {
		v, err := ps.Receive(lctx)
		if l.stopped.Load() {
			return
		}
		switch v := v.(type) {
		case *redis.Subscription:
			if refused && v.Kind == "subscribe" {
				refused, backoff = false, requestRetry
				l.rep.log.LogAttrs(ctx, slog.LevelInfo, "cron runtime hears run-now requests again",
					slog.String("channel", record.RunNowChannel))
			}
			continue
		case *redis.Message:
			if id, name, ok := parseFollow(v.Payload); ok {
				l.mu.Lock()
				if e := l.byLease[name]; e != nil {
					l.heardFollow(e, id)
				}
				l.mu.Unlock()
				continue
			}
			l.mu.Lock()
			e := l.byLease[v.Payload]
			l.mu.Unlock()
			if e != nil {
				l.sched.offSchedule(e, modeRequest, interval.Slot{}, "")
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
				l.rep.log.LogAttrs(ctx, slog.LevelError, "cron runtime can't hear run-now requests: Redis refused its subscription; a requested run waits for its job's next tick",
					slog.String("channel", record.RunNowChannel), slog.Any("error", err))
			}
			wait, backoff = backoff, min(2*backoff, refusedRetryMax)
		}
		timer := time.NewTimer(wait)
		select {
		case <-timer.C:
		case <-l.stop:
			timer.Stop()
			return
		}
		if reply != nil {
			// The refused subscription is not retried by the client, as a
			// lost connection is: ask again.
			_ = ps.Subscribe(lctx, record.RunNowChannel)
		}
	}
}

// passRequest announces again the run-now request that a's completion
// found waiting (R16's announcement), when this replica can't serve it, so
// that the replicas that run the job send E5 now rather than at their next
// claim. If it fails, the request waits in the record for that claim.
func (l *leasedJobs) passRequest(ctx context.Context, t *Tick, s *jobState) {
	pctx, cancel := context.WithTimeout(l.rctx, s.RunTTL)
	defer cancel()
	if err := record.Announce(pctx, s.C, s.Name); err != nil {
		l.rep.log.LogAttrs(ctx, slog.LevelWarn, "cron job's run-now request waits for another replica's next claim: this replica no longer runs the job, and announcing the request again failed",
			slog.String("job", t.Job), slog.Any("error", err))
	}
}

// E14, the follow notice: a replica whose start ran a Cron slot that the
// other replicas ticked before (its late tick of a slot still in its
// claim window, or its catch-up) tells them, so that the slot's next
// attempt does not hang on the one replica that knows of its run.

// followPrefix begins a follow notice on the run-now channel. A lease name
// holds no '{', so no run-now request begins so; a replica of an earlier
// release finds no job of that name and ignores it.
const followPrefix = "{follow}"

// followNotice is the payload of a follow notice of the Cron slot whose
// key is id, of the job leased as name. A slot's key holds no '|'.
func followNotice(id, name string) string {
	return followPrefix + id + "|" + name
}

// parseFollow returns the slot key and lease name of a follow notice.
func parseFollow(payload string) (id, name string, ok bool) {
	rest, ok := strings.CutPrefix(payload, followPrefix)
	if !ok {
		return "", "", false
	}
	return strings.Cut(rest, "|")
}

// offTick reports whether a's claim, which started a run, ran a Cron slot
// that the other replicas may have ticked without this one: a catch-up, a
// tick that came later than a grace period after its slot began (the
// startup run's late tick of a slot still in its claim window), or a look
// after an outage, or after this replica's run of the slot lost its lease
// (R12), that found the slot unclaimed (the others' looks may have come
// before it, while Redis had lost the record: seed 21393). Only
// a slot with attempts to spare needs anyone to follow it.
func offTick(a *runArgs, s *jobState) bool {
	if !s.shared || s.Attempts < 2 || a.tick.Attempt != 1 {
		return false
	}
	switch a.mode {
	case modeCatchUp, modeLook, modeAfterRun:
		return true
	case modeTick:
		return a.tick.Run == 1 && a.tick.Started.Sub(a.tick.Slot.Start) > lookGrace(s.base)
	}
	return false
}

// announceFollow publishes a follow notice of a's slot (E14), one
// command, on the path of a run that offTick picked. If it fails, the
// slot is followed only by this replica, as before notices: logged at
// Debug, the run goes on.
func (l *leasedJobs) announceFollow(ctx context.Context, t *Tick, s *jobState) {
	if err := record.Announce(ctx, s.C, followNotice(slotKey(t), s.Name)); err != nil {
		l.rep.log.LogAttrs(ctx, slog.LevelDebug, "cron job's follow notice was not published; only this replica follows its slot",
			slog.String("job", t.Job), slog.Any("error", err))
	}
}

// heardFollow is R19, a follow notice's arrival (E14): e plans a follow-up of
// the slot whose key is id, a run lease from now (E3, which R1 plans
// again while the run holds its lease, and R5 makes the next attempt if
// the run was lost). l.mu is held.
func (l *leasedJobs) heardFollow(e *entry, id string) {
	if e.admit == nil || e.admit.state == nil {
		return
	}
	s := e.admit.state
	if !s.shared || s.Attempts < 2 {
		return
	}
	slot, ok := slotNamed(e.every.Interval, id, l.now())
	if !ok {
		return // not one of the latest slots of this release's schedule
	}
	l.planLook(e, s, modeFollow, slot, id, s.RunTTL+time.Millisecond)
}
