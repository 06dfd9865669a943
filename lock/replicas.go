package lock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// ErrNotReplicated is returned, wrapped, by an acquire or an extension on a
// [DB] made with [WithReplicas] when fewer replicas than it asks for
// acknowledged the write within its timeout. An acquire has released the
// lock again by then; an extension leaves the lease as the master has it,
// with the token's Deadline where the last replicated operation left it.
var ErrNotReplicated = errors.New("lock: write not acknowledged by enough replicas")

// WithReplicas makes every acquire and extension of the DB wait, after the
// master has taken it, until at least n replicas have acknowledged the
// write (Redis WAIT n, sent in the same round trip, on the same connection,
// as the write), or until timeout, and fail with [ErrNotReplicated] when too
// few did, releasing what an acquire took. A lock the replicas have then
// survives a failover to one of them, which asynchronous replication alone
// does not promise; RELIABILITY.md measures the difference. Each acquire or
// extension then lasts at least the replicas' acknowledgement, a round trip
// from master to replica. A release sends no WAIT. A busy acquire sends it
// too, since the pipeline is sent before the answer is known, and ignores
// its answer; it returns within the timeout all the same.
//
// It needs a *redis.Client (a Sentinel failover client is one) or a
// *redis.ClusterClient (the wait goes to the master of the lock's slot); any
// other Client fails every acquire and extension with an error. n of 0 or
// less means no waiting; a timeout under a millisecond counts as one (WAIT 0
// would wait forever). [Lock.TryLockMany] and [ExtendMany] wait too, after
// each node's calls, and fail the names of a node whose replicas did not
// acknowledge them (TryLockMany releases those); on a Cluster, a call
// redirected by a slot migration then fails with the redirection.
func WithReplicas(n int, timeout time.Duration) DBOption {
	return func(c *dbConfig) { c.replicas, c.wait = n, timeout }
}

// runWait runs s as run does, and then WAIT, in one pipeline on the
// connection of the lock's node. An answer of 0 (busy, or the lease gone)
// wrote nothing and is returned as it is.
func (s script) runWait(ctx context.Context, w *wrapped, key1, key2, value *string, ms any) (int64, error) {
	var p redis.Pipeliner
	switch c := w.c.(type) {
	case *redis.Client:
		p = c.Pipeline()
	case *redis.ClusterClient:
		node, err := c.MasterForKey(ctx, *key1)
		if err != nil {
			return 0, err
		}
		p = node.Pipeline()
	default:
		return 0, fmt.Errorf("lock: WithReplicas needs a *redis.Client or *redis.ClusterClient, not %T", w.c)
	}
	send := func(verb string, body any) (*redis.IntCmd, *redis.IntCmd) {
		cmd := redis.NewIntCmd(ctx, s.argv(verb, body, key1, key2, value, ms)...)
		wait := redis.NewIntCmd(ctx, "wait", w.replicas, w.waitMs)
		p.Process(ctx, cmd)
		p.Process(ctx, wait)
		p.Exec(ctx) // each command's error is read below
		return cmd, wait
	}
	cmd, wait := send("evalsha", s.sha)
	if err := cmd.Err(); err != nil && isNoScript(err) {
		cmd, wait = send("eval", s.src)
	}
	if err := cmd.Err(); err != nil {
		return 0, err
	}
	n := cmd.Val()
	if n == 0 {
		return 0, nil
	}
	return n, notReplicated(wait, w.replicas, w.waitMs)
}

// notReplicated returns the error of a WAIT for replicas that answered
// wait: nil if enough acknowledged.
func notReplicated(wait *redis.IntCmd, replicas int, ms int64) error {
	if err := wait.Err(); err != nil {
		return fmt.Errorf("%w: WAIT: %w", ErrNotReplicated, err)
	}
	if acked := wait.Val(); acked < int64(replicas) {
		return fmt.Errorf("%w: %d of %d replicas within %d ms", ErrNotReplicated, acked, replicas, ms)
	}
	return nil
}
