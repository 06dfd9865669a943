package lock_test

import (
	"strings"
	"testing"
	"time"

	"github.com/wakuwaku-go/wakuwaku/internal/redistest"
	"github.com/wakuwaku-go/wakuwaku/lock"
)

// FuzzFamilyOf checks that the observer names the family of any token's key
// right, whatever bytes the name holds: a Lock's key, and an RWLock's
// writer and readers keys.
func FuzzFamilyOf(f *testing.F) {
	for _, s := range [][2]string{{"invoice", "42"}, {"a", ""}, {"ns", "x:y:z"}, {"ns", "{a}:b}"}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, ns, name string) {
		if ns == "" || strings.ContainsAny(ns, ":{}") {
			return
		}
		keys := map[string]string{lock.New[string](ns, time.Second).Key(name): "Lock"}
		w, r := lock.NewRW[string](ns, time.Second).Keys(name)
		keys[w], keys[r] = "RwLock", "RwLock"
		for key, kind := range keys {
			if k, n := lock.FamilyOf(key); k != kind || n != ns {
				t.Errorf("familyOf(%q) = %q, %q, want %q, %q", key, k, n, kind, ns)
			}
		}
	})
}

// FuzzFenceKeySlot checks that a fenced lock's number key shares its lock
// key's cluster hash slot for every name a fenced lock accepts (one without
// '}'), so that one script may touch both on a Redis Cluster.
func FuzzFenceKeySlot(f *testing.F) {
	for _, s := range []string{"a", "b{c", "{d", "x{", "{", "", "{}"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		key := lock.New[string]("fenced", time.Second).Key(name)
		if strings.Contains(key, "}") {
			return // refused by FencedLock.TryLock
		}
		if a, b := redistest.Slot(key), redistest.Slot(lock.FenceKey(key)); a != b {
			t.Errorf("slot of %q = %d, of its number key = %d", key, a, b)
		}
	})
}
