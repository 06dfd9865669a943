package cron

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

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
// (Redis down) before it tries again.
const requestRetry = time.Second

// listen runs the run-now requests for the leased jobs that come over
// sub's Pub/Sub channel, until Shutdown closes the subscription. A request
// names a job by its lease; one for a job this runtime does not have, or
// whose record is another client's, is nothing to it (its claim would find
// no request waiting).
func (r *Runtime) listen(ctx, lctx context.Context, sub subscriber) {
	defer r.listenerEnded()
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
	for {
		msg, err := ps.ReceiveMessage(lctx)
		if r.stopped.Load() {
			return
		}
		if err != nil {
			wait := time.NewTimer(requestRetry)
			select {
			case <-wait.C:
			case <-r.stop:
				wait.Stop()
				return
			}
			continue
		}
		r.mu.Lock()
		e := r.leased[msg.Payload]
		r.mu.Unlock()
		if e != nil {
			r.offSchedule(e, modeRequest, interval.Slot{}, "")
		}
	}
}
