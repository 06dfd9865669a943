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
// # Beyond TryLock
//
// The primitives above stay what they are; these build on them, each opt-in:
//
//   - [Lock.TryLockMany], [ReleaseMany] and [ExtendMany] act on many names,
//     each on its own, in one round trip per Redis node;
//   - [Lock.Lock] waits for a busy lock until its context ends, with the
//     back-off of a [Backoff] between attempts;
//   - [Lock.Fenced] numbers the holders of a name in order, for the
//     protected resource to refuse a stale holder's writes ([FencedLock]);
//   - [WithReplicas] makes acquires and extensions wait until replicas have
//     them, so that a failover does not hand a lock out twice;
//   - [Lock.Held] and [RWLock.Inspect] tell who holds a name, and for how
//     long, on a [ReadOnlyDB];
//   - [WithObserver] reports every lock operation, for metrics.
//
// # Redis layout
//
// The keys are those of the Rust wakuwaku crate, so services in either
// language share locks, and every operation is one round trip. The manual's
// [Redis layout] lists the keys and what the scripts do.
//
// # What a lease can't guarantee
//
// A lease bounds what the lock protects: a holder that stalls past its lease
// may keep writing after another took the lock. Extending the lease, by hand
// or with [WhileHeld], narrows that window but cannot close it, and the
// token is random, not increasing, so it cannot fence; a [FencedLock]'s
// number can. The manual's [What a lease can't guarantee] says how to make a
// stale write impossible.
//
// # Capabilities
//
// Every lock operation writes to Redis, TryRead included. Operations take a
// [DB], which may take every lock, or only some after [DB.Only]. A
// [ReadOnlyDB], such as one on a replica, is a distinct type that no lock
// operation accepts, so passing it does not compile.
//
// [Redis layout]: https://github.com/wakuwaku-go/wakuwaku/blob/main/docs/redis-layout.md
// [What a lease can't guarantee]: https://github.com/wakuwaku-go/wakuwaku/blob/main/docs/locks.md#what-a-lease-cant-guarantee
package lock
