package lock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"

	"github.com/redis/go-redis/v9"

	"github.com/wakuwaku-go/wakuwaku/internal/redisscript"
	"github.com/wakuwaku-go/wakuwaku/internal/typednil"
)

// ErrNotPermitted is returned, wrapped, by an operation on a lock that its [DB]
// may not take (see [DB.Only]). Nothing is sent to Redis.
var ErrNotPermitted = errors.New("lock: not permitted by this DB")

// ErrNoClient is returned by an operation on a [DB] or token that has no Redis
// client: the zero DB, or one built from a nil client. For a DB built from a
// typed nil, such as a (*redis.Client)(nil), the error wraps it and names the
// type.
var ErrNoClient = errors.New("lock: no redis client")

// ErrZeroLock is returned by an operation on the zero value of [Lock] or
// [RWLock], which has no namespace; build locks with [New] and friends.
var ErrZeroLock = errors.New("lock: zero lock value (use New, NewFunc, NewRW or NewRWFunc)")

// Client is what a [DB] needs from Redis: a way to send one command and read
// its reply. Every go-redis client satisfies it: *redis.Client,
// *redis.ClusterClient, the failover clients from redis.NewFailoverClient and
// redis.NewFailoverClusterClient, *redis.Ring and redis.UniversalClient.
type Client interface {
	Process(ctx context.Context, cmd redis.Cmder) error
}

// DB is a handle on Redis that may take locks: every lock, or, after
// [DB.Only], only some. It is a small value, safe to copy and to use from
// many goroutines; it does not own the client and never closes it.
//
// The zero DB has no client: its operations return [ErrNoClient].
type DB struct {
	c     Client
	only  bool     // whether allow restricts the locks this DB may take
	allow []entity // sorted; shared between copies, never modified
	// nilType is the type of the typed nil NewDB was given as its client,
	// such as "*redis.Client", for ErrNoClient to name; c is then nil.
	nilType string
	// script is set once the server refused the acquire's SET … NX GET
	// (a server older than Redis 7): acquires send lockScript from then on.
	// NewDB makes it; the DBs narrowed from a DB share it.
	script *atomic.Bool
}

// NewDB returns a DB that may take every lock, over c. A go-redis
// UniversalClient, cluster or failover client fits; see [Client]. A nil c,
// or a nil pointer such as a (*redis.Client)(nil), makes a DB without a
// client, whose operations return [ErrNoClient]. The options, such as
// [WithObserver], apply to the DB, to every DB narrowed from it and to every
// token it gives.
func NewDB(c Client, opts ...DBOption) DB {
	c, nilType := clientOrNil(c)
	var cfg dbConfig
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	if c != nil && (cfg.observe != nil || cfg.replicas > 0) {
		c = &wrapped{c: c, observe: cfg.observe, replicas: cfg.replicas, waitMs: ttlMillis(cfg.wait)}
	}
	return DB{c: c, nilType: nilType, script: new(atomic.Bool)}
}

// clientOrNil turns an interface holding a nil pointer (or other nil value)
// into a nil interface and the nil's type, so that a nil *redis.Client passed
// by mistake yields an ErrNoClient that names it, not a panic.
func clientOrNil(c Client) (Client, string) {
	switch {
	case c == nil:
		return nil, ""
	case typednil.Is(c):
		return nil, fmt.Sprintf("%T", c)
	}
	return c, ""
}

// Ping sends PING to Redis through d's client and returns nil once Redis
// answers. Nothing else talks to Redis before a lock is taken, and a cron
// runtime takes its first lease in a run's goroutine, so a service that
// wants to fail fast when Redis is unreachable calls Ping, with a deadline,
// before it starts its jobs.
//
// Ping returns [ErrNoClient] for a DB without a client, and otherwise the
// client's error or ctx's, wrapped: errors.Is(err, syscall.ECONNREFUSED)
// for a port nothing listens on, context.DeadlineExceeded if the client's
// retries outlast ctx. go-redis applies ctx's deadline to the connection's
// reads only with ContextTimeoutEnabled; without it, a Redis that accepts
// connections but does not answer holds Ping until the client's
// ReadTimeout. Ping takes no lock, so any DB may ping, even one narrowed by
// [DB.Only] to no lock.
func (d DB) Ping(ctx context.Context) error {
	if d.c == nil {
		return ErrNoClient
	}
	cmd := redis.NewStatusCmd(ctx, "ping")
	if err := process(ctx, d.c, cmd); err != nil {
		return fmt.Errorf("lock: ping redis: %w", err)
	}
	return nil
}

