// Package redisscript runs Lua scripts by their SHA1, sending the source only
// when the server has lost its script cache. Package lock has a leaner copy
// for its hot path; this one serves the cron runtime's records, where a
// script's keys and arguments vary.
package redisscript

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
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

// ClientOf returns the client of a lock.Db or lock.ReadOnlyDb, after the
// checks a lock operation in namespace would make (a Db without a client,
// one that may not take locks in namespace), so that the cron runtime can
// keep its records through the same handle its leases use. It is the
// caller's own client, beneath what a Db's options wrap around it: a
// record's commands are not lock operations to observe or to WAIT for,
// and the runtime subscribes through it. Package lock
// sets it when it is initialized; nothing outside this module can reach it.
var ClientOf func(db any, namespace string) (Client, error)
