package main

import (
	"fmt"
	"strings"

	"github.com/wakuwaku-go/wakuwaku/cron"
	"github.com/wakuwaku-go/wakuwaku/internal/recordfmt"
)

// The prefixes of the keys the library keeps: locks (and a FencedLock's
// counter) under entityPrefix, in the Rust crate's layout; the leased cron
// jobs' records under recordPrefix.
const (
	entityPrefix = "@@wakuwaku-entity:"
	recordPrefix = recordfmt.Prefix
)

// The roles of an RwLock's two keys.
const (
	roleWriter  = "w"
	roleReaders = "r"
)

// lockKey is a lock's key, read: a Lock's, or one of an RwLock's two.
type lockKey struct {
	key       string
	kind      string // "Lock" or "RwLock"
	namespace string
	name      string
	role      string // an RwLock's: roleWriter or roleReaders; "" for a Lock
}

// parseLockKey reads the key of a Lock
// (@@wakuwaku-entity:Lock:<namespace>:<name>) or of an RwLock's writer or
// readers (@@wakuwaku-entity:RwLock:{<namespace>:<name>}:w or :r). Any
// other key is refused with an error that says what it is, when it is one
// of the library's: a FencedLock's counter, a cron job's record.
func parseLockKey(key string) (lockKey, error) {
	if rest, ok := strings.CutPrefix(key, recordPrefix); ok {
		job := strings.TrimSuffix(strings.TrimPrefix(rest, entityPrefix+"Lock:"+cron.LeaseNamespace+":"), "}")
		return lockKey{}, fmt.Errorf("%q is the record of the cron job %s, not a lock: it expires by itself; pause, resume or run the job instead", key, printable(job))
	}
	rest, ok := strings.CutPrefix(key, entityPrefix)
	if !ok {
		return lockKey{}, fmt.Errorf("%q is not a lock's key: a Lock's begins %sLock:, an RwLock's %sRwLock:{", key, entityPrefix, entityPrefix)
	}
	kind, rest, _ := strings.Cut(rest, ":")
	k := lockKey{key: key, kind: kind}
	switch kind {
	case "Lock":
		k.namespace, k.name, ok = strings.Cut(rest, ":")
	case "RwLock":
		var inner string
		if i := strings.LastIndex(rest, "}:"); i > 0 && rest[0] == '{' {
			inner, k.role = rest[1:i], rest[i+2:]
		}
		k.namespace, k.name, ok = strings.Cut(inner, ":")
		if k.role != roleWriter && k.role != roleReaders {
			return lockKey{}, fmt.Errorf("%q is not an RwLock's key: they end in }:w (the writer) or }:r (the readers)", key)
		}
	case "LockFence":
		lockOf := strings.TrimSuffix(strings.TrimPrefix(rest, "{"), "}")
		return lockKey{}, fmt.Errorf("%q is a FencedLock's counter, not a lock: deleting it could hand a later holder a smaller fencing number; release its lock %q instead", key, lockOf)
	default:
		return lockKey{}, fmt.Errorf("%q is not a lock's key: kind %q, want Lock or RwLock", key, kind)
	}
	if !ok || k.namespace == "" || strings.ContainsAny(k.namespace, "{}") {
		return lockKey{}, fmt.Errorf("%q is not a %s's key: no valid namespace in it", key, kind)
	}
	return k, nil
}

// String names the lock in its own terms: "the lock 42 in namespace
// invoice", "the write lock of books in namespace catalog (an RwLock)".
func (k lockKey) String() string {
	var s string
	switch k.role {
	case "":
		s = fmt.Sprintf("the lock %s in namespace %s", printable(k.name), k.namespace)
	case roleWriter:
		s = fmt.Sprintf("the write lock of %s in namespace %s (an RwLock)", printable(k.name), k.namespace)
	default:
		s = fmt.Sprintf("the read locks of %s in namespace %s (an RwLock)", printable(k.name), k.namespace)
	}
	if k.kind == "Lock" && k.namespace == cron.LeaseNamespace {
		s += " (the cron runtime's lease of the job " + printable(k.name) + ")"
	}
	return s
}
