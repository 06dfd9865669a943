package fault

import "time"

// Now is the suite's clock: nanoseconds of the wall clock (CLOCK_REALTIME).
// Every process on the machine reads the same kernel clock, and so does
// redis-server for its expiry decisions, so times taken in different
// processes, and a key's expiry, can be compared directly. A step of the wall
// clock during a run would break the comparison; the suite assumes none
// happens (a test machine's clock is slewed, if anything, by a few parts per
// million).
func Now() int64 { return time.Now().UnixNano() }

// WallDeadline converts a deadline on this process's monotonic clock, such as
// [lock.Token.Deadline], to the suite's clock. The zero time stays 0.
func WallDeadline(d time.Time) int64 {
	if d.IsZero() {
		return 0
	}
	return Now() + int64(time.Until(d))
}

// LeaseDeadline is the end of a lease taken by a command sent at sent (on the
// suite's clock) with ttl, as its holder knows it: Redis starts the lease
// when it runs the command, which is after it was sent, and is given the TTL
// in whole milliseconds. The holder computes it from its own stamp, so the
// suite does not take the deadline from the library it tests; since every
// process reads the same clock, the deadline means the same instant to a
// [Resource] in another process, whenever the message carrying it arrives.
func LeaseDeadline(sent int64, ttl time.Duration) int64 {
	return sent + int64(ttl.Truncate(time.Millisecond))
}
