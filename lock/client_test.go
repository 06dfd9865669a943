package lock_test

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/wakuwaku-go/wakuwaku/lock"
)

// hookClient is a lock.Client around a real one that lets a test see when
// each command goes out, hold a reply back after Redis has answered it, and
// wrap the errors the way a caller's instrumented client might.
type hookClient struct {
	next lock.Client
	wrap bool // return errors as fmt.Errorf("hook: %w", err)

	mu      sync.Mutex
	entered []time.Time // when each command reached Process
	hold    chan chan struct{}
}

func (h *hookClient) Process(ctx context.Context, cmd redis.Cmder) error {
	h.mu.Lock()
	h.entered = append(h.entered, time.Now())
	hold := h.hold
	h.hold = nil
	h.mu.Unlock()
	err := h.next.Process(ctx, cmd)
	if hold != nil {
		// Redis has run the command; its reply waits until the test lets it go.
		release := make(chan struct{})
		hold <- release
		<-release
	}
	if err != nil && h.wrap {
		return fmt.Errorf("hook: %w", err)
	}
	return err
}

// holdNext makes the next command's reply wait, once Redis has answered it:
// the returned channel receives a channel to close to let the reply go.
func (h *hookClient) holdNext() <-chan chan struct{} {
	ch := make(chan chan struct{})
	h.mu.Lock()
	h.hold = ch
	h.mu.Unlock()
	return ch
}

// lastEntered returns when the latest command reached Process.
func (h *hookClient) lastEntered() time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.entered[len(h.entered)-1]
}
