package lock

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// FencedLock is a [Lock] whose acquires also hand out a fencing token: a
// number strictly greater than that of every earlier fenced acquire of the
// same name, for the protected resource to check, so that it can refuse the
// writes of a holder that stalled past its lease while a later holder wrote.
// It takes the same key as its Lock, so Lock and FencedLock holders of one
// name exclude each other (only the fenced ones get numbers); build it with
// [Lock.Fenced]. Like a Lock it is an immutable value, safe to share.
//
// The number is the Redis server's clock in microseconds when the lock was
// taken (TIME), raised past the previous holder's number when the clock has
// not moved past it. That previous number is kept in one more key per name,
// which expires one lease after the acquire (later if the number is ahead of
// the clock), so no key is left behind for names no longer locked. Redis
// expires keys by the same wall clock that TIME reads, so by the time the
// key is gone the clock reads past its number: a server clock stepped back
// delays the key's expiry by as much, and the order holds. It can break only
// when the key is lost before it expires and the clock that gives the next
// number reads earlier than the lost one:
//
//   - a failover to a replica that had not received the key yet
//     (replication is asynchronous; the lock itself may be lost the same
//     way), whose clock is behind the old master's by more than the time
//     since the name's last acquire;
//   - a restart without persistence, an eviction under maxmemory, a
//     FLUSHALL or a DEL of the key, with the clock stepped back meanwhile.
//
// A replica that did receive the key keeps it until the same absolute time,
// and a Cluster slot migration moves it with the lock, so both keep the
// order.
type FencedLock[N any] struct {
	l Lock[N]
}

// Fenced returns the fenced form of l: same namespace, TTL, names and keys.
func (l Lock[N]) Fenced() FencedLock[N] { return FencedLock[N]{l} }

// String describes the lock family as its Lock does, as in "Lock:invoice".
func (l FencedLock[N]) String() string { return l.l.String() }

func (l FencedLock[N]) entity() entity { return l.l.entity() }

// TryLock takes the lock called name if it is free and returns its token and
// its fencing number, or nil, 0 and no error if someone else holds it. It
// never waits, sends one command, and returns the errors of [Lock.TryLock].
// The token is an ordinary [Token], released and extended as any other; the
// number stays the token's for its whole lease, extensions included. A
// client's retry after a lost reply gets the number of its first attempt.
//
// A fenced name may not contain '}', which would take the number key to
// another cluster hash slot than the lock's; TryLock refuses such a name
// with an error before sending anything.
func (l FencedLock[N]) TryLock(ctx context.Context, db DB, name N) (*Token, uint64, error) {
	if err := db.check(ctx, l.l.entity()); err != nil {
		return nil, 0, err
	}
	key := l.l.Key(name)
	if strings.IndexByte(key, '}') >= 0 {
		return nil, 0, fmt.Errorf("lock: fenced name of key %q contains '}'", key)
	}
	fence := fenceKey(key)
	t := newToken(db.c, key, l.l.f.lease, l.l.f.ms)
	sent := time.Now()
	n, err := fencedLock.run(ctx, db.c, &t.key, &fence, &t.value, l.l.f.ms)
	if o, ok := db.c.(*wrapped); ok {
		o.acquired(l.l.entity(), "lock", n, err, sent)
	}
	switch {
	case err != nil:
		if n > 0 { // taken, not replicated
			t.Release(context.WithoutCancel(ctx))
		}
		return nil, 0, err
	case n == 0:
		return nil, 0, nil
	case n < 0:
		// A retry that found its own token after the number key had gone,
		// which a lease shorter than the client's retries could cause.
		return nil, 0, errFenceLost
	}
	t.acquired(sent)
	return t, uint64(n), nil
}

var errFenceLost = errors.New("lock: fenced acquire retried after its number expired")

// fenceKey returns the key that keeps the last fencing number of the lock
// key: the lock key inside a hash tag, so that both share a cluster slot.
func fenceKey(lockKey string) string {
	return keyPrefix + "LockFence:{" + lockKey + "}"
}

// fencedLock takes the lock KEYS[1] for the token ARGV[1] for ARGV[2] ms if
// it is free, as lockScript does, and answers its fencing number: the
// server's time in µs, or one more than the number kept in KEYS[2] if that
// is not below it. KEYS[2] then keeps the new number for the lease's ms,
// plus the ms that the clock needs to pass the number. 0 if another token
// holds the lock; the kept number if this token already does (a retry), or
// -1 if that number has expired. A number fits a Lua double exactly until
// the year 2255.
var fencedLock = newScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local cur = redis.call('GET', KEYS[1])
if cur then
	if cur == ARGV[1] then
		local kept = redis.call('GET', KEYS[2])
		if kept then
			return tonumber(kept)
		end
		return -1
	end
	return 0
end
local fence = now
local last = redis.call('GET', KEYS[2])
if last and tonumber(last) >= fence then
	fence = tonumber(last) + 1
end
local ms = tonumber(ARGV[2])
redis.call('SET', KEYS[1], ARGV[1], 'PX', ms)
redis.call('SET', KEYS[2], string.format('%.0f', fence), 'PX', ms + math.floor((fence - now) / 1000) + 1)
return fence`)
