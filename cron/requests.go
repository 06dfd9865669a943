package cron

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wakuwaku-go/wakuwaku/cron/internal/record"
	"github.com/wakuwaku-go/wakuwaku/internal/redisscript"
	"github.com/wakuwaku-go/wakuwaku/interval"
)

// This file holds E5 of PROTOCOL.md, the run-now requests, which come
// over Pub/Sub (R16).

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
func (r *Runtime) listen(ctx, lctx context.Context, sub subscriber) {
	defer r.listenerEnded()
	ps := sub.Subscribe(lctx, record.RunNowChannel)
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
				r.rep.log.LogAttrs(ctx, slog.LevelInfo, "cron runtime hears run-now requests again",
					slog.String("channel", record.RunNowChannel))
			}
			continue
		case *redis.Message:
			if id, name, ok := parseFollow(v.Payload); ok {
				r.mu.Lock()
				if e := r.leased[name]; e != nil {
					r.heardFollow(e, id)
				}
				r.mu.Unlock()
				continue
			}
			r.mu.Lock()
			e := r.leased[v.Payload]
			r.mu.Unlock()
			if e != nil {
				r.offSchedule(e, modeRequest, interval.Slot{}, "")
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
				r.rep.log.LogAttrs(ctx, slog.LevelError, "cron runtime can't hear run-now requests: Redis refused its subscription; a requested run waits for its job's next tick",
					slog.String("channel", record.RunNowChannel), slog.Any("error", err))
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
			_ = ps.Subscribe(lctx, record.RunNowChannel)
		}
	}
}

// passRequest announces again the run-now request that a's completion
// found waiting (R16's announcement), when this replica can't serve it, so
// that the replicas that run the job send E5 now rather than at their next
// claim. If it fails, the request waits in the record for that claim.
func (r *Runtime) passRequest(ctx context.Context, a *runArgs, s *jobState) {
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.RunTTL)
	defer cancel()
	if err := announce(pctx, s.C, s.Name); err != nil {
		r.rep.log.LogAttrs(ctx, slog.LevelWarn, "cron job's run-now request waits for another replica's next claim: this replica no longer runs the job, and announcing the request again failed",
			slog.String("job", a.tick.Job), slog.Any("error", err))
	}
}

// announce publishes payload on the run-now channel: a job's lease name
// (R16) or a follow notice (E14). The channel counts as the command's key,
// so that a client that shards by key (a Ring, which otherwise sends
// PUBLISH to any shard) sends it to the channel's shard, where the
// replicas subscribed.
func announce(ctx context.Context, c redisscript.Client, payload string) error {
	pub := redis.NewIntCmd(ctx, "publish", record.RunNowChannel, payload)
	pub.SetFirstKeyPos(1)
	return redisscript.Process(ctx, c, pub)
}