// Entity is a lock family as a capability names it: a [Lock] or an [RWLock].
// Only values built by this package implement it.
type Entity interface {
	entity() entity
	String() string
}

type kind uint8

const (
	kindLock kind = iota + 1
	kindRW
)

// entity identifies a lock family by the keys it writes: two Lock values with
// one namespace are the same family, whatever their name types.
type entity struct {
	kind kind
	ns   string
}

// String describes the family as its Lock or RWLock does: "Lock:invoice".
func (e entity) String() string {
	if e.kind == kindRW {
		return "RwLock:" + e.ns
	}
	return "Lock:" + e.ns
}

func compareEntity(a, b entity) int {
	if a.kind != b.kind {
		return int(a.kind) - int(b.kind)
	}
	switch {
	case a.ns < b.ns:
		return -1
	case a.ns > b.ns:
		return 1
	}
	return 0
}

// Only returns a DB over the same client that may take only the given locks,
// and only those that d itself may take: narrowing never widens. Any other lock
// is refused with an error wrapping [ErrNotPermitted] before a command is sent.
// Locks are told apart by kind and namespace. Only with no arguments returns a
// DB that may take no lock.
func (d DB) Only(locks ...Entity) DB {
	allow := make([]entity, 0, len(locks))
	for _, l := range locks {
		if l == nil {
			continue
		}
		e := l.entity()
		if d.permits(e) {
			allow = append(allow, e)
		}
	}
	slices.SortFunc(allow, compareEntity)
	return DB{c: d.c, only: true, allow: slices.CompactFunc(allow, func(a, b entity) bool { return a == b }), nilType: d.nilType, script: d.script}
}

// ReadOnly returns a read-only handle over the same client. No lock operation
// accepts a ReadOnlyDB.
func (d DB) ReadOnly() ReadOnlyDB { return ReadOnlyDB{c: d.c} }

// Permits reports whether d may take the locks of l.
func (d DB) Permits(l Entity) bool { return l != nil && d.permits(l.entity()) }

func (d DB) permits(e entity) bool {
	if !d.only {
		return true
	}
	_, ok := slices.BinarySearchFunc(d.allow, e, compareEntity)
	return ok
}

// check returns why an operation on the lock family e can't be sent: a zero
// lock, a missing client, a refused capability or a done context. It takes
// the entity, not the Lock or RWLock, because turning those into an Entity
// would cost every acquire an allocation.
func (d DB) check(ctx context.Context, e entity) error {
	switch {
	case e.ns == "":
		return ErrZeroLock
	case d.c == nil && d.nilType != "":
		return fmt.Errorf("%w: the DB's client is a nil %s", ErrNoClient, d.nilType)
	case d.c == nil:
		return ErrNoClient
	case !d.permits(e):
		return fmt.Errorf("%w: %s", ErrNotPermitted, e)
	}
	return ctx.Err()
}

// ReadOnlyDB is a handle on Redis for queries that write nothing, such as a
// client of a replica. It is a distinct type from [DB], with no conversion
// between them, so that passing it to a lock operation does not compile.
// The zero ReadOnlyDB has no client.
type ReadOnlyDB struct {
	c Client
}

// NewReadOnlyDB returns a read-only handle over c.
func NewReadOnlyDB(c Client) ReadOnlyDB {
	c, _ = clientOrNil(c)
	return ReadOnlyDB{c: c}
}

func init() {
	redisscript.ClientOf = func(db any, namespace string) (redisscript.Client, error) {
		switch d := db.(type) {
		case DB:
			if err := d.check(context.Background(), entity{kind: kindLock, ns: namespace}); err != nil {
				return nil, err
			}
			return unwrap(d.c), nil
		case ReadOnlyDB:
			if d.c == nil {
				return nil, ErrNoClient
			}
			return unwrap(d.c), nil
		}
		return nil, fmt.Errorf("lock: %T is not a DB", db)
	}
	redisscript.ReplicationOf = func(db any) redisscript.Replication {
		if d, ok := db.(DB); ok {
			if w, ok := d.c.(*wrapped); ok && w.replicas > 0 {
				return redisscript.Replication{N: w.replicas, WaitMs: w.waitMs}
			}
		}
		return redisscript.Replication{}
	}
}
