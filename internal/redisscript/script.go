// Package redisscript runs Lua scripts by their SHA1, sending the source only
// when the server has lost its script cache. Package lock has a leaner copy
// for its hot path; this one serves the cron runtime's records, where a
// script's keys and arguments vary.
package redisscript

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Client is what a script needs from Redis: package lock's Client.
type Client interface {
	Process(ctx context.Context, cmd redis.Cmder) error
}

// Script is a Lua script and its SHA1.
type Script struct {
	src, sha string
}

// New returns the script whose source is src.
func New(src string) Script {
	h := sha1.Sum([]byte(src))
	return Script{src: src, sha: hex.EncodeToString(h[:])}
}

// Run evaluates s with keys and args by SHA, and in full if the server
// answers NOSCRIPT, and returns the command with its reply.
func (s Script) Run(ctx context.Context, c Client, keys []string, args ...any) *redis.Cmd {
	cmd := redis.NewCmd(ctx, argv("evalsha", s.sha, keys, args)...)
	err := Process(ctx, c, cmd)
	if err != nil && IsNoScript(err) {
		cmd = redis.NewCmd(ctx, argv("eval", s.src, keys, args)...)
		_ = Process(ctx, c, cmd)
	}
	return cmd
}

// Process sends cmd through c and returns its error: the one c.Process
// returns or, when that is nil, the one the command holds. The two differ
// for go-redis's asynchronous AutoPipeliner, whose Process only queues the
// command and returns nil at once; reading the command's error waits for
// its reply. Every command of this module goes through it.
func Process(ctx context.Context, c Client, cmd redis.Cmder) error {
	if err := c.Process(ctx, cmd); err != nil {
		return err
	}
	return cmd.Err()
}

func argv(verb, body string, keys []string, args []any) []any {
	v := make([]any, 0, 3+len(keys)+len(args))
	v = append(v, verb, body, len(keys))
	for _, k := range keys {
		v = append(v, k)
	}
	return append(v, args...)
}

// IsNoScript reports whether err says that the server lacks the script. It
// looks through wrapping, since a caller's Client may wrap go-redis's
// errors, and takes a bare message too.
func IsNoScript(err error) bool {
	return strings.HasPrefix(err.Error(), "NOSCRIPT") || redis.HasErrorPrefix(err, "NOSCRIPT")
}

// ClientOf returns the client of a lock.DB or lock.ReadOnlyDB, after the
// checks a lock operation in namespace would make (a DB without a client,
// one that may not take locks in namespace), so that the cron runtime can
// keep its records through the same handle its leases use. It is the
// caller's own client, beneath what a DB's options wrap around it: a
// record's commands are not lock operations to observe, they wait for
// replicas by themselves (see ReplicationOf and Script.RunWait), and the
// runtime subscribes through it. Package lock
// sets it when it is initialized; nothing outside this module can reach it.
var ClientOf func(db any, namespace string) (Client, error)

// Replication is what a lock.DB made with lock.WithReplicas asks of every
// write that decides who holds something: that N replicas acknowledge it
// (Redis WAIT) within WaitMs. The zero Replication asks nothing.
type Replication struct {
	N      int
	WaitMs int64
}

// ReplicationOf returns the Replication of a lock.DB (the zero one for
// anything else). Package lock sets it when it is initialized, as it sets
// ClientOf.
var ReplicationOf = func(db any) Replication { return Replication{} }

// CanWait returns an error if c can't send a command and its WAIT on one
// connection: only a *redis.Client (a Sentinel failover client is one) and
// a *redis.ClusterClient can.
func CanWait(c Client) error {
	switch c.(type) {
	case *redis.Client, *redis.ClusterClient:
		return nil
	}
	return fmt.Errorf("waiting for replicas (lock.WithReplicas) needs a *redis.Client or *redis.ClusterClient, not %T", c)
}

// RunWait runs s as Run does and, when r asks for replicas, sends WAIT
// after it in the same pipeline, on the connection of the master of
// keys[0], so that the WAIT covers the script's writes. acked is how many
// replicas acknowledged them (r.N when r asks for none); werr is the
// WAIT's own error, or CanWait's, with acked 0. A script that failed
// leaves acked 0 and werr nil: cmd's error says it all.
func (s Script) RunWait(ctx context.Context, c Client, r Replication, keys []string, args ...any) (cmd *redis.Cmd, acked int64, werr error) {
	if r.N <= 0 {
		return s.Run(ctx, c, keys, args...), int64(r.N), nil
	}
	var p redis.Pipeliner
	switch cc := c.(type) {
	case *redis.Client:
		p = cc.Pipeline()
	case *redis.ClusterClient:
		node, err := cc.MasterForKey(ctx, keys[0])
		if err != nil {
			cmd = redis.NewCmd(ctx)
			cmd.SetErr(err)
			return cmd, 0, nil
		}
		p = node.Pipeline()
	default:
		cmd = redis.NewCmd(ctx)
		cmd.SetErr(CanWait(c))
		return cmd, 0, nil
	}
	send := func(verb, body string) (*redis.Cmd, *redis.IntCmd) {
		cmd := redis.NewCmd(ctx, argv(verb, body, keys, args)...)
		wait := redis.NewIntCmd(ctx, "wait", r.N, max(r.WaitMs, 1))
		_ = p.Process(ctx, cmd)
		_ = p.Process(ctx, wait)
		_, _ = p.Exec(ctx) // each command's error is read below
		return cmd, wait
	}
	cmd, wait := send("evalsha", s.sha)
	if err := cmd.Err(); err != nil && IsNoScript(err) {
		cmd, wait = send("eval", s.src)
	}
	if cmd.Err() != nil {
		return cmd, 0, nil
	}
	if err := wait.Err(); err != nil {
		return cmd, 0, err
	}
	return cmd, wait.Val(), nil
}
