package lock

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// SlotOf exposes slotOf to the external tests, which check it against the
// rig's own slot function.
func SlotOf(key string) int { return int(slotOf(key)) }

// SetJitter makes the waits of Lock.Lock draw from a PCG seeded with seed,
// for a repeatable run, until the test ends.
func SetJitter(t interface{ Cleanup(func()) }, seed uint64) {
	old := jitter
	r := rand.New(rand.NewPCG(seed, seed))
	var mu sync.Mutex
	jitter = func(n time.Duration) time.Duration {
		mu.Lock()
		defer mu.Unlock()
		return time.Duration(r.Int64N(int64(n) + 1))
	}
	t.Cleanup(func() { jitter = old })
}

// FamilyOf exposes familyOf, which the observer uses to name a token's
// lock family from its key.
var FamilyOf = familyOf

// FenceKey exposes fenceKey, the key of a fenced lock's number.
var FenceKey = fenceKey

// ScriptAcquires returns a copy of db whose acquires send the script, as
// they do once the server refused SET … NX GET, for the benchmark that
// compares the two.
func ScriptAcquires(db DB) DB {
	db.script = new(atomic.Bool)
	db.script.Store(true)
	return db
}
