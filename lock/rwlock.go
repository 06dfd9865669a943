package lock

import (
	"context"
	"time"
)

// RWLock is a family of reader-writer locks, one per name: either one writer
// or any number of readers hold a name at a time. Every reader has a lease of
// its own, so a reader that crashed stops blocking writers once its lease ends.
//
// Readers don't wait for a writer that is trying, and a writer can only take a
// name that no reader holds: a steady stream of overlapping readers can starve
// writers for as long as it lasts. When writes must get through, make readers
// short or have writers announce themselves through a separate [Lock] that
// readers check first.
//
// Like [Lock], an RWLock is an immutable value holding no connection, safe for
// concurrent use. The zero value is not usable; build one with [NewRW] or
// [NewRWFunc].
type RWLock[N any] struct {
	f family[N]
}

// NewRW returns the RWLock family for namespace with the given lease TTL,
// encoding names as [New] does. It panics where New does.
func NewRW[N Name](namespace string, ttl time.Duration) RWLock[N] {
	return RWLock[N]{newFamily[N]("NewRW", namespace, ttl, "RwLock", "{").withKind()}
}

// NewRWFunc is like [NewRW] with a caller's name encoder, as for [NewFunc]. It
// panics where NewFunc does.
func NewRWFunc[N any](namespace string, ttl time.Duration, name func(N) string) RWLock[N] {
	return RWLock[N]{newFamily[N]("NewRWFunc", namespace, ttl, "RwLock", "{").withFunc("NewRWFunc", name)}
}

// Namespace returns the namespace the RWLock was built with.
func (l RWLock[N]) Namespace() string { return l.f.ns }

// TTL returns the length of a lease, a reader's or the writer's.
func (l RWLock[N]) TTL() time.Duration { return l.f.ttl }

// String describes the lock family, as in "RwLock:catalog".
func (l RWLock[N]) String() string { return "RwLock:" + l.f.ns }

func (l RWLock[N]) entity() entity { return entity{kind: kindRW, ns: l.f.ns} }

// Keys returns the two Redis keys of the lock called name: the writer's string
// and the readers' sorted set. They always share a Redis Cluster hash slot,
// since the hash tag starts before the namespace, which holds no '}'.
func (l RWLock[N]) Keys(name N) (writer, readers string) {
	if l.f.ns == "" {
		return "", ""
	}
	var buf [128]byte
	b := append(l.f.appendKey(buf[:0], &name), "}:w"...)
	writer = string(b)
	b[len(b)-1] = 'r'
	return writer, string(b)
}

// TryRead takes a read lease on name unless a writer holds it, and returns its
// token, or nil and no error if a writer holds it. Other readers don't stand in
// its way. One round trip; errors as for [Lock.TryLock].
func (l RWLock[N]) TryRead(ctx context.Context, db DB, name N) (*ReadToken, error) {
	if err := db.check(ctx, l.entity()); err != nil {
		return nil, err
	}
	t := &ReadToken{}
	t.w, t.r = l.Keys(name)
	t.init(db.c, l.f.lease, l.f.ms)
	sent := time.Now()
	n, err := readLock.run(ctx, db.c, &t.w, &t.r, &t.value, l.f.ms)
	if o, ok := db.c.(*wrapped); ok {
		o.acquired(l.entity(), "read", n, err, sent)
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

// TryWrite takes the write lease on name if neither a writer nor a reader
// whose lease has not ended holds it, and returns its token, or nil and no
// error otherwise. The token is the same type as a [Lock]'s and is released
// and extended the same way. One round trip; errors as for [Lock.TryLock].
func (l RWLock[N]) TryWrite(ctx context.Context, db DB, name N) (*Token, error) {
	if err := db.check(ctx, l.entity()); err != nil {
		return nil, err
	}
	w, r := l.Keys(name)
	t := newToken(db.c, w, l.f.lease, l.f.ms)
	sent := time.Now()
	n, err := writeLock.run(ctx, db.c, &t.key, &r, &t.value, l.f.ms)
	if o, ok := db.c.(*wrapped); ok {
		o.acquired(l.entity(), "write", n, err, sent)
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

// ReadToken is the proof of holding a read lease on an [RWLock] name, and the
// only way to release or extend it. Its methods are safe for concurrent use. A
// nil *ReadToken's methods return [ErrNilToken].
//
// Dropping a ReadToken does not release the lease; it runs out instead.
type ReadToken struct {
	lease
	w, r string
}

// TTL returns the length of the token's lease, as for [Token.TTL].
func (t *ReadToken) TTL() time.Duration {
	if t == nil {
		return 0
	}
	return t.ttl
}

// Deadline returns the time until which the read lease is surely held, as for
// [Token.Deadline]: zero for good once Release has been sent or Extend has
// reported the lease ended.
func (t *ReadToken) Deadline() time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.getDeadline()
}

// Release ends the read lease. It reports true if the lease had not ended, and
// false if it had (writers may have held the name since). One round trip.
func (t *ReadToken) Release(ctx context.Context) (bool, error) {
	if t == nil {
		return false, ErrNilToken
	}
	return t.do(ctx, readUnlock, nil)
}

// Extend restarts the read lease for another TTL if it has not ended. It
// reports true if it did, false if the lease had ended. One round trip.
func (t *ReadToken) Extend(ctx context.Context) (bool, error) {
	if t == nil {
		return false, ErrNilToken
	}
	return t.do(ctx, readExtend, t.ms)
}

// do runs s on the readers' set alone. A reader's release and extension touch
// nothing else, and declaring the writer's key too would make them fail while
// a Redis Cluster migrates the name's slot: Redis refuses (TRYAGAIN) a
// command whose keys are not all present on the node, and the writer's key
// usually does not exist while readers hold the name.
func (t *ReadToken) do(ctx context.Context, s script, ms any) (bool, error) {
	return t.lease.do(ctx, s, &t.r, nil, ms)
}
