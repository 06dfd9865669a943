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

// ErrNilToken is returned, without sending anything, by the methods of a nil
// *[Token] or *[ReadToken] and by [WhileHeld] given one: a nil token is what
// an acquire returns when the lock is busy, so it holds nothing.
var ErrNilToken = errors.New("lock: nil token")

// lease is the state every token keeps: what it holds and until when it is
// surely held.
//
// Operations on one token may run concurrently, and Redis may run them in
// one order while their replies come back in another. So each operation is
// numbered when it is sent, and a reply that finds the lease held moves the
// deadline only if no later operation has settled it already. An answer
// that the lease is gone (a release, or an extension that found it lost) is
// final: the token never holds the lock again.
type lease struct {
	c     Client
	raw   [tokenLen]byte
	value string        // raw's bytes, without a copy: raw never changes after init
	ttl   time.Duration // the TTL Redis is given: whole ms, at least 1
	ms    any           // ttl in whole ms, boxed

	mu       sync.Mutex
	deadline time.Time // send time of the settled acquire or extension, plus ttl; zero once ended
	issued   uint64    // operations sent so far; each is numbered by this count
	settled  uint64    // the number of the operation that set deadline
	ended    bool      // released, or found lost: deadline stays zero
}

func (l *lease) init(c Client, ttl time.Duration, ms any) {
	rand.Read(l.raw[:]) // never fails: see crypto/rand.Read
	l.value = unsafe.String(&l.raw[0], tokenLen)
	l.c, l.ttl, l.ms = c, ttl, ms
}

// acquired records that the acquire sent at sent took the lock: it is held
// at least until sent+ttl. Measured on the monotonic clock from before the
// command went out, with the TTL Redis was given, this is never later than
// the lease's real end. It runs before the token is shared, so it needs no
// lock.
func (l *lease) acquired(sent time.Time) {
	l.issued, l.settled = 1, 1
	l.deadline = sent.Add(l.ttl)
}

// begin numbers an operation about to be sent and returns its number and
// send time. A release ends the lease as soon as it is sent, since Redis may
// delete the key at any moment from then on.
func (l *lease) begin(release bool) (seq uint64, sent time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.issued++
	if release {
		l.ended, l.deadline = true, time.Time{}
	}
	return l.issued, time.Now()
}

// settle records the reply to operation seq, sent at sent: whether it found
// the lease held (and extended it) or gone.
func (l *lease) settle(seq uint64, sent time.Time, held bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case !held:
		l.ended, l.deadline = true, time.Time{}
	case l.ended || seq < l.settled:
		// A later operation has settled the lease already.
	default:
		l.settled, l.deadline = seq, sent.Add(l.ttl)
	}
}

func (l *lease) getDeadline() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.deadline
}

// Token is the proof of holding a [Lock], or the write side of an [RWLock],
// and the only way to release or extend it. Its methods are safe for
// concurrent use. A nil *Token's methods return [ErrNilToken].
//
// Dropping a Token does not release the lock; its lease runs out instead.
type Token struct {
	lease
	key string
	// argv holds the acquire's command while it is sent, so that the
	// command's arguments cost no allocation of their own.
	argv [7]any
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

// TTL returns the length of the token's lease: its lock's TTL as Redis is
// given it, in whole milliseconds and at least one.
func (t *Token) TTL() time.Duration {
	if t == nil {
		return 0
	}
	return t.ttl
}

// Deadline returns the time until which the lease is surely held: when the
// latest successful acquire or extension was sent, on this process's
// monotonic clock, plus [Token.TTL]. It is the zero time for good once
// Release has been sent or Extend has reported the lease lost. A reply never
// overrides what a later operation settled: when an Extend and a Release run
// concurrently, Extend's late reply leaves it zero.
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
		return false, ErrNilToken
	}
	return t.do(ctx, unlock, nil)
}

// Extend restarts the lease for another TTL if this token still holds the
// lock. It reports true if it did, and false if the lease had already run out;
// a lost lease is never recreated. One round trip.
func (t *Token) Extend(ctx context.Context) (bool, error) {
	if t == nil {
		return false, ErrNilToken
	}
	return t.do(ctx, extend, t.ms)
}

func (t *Token) do(ctx context.Context, s script, ms any) (bool, error) {
	return t.lease.do(ctx, s, &t.key, nil, ms)
}

// do runs s on the lease's keys (key2 may be nil), with the lease's TTL in ms
// when it extends (ms != nil) and releasing otherwise, and records what the
// answer says about the lease. The keys point into the token, which never
// changes them.
func (l *lease) do(ctx context.Context, s script, key1, key2 *string, ms any) (bool, error) {
	if l.c == nil {
		return false, ErrNoClient
	}
	if err := ctx.Err(); err != nil {
		return false, err
	}
	seq, sent := l.begin(ms == nil)
	n, err := s.run(ctx, l.c, key1, key2, &l.value, ms)
	if o, ok := l.c.(*wrapped); ok {
		o.settled(*key1, ms != nil, n != 0, err, sent)
	}
	if err != nil {
		return false, err
	}
	l.settle(seq, sent, n != 0 && ms != nil)
	return n != 0, nil
}
