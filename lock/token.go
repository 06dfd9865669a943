package lock

import (
	"context"
	"crypto/rand"
	"errors"
	"sync"
	"time"
	"unsafe"
)

// tokenLen is the length of a token's random value, fixed by the layout shared
// with the Rust crate.
const tokenLen = 16

// errNilToken is returned by the methods of a nil token instead of a panic.
var errNilToken = errors.New("lock: nil token")

// lease is the state every token keeps: what it holds and until when it is
// surely held.
type lease struct {
	c     Client
	raw   [tokenLen]byte
	value string // raw's bytes, without a copy: raw never changes after init
	ttl   time.Duration
	ms    any // the TTL in whole ms, boxed

	mu       sync.Mutex
	deadline time.Time // when the last successful acquire or extend was sent, plus ttl
}

func (l *lease) init(c Client, ttl time.Duration, ms any) {
	rand.Read(l.raw[:]) // never fails: see crypto/rand.Read
	l.value = unsafe.String(&l.raw[0], tokenLen)
	l.c, l.ttl, l.ms = c, ttl, ms
}

// held records that the lease, acquired or extended by a command sent at sent,
// lasts at least until sent+ttl. Measured on the monotonic clock from before
// the command went out, this is never later than the lease's real end.
func (l *lease) held(sent time.Time) {
	d := sent.Add(l.ttl)
	l.mu.Lock()
	if d.After(l.deadline) {
		l.deadline = d
	}
	l.mu.Unlock()
}

func (l *lease) lost() {
	l.mu.Lock()
	l.deadline = time.Time{}
	l.mu.Unlock()
}

func (l *lease) getDeadline() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.deadline
}

// Token is the proof of holding a [Lock], or the write side of an [RWLock],
// and the only way to release or extend it. Its methods are safe for
// concurrent use. A nil *Token's methods return an error.
//
// Dropping a Token does not release the lock; its lease runs out instead.
type Token struct {
	lease
	key string
}

func newToken(c Client, key string, ttl time.Duration, ms any) *Token {
	t := &Token{key: key}
	t.init(c, ttl, ms)
	return t
}

// Key returns the Redis key the token holds.
func (t *Token) Key() string {
	if t == nil {
		return ""
	}
	return t.key
}

// TTL returns the length of the token's lease.
func (t *Token) TTL() time.Duration {
	if t == nil {
		return 0
	}
	return t.ttl
}

// Deadline returns the time until which the lease is surely held, measured on
// this process's monotonic clock from when the last successful acquire or
// extend was sent. It is the zero time once Release or Extend has reported the
// lease lost.
func (t *Token) Deadline() time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.getDeadline()
}

// Release deletes the lock if this token still holds it. It reports true if
// it did, and false if the lease had already run out, in which case someone
// else may have held the lock in the meantime and still hold it: their key is
// left alone. One round trip.
func (t *Token) Release(ctx context.Context) (bool, error) {
	if t == nil {
		return false, errNilToken
	}
	return t.do(ctx, unlock, nil)
}

// Extend restarts the lease for another TTL if this token still holds the
// lock. It reports true if it did, and false if the lease had already run out;
// a lost lease is never recreated. One round trip.
func (t *Token) Extend(ctx context.Context) (bool, error) {
	if t == nil {
		return false, errNilToken
	}
	return t.do(ctx, extend, t.ms)
}

func (t *Token) do(ctx context.Context, s script, ms any) (bool, error) {
	return t.lease.do(ctx, s, &t.key, nil, ms)
}

// do runs s on the lease's keys (key2 may be nil), with the lease's TTL in ms
// when it extends (ms != nil), and records what the answer says about the
// lease. The keys point into the token, which never changes them.
func (l *lease) do(ctx context.Context, s script, key1, key2 *string, ms any) (bool, error) {
	if l.c == nil {
		return false, ErrNoClient
	}
	if err := ctx.Err(); err != nil {
		return false, err
	}
	sent := time.Now()
	n, err := s.run(ctx, l.c, key1, key2, &l.value, ms)
	switch {
	case err != nil:
		return false, err
	case n != 0 && ms != nil:
		l.held(sent)
	default: // released, or found lost
		l.lost()
	}
	return n != 0, nil
}
