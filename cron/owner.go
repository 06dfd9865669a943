package cron

import (
	"crypto/sha256"
	"encoding/hex"
	"hash/fnv"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/wakuwaku-go/wakuwaku/interval"
)

// replicaGroup is one group's registry as this replica last read it,
// shared by the group's jobs.
type replicaGroup struct {
	live atomic.Pointer[liveView]
}

// liveView is the live replicas of a group, sorted, and until when the
// reading holds (a beat period and a half after it; then every replica
// claims at its ticks again until a beat gets through).
type liveView struct {
	replicas []string
	until    time.Time
}

// groupKey returns the registry key of the group of replicas that run the
// leased jobs names (sorted) on one Redis.
func groupKey(names []string) string {
	h := sha256.New()
	for _, n := range names {
		h.Write([]byte(n))
		h.Write([]byte{0})
	}
	return replicasPrefix + "{" + hex.EncodeToString(h.Sum(nil)[:8]) + "}"
}

// owns reports whether this replica, named replica, claims Cron slot
// slotKey of the job whose lease is name at its tick: it does when it is
// the slot's owner among the live replicas, and when it does not know
// them (no beat answered lately, or it is not among them).
func (g *replicaGroup) owns(replica, name, slotKey string, now time.Time) bool {
	if g == nil {
		return true
	}
	v := g.live.Load()
	if v == nil || now.After(v.until) || len(v.replicas) < 2 {
		return true
	}
	if _, mine := slices.BinarySearch(v.replicas, replica); !mine {
		return true
	}
	return owner(v.replicas, name, slotKey) == replica
}

// owner returns the replica of replicas that owns slot slotKey of the job
// whose lease is name: the one whose hash with the two is highest
// (rendezvous hashing), so that a replica that joins or leaves moves only
// its share of the slots.
func owner(replicas []string, name, slotKey string) string {
	var best string
	var top uint64
	for i, r := range replicas {
		h := fnv.New64a()
		h.Write([]byte(r))
		h.Write([]byte{0})
		h.Write([]byte(name))
		h.Write([]byte{0})
		h.Write([]byte(slotKey))
		if v := mix(h.Sum64()); i == 0 || v > top {
			best, top = r, v
		}
	}
	return best
}

// mix spreads a hash's bits (the finalizer of SplitMix64), since FNV's
// top bits barely change with a name's last bytes.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}

// lookGrace is how long after its tick a replica that does not own a Cron
// slot looks whether the owner claimed it: a tenth of the interval, from
// 50 ms to 2 s, so that an owner whose tick came a little late still
// claims first.
func lookGrace(base time.Duration) time.Duration {
	return min(max(base/10, 50*time.Millisecond), 2*time.Second)
}

// replicasPrefix begins the key of a group's registry: a sorted set of
// the replicas' names, each scored by the millisecond (of its own clock)
// until which it counts as live.
const replicasPrefix = "@@wakuwaku-cron:replicas:"

// slotNamed returns the slot of every whose key is id among the latest
// ones at now that a claim can still name (a Cron slot's claim window is
// two of its lengths, so the latest three).
func slotNamed(every interval.Interval, id string, now time.Time) (interval.Slot, bool) {
	until := now
	for range 3 {
		slot, ok := every.LatestSlot(until.Add(-366*24*time.Hour), until)
		if !ok {
			return interval.Slot{}, false
		}
		if key, _ := slot.Key(); key == id {
			return slot, true
		}
		until = slot.Start.Add(-time.Nanosecond)
	}
	return interval.Slot{}, false
}

// slotKey returns the key of t's Cron slot.
func slotKey(t *Tick) string {
	k, _ := t.Slot.Key()
	return k
}

// groupOf returns the group id of a registry key: its hash tag.
func groupOf(key string) string {
	g, _ := strings.CutPrefix(key, replicasPrefix)
	return strings.Trim(g, "{}")
}
