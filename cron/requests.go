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

// listen runs the run-now requests for the jobs named in names that come
// over sub's Pub/Sub channel, until Shutdown closes the subscription.
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
		if e := names[msg.Payload]; e != nil {
			r.offSchedule(ctx, e, modeRequest, interval.Slot{}, "")
		}
	}
}
