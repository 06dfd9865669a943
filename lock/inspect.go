package lock

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// Held reports whether someone holds the lock called name and, if so, how
// much of their lease is left as Redis counts it (PTTL, in whole ms). It
// takes nothing and writes nothing, so it takes a [ReadOnlyDB], which may be
// one on a replica (whose view lags its master's) or [DB.ReadOnly] of the
// DB that takes the locks. The answer is a snapshot: the lock may be taken
// or released right after it. One command, PTTL.
//
// Held returns [ErrZeroLock] for the zero Lock, [ErrNoClient] for a
// ReadOnlyDB without a client, ctx's error if ctx is done and the client's
// error if Redis could not be reached. A key with no expiry, which this
// package never writes, is an error too: a lease without an end is not one
// of ours.
func (l Lock[N]) Held(ctx context.Context, db ReadOnlyDB, name N) (remaining time.Duration, held bool, err error) {
	if err := db.check(ctx, l.f.ns); err != nil {
		return 0, false, err
	}
	key := l.Key(name)
	cmd := redis.NewIntCmd(ctx, "pttl", key)
	if err := process(ctx, db.c, cmd); err != nil {
		return 0, false, err
	}
	switch ms := cmd.Val(); {
	case ms == -2:
		return 0, false, nil
	case ms < 0:
		return 0, false, fmt.Errorf("lock: key %q has no expiry, so no lease of this package holds it", key)
	default:
		return time.Duration(ms) * time.Millisecond, true, nil
	}
}

// RWState is what [RWLock.Inspect] saw of one name at one instant of the
// Redis server's clock. Durations are whole milliseconds. Its zero value is
// a free name.
type RWState struct {
	// Writer is whether a writer holds the name; WriterLeft is what is left
	// of its lease, and zero when Writer is false.
	Writer     bool
	WriterLeft time.Duration
	// Readers is how many readers hold a lease that has not ended;
	// ReaderLeft is what is left of the one that ends last, and zero when
	// Readers is 0. Readers whose lease ended but that were not yet removed
	// are not counted.
	Readers    int
	ReaderLeft time.Duration
}

// Inspect returns who holds the RWLock called name: whether a writer does,
// how many live readers, and what is left of the writer's lease and of the
// longest read lease. Like [Lock.Held] it is read only, takes a
// [ReadOnlyDB], and its answer is a snapshot; it sends one command, a script
// that only reads (the readers' leases are scored in the server's ms, so
// only the server can tell which have ended). Errors as for Lock.Held.
func (l RWLock[N]) Inspect(ctx context.Context, db ReadOnlyDB, name N) (RWState, error) {
	if err := db.check(ctx, l.f.ns); err != nil {
		return RWState{}, err
	}
	w, r := l.Keys(name)
	cmd := redis.NewSliceCmd(ctx, "evalsha", inspectRW.sha, 2, w, r)
	err := process(ctx, db.c, cmd)
	if err != nil && isNoScript(err) {
		cmd = redis.NewSliceCmd(ctx, "eval", inspectRW.src, 2, w, r)
		err = process(ctx, db.c, cmd)
	}
	if err != nil {
		return RWState{}, err
	}
	v := cmd.Val()
	if len(v) != 3 {
		return RWState{}, fmt.Errorf("lock: inspect %s: unexpected reply %v", w, v)
	}
	var n [3]int64
	for i := range v {
		x, ok := v[i].(int64)
		if !ok {
			return RWState{}, fmt.Errorf("lock: inspect %s: unexpected reply %v", w, v)
		}
		n[i] = x
	}
	var s RWState
	if n[0] >= 0 {
		s.Writer, s.WriterLeft = true, time.Duration(n[0])*time.Millisecond
	} else if n[0] == -1 {
		return RWState{}, fmt.Errorf("lock: key %q has no expiry, so no lease of this package holds it", w)
	}
	if n[1] > 0 {
		s.Readers, s.ReaderLeft = int(n[1]), time.Duration(n[2])*time.Millisecond
	}
	return s, nil
}

// check returns why a read-only query on the lock family of namespace ns
// can't be sent: a zero lock, a missing client or a done context.
func (d ReadOnlyDB) check(ctx context.Context, ns string) error {
	switch {
	case ns == "":
		return ErrZeroLock
	case d.c == nil:
		return ErrNoClient
	}
	return ctx.Err()
}

// inspectRW reads the writer key KEYS[1] and the readers' set KEYS[2] and
// returns {the writer's PTTL (-2 if none), the number of live readers, what is
// left of the longest read lease in ms (0 if none)}. It writes nothing: ended
// readers are counted out, not removed, so it runs on a replica too.
var inspectRW = newScript(rwPrelude + `
local w = redis.call('PTTL', KEYS[1])
local n = redis.call('ZCOUNT', KEYS[2], now, '+inf')
local left = 0
if n > 0 then
	local top = redis.call('ZRANGE', KEYS[2], -1, -1, 'WITHSCORES')
	left = tonumber(top[2]) - now
end
return {w, n, left}`)
