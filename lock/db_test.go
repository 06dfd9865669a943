package lock_test

import (
	"context"
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/wakuwaku-go/wakuwaku/internal/redistest"
	"github.com/wakuwaku-go/wakuwaku/lock"
)

// TestPing checks that Ping answers nil from a running Redis and fails fast,
// with the client's error or the deadline's, from a port nothing listens on.
func TestPing(t *testing.T) {
	srv := redistest.Start(t)
	closed := closedAddr(t)
	client := func(opts *redis.Options) lock.DB {
		c := redis.NewClient(opts)
		t.Cleanup(func() { _ = c.Close() })
		return lock.NewDB(c)
	}
	tests := []struct {
		name     string
		db       lock.DB
		deadline time.Duration
		want     error // nil: Ping must succeed
	}{
		{"running", client(srv.Options()), 5 * time.Second, nil},
		{"running, narrowed to no lock", client(srv.Options()).Only(), 5 * time.Second, nil},
		// The client's own retries take longer than the deadline.
		{"nothing listening, default client", client(&redis.Options{Addr: closed}), 300 * time.Millisecond, context.DeadlineExceeded},
		{"nothing listening, no retries", client(&redis.Options{Addr: closed, MaxRetries: -1, DialerRetries: 1}), 5 * time.Second, syscall.ECONNREFUSED},
		{"no client", lock.DB{}, 5 * time.Second, lock.ErrNoClient},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), tc.deadline)
			defer cancel()
			began := time.Now()
			err := tc.db.Ping(ctx)
			took := time.Since(began)
			if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
				t.Errorf("Ping = %v, want %v", err, tc.want)
			}
			if took > min(tc.deadline, time.Second)+500*time.Millisecond {
				t.Errorf("Ping took %v with a deadline of %v, want it to give up sooner", took, tc.deadline)
			}
		})
	}
}
