package lock

import (
	"context"
	"time"
)

// Lock is a family of locks, one per name, each with at most one holder at a
// time. Names are of type N, so a Lock[InvoiceID] can't be used where a
// Lock[JobName] is wanted.
//
// A Lock is an immutable value holding no connection: declare it once, at
// package level, and use it from any goroutine with any [DB]. The zero value
// is not usable; build one with [New] or [NewFunc].
type Lock[N any] struct {
	f family[N]
}

// New returns the Lock family for namespace with the given lease TTL. Its
// names are encoded as their bytes (strings, byte slices) or their decimal
// digits (integers).
//
// New panics if namespace is empty or contains ':', '{' or '}', or if ttl is
// not positive, since both are programmer errors in what is usually a
// package-level declaration. A TTL under a millisecond counts as one.
func New[N Name](namespace string, ttl time.Duration) Lock[N] {
	return Lock[N]{newFamily[N]("New", namespace, ttl, "Lock", "").withKind()}
}

// NewFunc is like [New] for a name type of any kind: name encodes a name as the
// string that goes into the key. Distinct names must encode to distinct
// strings, or they share a lock. NewFunc panics where New does, and if name is
// nil.
func NewFunc[N any](namespace string, ttl time.Duration, name func(N) string) Lock[N] {
	return Lock[N]{newFamily[N]("NewFunc", namespace, ttl, "Lock", "").withFunc("NewFunc", name)}
}

// Namespace returns the namespace the Lock was built with.
func (l Lock[N]) Namespace() string { return l.f.ns }

// TTL returns the length of a lease, as given to [New].
func (l Lock[N]) TTL() time.Duration { return l.f.ttl }

// Key returns the Redis key that holds the lock called name.
func (l Lock[N]) Key(name N) string {
	if l.f.ns == "" {
		return ""
	}
	var buf [128]byte
	return string(l.f.appendKey(buf[:0], &name))
}

// String describes the lock family, as in "Lock:invoice".
func (l Lock[N]) String() string { return "Lock:" + l.f.ns }

func (l Lock[N]) entity() entity { return entity{kind: kindLock, ns: l.f.ns} }

// TryLock takes the lock called name if it is free and returns its token, or
// returns nil and no error if someone else holds it. It never waits for the
// lock. It sends one command, SET key token NX GET PX ttl, which sets the
// key as SET NX does and answers with what the key held before, so that a
// retry by the client after a dropped connection recognizes its own earlier
// success: a key that already holds this token counts as taken. A server
// older than Redis 7, which refuses that command, is sent a script that does
// the same, in one round trip once the DB has met the refusal.
//
// TryLock returns an error wrapping [ErrNotPermitted] without sending anything
// if db may not take this lock, ctx's error if ctx is done, and the client's
// error if Redis could not be reached.
func (l Lock[N]) TryLock(ctx context.Context, db DB, name N) (*Token, error) {
	if err := db.check(ctx, l.entity()); err != nil {
		return nil, err
	}
	t := newToken(db.c, l.Key(name), l.f.lease, l.f.ms)
	sent := time.Now()
	n, err := db.acquire(ctx, t, l.f.ms)
	if o, ok := db.c.(*wrapped); ok {
		o.acquired(l.entity(), "lock", n, err, sent)
	}
	if err != nil || n == 0 {
		if n != 0 { // taken, not replicated
			t.Release(context.WithoutCancel(ctx))
		}
		return nil, err
	}
	t.acquired(sent)
	return t, nil
}
