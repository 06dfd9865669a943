package lock

import (
	"context"
	"crypto/sha1"
	"encoding/hex"

	"github.com/redis/go-redis/v9"

	"github.com/wakuwaku-go/wakuwaku/internal/redisscript"
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

// run evaluates s on key1 (and key2, unless it is nil) with the token value
// and the TTL in ms (unless it is nil), and returns its integer reply. It
// builds the command's arguments itself, in one slice, as this is the hot
// path. The keys and the value are passed by pointer: go-redis writes a
// *string as the string, and a pointer fits in an interface without the
// allocation that boxing a string costs. They point into a token, whose
// strings never change.
func (s script) run(ctx context.Context, c Client, key1, key2, value *string, ms any) (int64, error) {
	if w, ok := c.(*wrapped); ok && w.replicas > 0 && ms != nil {
		return s.runWait(ctx, w, key1, key2, value, ms)
	}
	cmd := redis.NewIntCmd(ctx, s.argv("evalsha", s.sha, key1, key2, value, ms)...)
	err := process(ctx, c, cmd)
	if err != nil && isNoScript(err) {
		cmd = redis.NewIntCmd(ctx, s.argv("eval", s.src, key1, key2, value, ms)...)
		err = process(ctx, c, cmd)
	}
	if err != nil {
		return 0, err
	}
	return cmd.Val(), nil
}

func (s script) argv(verb string, body any, key1, key2, value *string, ms any) []any {
	argv := make([]any, 3, 7)
	argv[0], argv[1], argv[2] = verb, body, 1
	argv = append(argv, key1)
	if key2 != nil {
		argv[2] = 2
		argv = append(argv, key2)
	}
	argv = append(argv, value)
	if ms != nil {
		argv = append(argv, ms)
	}
	return argv
}

// isNoScript reports whether err says that the server lacks the script.
var isNoScript = redisscript.IsNoScript

// The scripts below are the whole protocol besides the SET that acquires a
// Lock (DB.acquire). KEYS and ARGV are documented above each. Times are milliseconds of the
// server's own clock, so that the clocks of the clients never matter.

// lockScript sets KEYS[1] to the token ARGV[1] for ARGV[2] ms if it is free.
// A key that already holds this token counts as taken: the client retried a
// call whose reply was lost, and the first attempt took the lock. 1 if the
// token holds the key, else 0. An acquire sends the SET … NX GET itself
// (see DB.acquire) and this script only when that SET is refused or
// redirected, or when the DB waits for replicas.
//
// Inside the script, Redis 7 and later (which define REDIS_VERSION_NUM and
// accept NX with GET) set and read back in one command, whether the lock is
// free or busy. Older servers set first, so that taking a free lock costs
// one command, and read the key only when it was busy.
var lockScript = newScript(`
if redis.REDIS_VERSION_NUM then
	local cur = redis.call('SET', KEYS[1], ARGV[1], 'NX', 'GET', 'PX', ARGV[2])
	if not cur or cur == ARGV[1] then
		return 1
	end
	return 0
end
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
	return 1
end
if redis.call('GET', KEYS[1]) == ARGV[1] then
	return 1
end
return 0`)

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

// rwPrelude defines now, the server's time in whole ms (rounded down).
const rwPrelude = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
`

// pruneReaders returns the line that drops the readers of the set key whose
// lease has ended. A reader's score is now+ttl as of its acquire or last
// extension, now being rounded down, so a lease has ended once now is past
// its score, not at it: like a key's PX expiry, it then lasts at least one TTL
// from when the command ran, and so at least until the Deadline its token
// reports. A score equal to now is live.
func pruneReaders(key string) string {
	return "redis.call('ZREMRANGEBYSCORE', " + key + ", '-inf', now - 1)\n"
}

// readLock adds reader ARGV[1] with a lease of ARGV[2] ms to the set KEYS[2]
// unless the writer key KEYS[1] exists. The set lives as long as its longest
// lease. 1 if the reader was added, else 0.
var readLock = newScript(rwPrelude + `
if redis.call('EXISTS', KEYS[1]) == 1 then
	return 0
end
` + pruneReaders("KEYS[2]") + `
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
` + pruneReaders("KEYS[2]") + `
if redis.call('ZCARD', KEYS[2]) > 0 then
	return 0
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1`)

// readUnlock removes reader ARGV[1] from the readers' set KEYS[1]. 1 if its
// lease had not ended, else 0 (absent, or present with an ended lease). It
// declares only the set, the one key it touches; see ReadToken.do.
var readUnlock = newScript(rwPrelude + `
local score = redis.call('ZSCORE', KEYS[1], ARGV[1])
` + pruneReaders("KEYS[1]") + `
if not score then
	return 0
end
redis.call('ZREM', KEYS[1], ARGV[1])
if tonumber(score) >= now then
	return 1
end
return 0`)

// readExtend restarts the lease of reader ARGV[1] in the readers' set KEYS[1]
// for ARGV[2] ms if it has not ended, and keeps the set alive at least that
// long. 1 if it did, else 0. It declares only the set, as readUnlock does.
var readExtend = newScript(rwPrelude + `
local score = redis.call('ZSCORE', KEYS[1], ARGV[1])
` + pruneReaders("KEYS[1]") + `
if not score or tonumber(score) < now then
	return 0
end
local ttl = tonumber(ARGV[2])
redis.call('ZADD', KEYS[1], 'XX', now + ttl, ARGV[1])
if redis.call('PTTL', KEYS[1]) < ttl then
	redis.call('PEXPIRE', KEYS[1], ttl)
end
return 1`)
