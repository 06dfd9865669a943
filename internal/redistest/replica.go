package redistest

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"
)

// WaitReplicas returns once n replicas of master have everything it holds:
// it writes a key and waits (WAIT, on the same connection) until n
// replicas acknowledge it, within 10 s, and fails the test otherwise. A
// WAIT that follows no write of its connection answers at once with the
// replicas connected, whether or not they have synced: with diskless
// sync, a replica can still be loading its first copy then.
func WaitReplicas(tb testing.TB, master *Server, n int) {
	tb.Helper()
	ctx := context.Background()
	p := master.Client(tb).Pipeline()
	p.Set(ctx, "@@wakuwaku-test:synced", 1, 0)
	wait := redis.NewIntCmd(ctx, "wait", n, 10000)
	_ = p.Process(ctx, wait)
	if _, err := p.Exec(ctx); err != nil || wait.Val() != int64(n) {
		tb.Fatalf("redistest: %d replicas of %s did not sync within 10 s: WAIT = %d, %v", n, master.Addr(), wait.Val(), err)
	}
}
