package lock

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"strings"

	"github.com/redis/go-redis/v9"
)

// script is a Lua script sent by its SHA1, and in full only when the server
// answers NOSCRIPT (a restart, a failover or SCRIPT FLUSH emptied its cache);
// the server then caches it again, so the next call is one round trip again.
type script struct {
	src, sha any // boxed once, so that a call doesn't box them again
}

func newScript(src string) script {
	h := sha1.Sum([]byte(src))
	return script{src: src, sha: hex.EncodeToString(h[:])}
}

// run evaluates s on key1 (and key2, unless it is "") with the token value and
// the TTL in ms (unless it is nil), and returns its integer reply. It builds
// the command's arguments itself, in one slice, as this is the hot path.
func (s script) run(ctx context.Context, c Client, key1, key2, value string, ms any) (int64, error) {
	cmd := redis.NewIntCmd(ctx, s.argv("evalsha", s.sha, key1, key2, value, ms)...)
	err := c.Process(ctx, cmd)
	if err != nil && isNoScript(err) {
		cmd = redis.NewIntCmd(ctx, s.argv("eval", s.src, key1, key2, value, ms)...)
		err = c.Process(ctx, cmd)
	}
	if err != nil {
		return 0, err
	}
	return cmd.Val(), nil
}

func (s script) argv(verb string, body any, key1, key2, value string, ms any) []any {
	argv := make([]any, 3, 7)
	argv[0], argv[1], argv[2] = verb, body, 1
	argv = append(argv, key1)
	if key2 != "" {
		argv[2] = 2
		argv = append(argv, key2)
	}
	argv = append(argv, value)
	if ms != nil {
		argv = append(argv, ms)
	}
	return argv
}

func isNoScript(err error) bool {
	return strings.HasPrefix(err.Error(), "NOSCRIPT")
}

// The scripts below are the whole protocol besides the SET that acquires a
// Lock. KEYS and ARGV are documented above each. Times are milliseconds of the
// server's own clock, so that the clocks of the clients never matter.

// lockScript sets KEYS[1] to the token ARGV[1] for ARGV[2] ms if it is free.
// A key that already holds this token counts as taken: the client retried a
// call whose reply was lost, and the first attempt took the lock. 1 if the
// token holds the key, else 0. (A plain SET … NX GET would do the same in
// one command, but its reply is nil exactly when it succeeds, and go-redis
// turns nil into an error that costs every acquire a score of allocations.)
var lockScript = newScript(`
local cur = redis.call('GET', KEYS[1])
if cur == ARGV[1] then
	return 1
elseif cur then
	return 0
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1`)

// unlock deletes KEYS[1] if it holds the token ARGV[1]; 1 if it did, else 0.
var unlock = newScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
	return redis.call('DEL', KEYS[1])
end
return 0`)

// extend restarts the lease on KEYS[1] for ARGV[2] ms if it holds the token
// ARGV[1]; 1 if it did, else 0.
var extend = newScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
	return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0`)

// rwPrelude defines now (the server's time in ms) and prunes the readers of
// KEYS[2] whose lease has ended.
const rwPrelude = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
`
const pruneReaders = `redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
`

// readLock adds reader ARGV[1] with a lease of ARGV[2] ms to the set KEYS[2]
// unless the writer key KEYS[1] exists. The set lives as long as its longest
// lease. 1 if the reader was added, else 0.
var readLock = newScript(rwPrelude + `
if redis.call('EXISTS', KEYS[1]) == 1 then
	return 0
end
` + pruneReaders + `
local ttl = tonumber(ARGV[2])
redis.call('ZADD', KEYS[2], now + ttl, ARGV[1])
if redis.call('PTTL', KEYS[2]) < ttl then
	redis.call('PEXPIRE', KEYS[2], ttl)
end
return 1`)

// writeLock sets the writer key KEYS[1] to the token ARGV[1] for ARGV[2] ms if
// it is free and no reader of KEYS[2] holds a lease. A writer key that already
// holds this token (the client retried after a lost reply) counts as taken.
// 1 if the token holds the writer key, else 0.
var writeLock = newScript(rwPrelude + `
local cur = redis.call('GET', KEYS[1])
if cur == ARGV[1] then
	return 1
elseif cur then
	return 0
end
` + pruneReaders + `
if redis.call('ZCARD', KEYS[2]) > 0 then
	return 0
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1`)

// readUnlock removes reader ARGV[1] from KEYS[2]. 1 if its lease had not
// ended, else 0 (absent, or present with an ended lease).
var readUnlock = newScript(rwPrelude + `
local score = redis.call('ZSCORE', KEYS[2], ARGV[1])
` + pruneReaders + `
if not score then
	return 0
end
redis.call('ZREM', KEYS[2], ARGV[1])
if tonumber(score) > now then
	return 1
end
return 0`)

// readExtend restarts the lease of reader ARGV[1] in KEYS[2] for ARGV[2] ms if
// it has not ended, and keeps the set alive at least that long. 1 if it did,
// else 0.
var readExtend = newScript(rwPrelude + `
local score = redis.call('ZSCORE', KEYS[2], ARGV[1])
` + pruneReaders + `
if not score or tonumber(score) <= now then
	return 0
end
local ttl = tonumber(ARGV[2])
redis.call('ZADD', KEYS[2], 'XX', now + ttl, ARGV[1])
if redis.call('PTTL', KEYS[2]) < ttl then
	redis.call('PEXPIRE', KEYS[2], ttl)
end
return 1`)
