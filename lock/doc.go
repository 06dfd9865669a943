// Package lock provides lease locks on Redis: Lock, with at most one holder per
// name, and RWLock, with one writer or any number of readers per name.
//
// Both are leases. A holder keeps the lock until it releases it or the lock's
// TTL runs out, so a crashed or partitioned holder can never block the others
// for longer than one TTL.
//
// # Acquiring never waits
//
// [Lock.TryLock], [RWLock.TryRead] and [RWLock.TryWrite] send one command and
// return at once: a token when the lock was free, nil when someone else holds
// it. Busy is a result, not an error; the caller decides whether to give up,
// retry later or report that the work is already being done elsewhere.
//
// A token is the proof of holding the lock and the only way to release or
// extend it. [Token.Release] and [Token.Extend] report true when the token
// still held the lock and false when its lease had already run out, in which
// case another holder may have taken the lock in the meantime. Dropping a token
// does not release the lock: the lease runs out instead.
//
// # Redis layout
//
// The keys are the same as those of the Rust wakuwaku crate, so services in
// either language share locks:
//
//	@@wakuwaku-entity:Lock:<namespace>:<name>        string: the holder's 16 random bytes
//	@@wakuwaku-entity:RwLock:{<namespace>:<name>}:w  string: the writer's 16 random bytes
//	@@wakuwaku-entity:RwLock:{<namespace>:<name>}:r  sorted set: reader tokens scored by
//	                                                 the end of their lease (ms, server clock)
//
// The two keys of an RWLock share a Redis Cluster hash slot, so one script can
// act on both. Every operation is a Lua script sent by SHA (EVALSHA), re-sent in
// full only when the server has lost its script cache, so every operation is
// one round trip. Acquiring a Lock sets the key as SET key token NX PX ttl
// would, and also succeeds when the key already holds this very token: after a
// dropped connection, go-redis retries a command whose reply was lost, and the
// retry must hand the caller the lock its first attempt took, not report it
// busy. The scripts work on Redis 5 and later; on Redis 7 and later the
// acquire script reads and sets the key in one command (SET … NX GET). The
// tests run on 7, and on miniredis, which takes the older path.
//
// # What a lease can't guarantee
//
// A lease bounds what the lock protects. A process that stalls (a long garbage
// collection, a frozen VM, a network partition) may resume after its lease ran
// out and someone else took the lock, and then keep writing as if it still held
// it. Extending the lease, by hand or with [WhileHeld], narrows that window but
// cannot close it.
//
// When a stale holder's write must be impossible rather than unlikely, make the
// protected resource refuse it with a fencing value it checks itself. The token
// is random, not increasing, so it cannot serve as a fencing token; use a value
// from the resource, such as a version column that the write checks
// (UPDATE … SET …, version = version + 1 WHERE id = $1 AND version = $expected),
// or a transaction that re-reads the state it decided on.
//
// # Capabilities
//
// Every lock operation writes to Redis, TryRead included. Operations take a
// [Db], which may take every lock, or only some after [Db.Only]. A
// [ReadOnlyDb], such as one on a replica, is a distinct type that no lock
// operation accepts, so passing it does not compile.
package lock
