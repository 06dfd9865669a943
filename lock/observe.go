package lock

import (
	"context"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Event describes one lock operation that went to Redis, as a [DB] made with
// [WithObserver] reports it: an acquire, a release or an extension. Its
// fields are plain strings so that they can label metrics as they are.
type Event struct {
	// Kind is "Lock" or "RwLock", as in the keys.
	Kind string
	// Namespace is the lock family's namespace.
	Namespace string
	// Op is "lock" (Lock.TryLock and what builds on it), "read" or "write"
	// (RWLock.TryRead, TryWrite), "release" or "extend".
	Op string
	// Result is "acquired" or "busy" for an acquire; "released" or
	// "extended" when the token still held its lease; "lost" when its lease
	// had run out; "error" when Redis could not answer (see Err).
	Result string
	// Latency is how long the operation took, from before its command was
	// sent to its reply, a NOSCRIPT retry included.
	Latency time.Duration
	// Err is the operation's error when Result is "error", else nil.
	Err error
}

// DBOption configures a [DB] made by [NewDB].
type DBOption func(*dbConfig)

type dbConfig struct {
	observe  func(Event)
	replicas int
	wait     time.Duration
}

// WithObserver makes the DB call observe after every lock operation it, or a
// token it gave, sends to Redis: one [Event] per acquire, release and
// extension, batched ones included (one per name). Operations refused before
// anything was sent (a done context, [ErrNotPermitted]) and the read-only
// queries of a [ReadOnlyDB] are not reported. observe runs in the goroutine
// that made the operation, before the operation returns, so it must be quick
// and safe for concurrent use; metrics counters and histograms are. A nil
// observe is no observer. A DB without an observer pays nothing for the
// hook: no allocation and one type check per operation.
func WithObserver(observe func(Event)) DBOption {
	return func(c *dbConfig) { c.observe = observe }
}

// wrapped is the Client of a DB made with options: it forwards every
// command and carries the options (an observer, replicas to wait for), so
// that the DB and every token it gives reach them through the Client they
// already hold, and a DB or a token without options pays nothing (no field,
// one type check).
type wrapped struct {
	c        Client
	observe  func(Event) // nil: no observer
	replicas int         // replicas to WAIT for after an acquire or extension; 0: none
	waitMs   int64       // the WAIT's timeout
}

func (o *wrapped) Process(ctx context.Context, cmd redis.Cmder) error {
	return o.c.Process(ctx, cmd)
}

// unwrap returns the caller's own client beneath an observer.
func unwrap(c Client) Client {
	if o, ok := c.(*wrapped); ok {
		return o.c
	}
	return c
}

// acquired reports an acquire whose script answered n (0: busy).
func (o *wrapped) acquired(e entity, op string, n int64, err error, sent time.Time) {
	if o.observe == nil {
		return
	}
	result := "acquired"
	switch {
	case err != nil:
		result = "error"
	case n == 0:
		result = "busy"
	}
	o.observe(Event{Kind: e.kindName(), Namespace: e.ns, Op: op, Result: result, Latency: time.Since(sent), Err: err})
}

// settled reports a release (extend false) or an extension of the token
// holding key, from its key, which names its family.
func (o *wrapped) settled(key string, extend, held bool, err error, sent time.Time) {
	if o.observe == nil {
		return
	}
	ev := Event{Op: "release", Result: "released", Latency: time.Since(sent), Err: err}
	if extend {
		ev.Op, ev.Result = "extend", "extended"
	}
	switch {
	case err != nil:
		ev.Result = "error"
	case !held:
		ev.Result = "lost"
	}
	ev.Kind, ev.Namespace = familyOf(key)
	o.observe(ev)
}

// kindName is the kind segment of the family's keys.
func (e entity) kindName() string {
	if e.kind == kindRW {
		return "RwLock"
	}
	return "Lock"
}

// familyOf returns the kind and namespace of a key this package built: the
// namespace holds no ':', so it ends at the first one after the kind.
func familyOf(key string) (kind, ns string) {
	rest := strings.TrimPrefix(key, keyPrefix)
	switch {
	case strings.HasPrefix(rest, "Lock:"):
		kind, rest = "Lock", rest[len("Lock:"):]
	case strings.HasPrefix(rest, "RwLock:{"):
		kind, rest = "RwLock", rest[len("RwLock:{"):]
	}
	if i := strings.IndexByte(rest, ':'); i >= 0 {
		ns = rest[:i]
	}
	return kind, ns
}
