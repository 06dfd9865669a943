package lock

import (
	"bytes"
	"context"

	"github.com/redis/go-redis/v9"

	"github.com/wakuwaku-go/wakuwaku/internal/redisscript"
)

// acquire takes the key of t for t's token and TTL if it is free, and
// reports whether t's token holds it: 1 if it does, 0 if another token
// does.
//
// It sends SET key token NX GET PX ttl, which costs the server about what a
// plain SET NX does (on a busy key its reply carries the holder's token,
// where SET NX answers nil) and answers with the key's value before the
// command: nil when the key was free and is now ours, our own token when an
// earlier attempt whose reply was lost took it, and another token when the
// lock is busy.
// The command goes out as a RawCmd, whose reply go-redis hands over as the
// RESP bytes, so that the nil of a free lock costs no error value; acquire
// reads the reply itself.
//
// Every other reply is an error reply: a server older than Redis 7, which
// refuses NX with GET as a syntax error; a cluster's redirection (MOVED,
// ASK), which go-redis follows only when it sees an error; a key of another
// type. acquire then sends lockScript, which takes the lock the same way
// through the client's ordinary path: it follows redirections, works on
// every server and reports the error of a key of another type as an error.
// After an ERR reply the DB sends lockScript at once from then on, so an old
// server costs one extra round trip once.
//
// A DB with WithReplicas sends lockScript and its WAIT in one pipeline: see
// runWait.
func (d DB) acquire(ctx context.Context, t *Token, ms any) (int64, error) {
	if w, ok := d.c.(*wrapped); (ok && w.replicas > 0) || (d.script != nil && d.script.Load()) {
		return lockScript.run(ctx, d.c, &t.key, nil, &t.value, ms)
	}
	t.argv = [...]any{"set", &t.key, &t.value, "nx", "get", "px", ms}
	cmd := redis.NewRawCmd(ctx, t.argv[:]...)
	if err := process(ctx, d.c, cmd); err != nil {
		return 0, err
	}
	switch reply := cmd.Val(); {
	case isNil(reply):
		return 1, nil
	case len(reply) > 0 && reply[0] == '$':
		if bytes.Equal(bulk(reply), t.raw[:]) {
			return 1, nil
		}
		return 0, nil
	case bytes.HasPrefix(reply, []byte("-ERR")) && d.script != nil:
		d.script.Store(true)
	}
	return lockScript.run(ctx, d.c, &t.key, nil, &t.value, ms)
}

// isNil reports whether a RESP reply is nil: "_" in RESP3, "$-1" in RESP2.
func isNil(reply []byte) bool {
	return bytes.Equal(reply, []byte("_\r\n")) || bytes.Equal(reply, []byte("$-1\r\n"))
}

// bulk returns the payload of a RESP bulk string reply ("$n\r\n…\r\n"), or
// nil if reply is not one.
func bulk(reply []byte) []byte {
	i := bytes.Index(reply, []byte("\r\n"))
	if i < 0 || len(reply) < i+4 {
		return nil
	}
	return reply[i+2 : len(reply)-2]
}

// process sends cmd through c and returns its error, waiting for the reply
// even on go-redis's asynchronous AutoPipeliner: see redisscript.Process.
var process = redisscript.Process
