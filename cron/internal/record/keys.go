package record

import (
	"crypto/rand"
	"strings"
	"time"

	"github.com/wakuwaku-go/wakuwaku/internal/recordfmt"
	"github.com/wakuwaku-go/wakuwaku/lock"
)

// Namespace is the lock namespace of the leased jobs' leases, whose keys
// give the records theirs: the cron package's LeaseNamespace.
const Namespace = "cron"

// leaseKeys names the Redis keys of the jobs' leases.
var leaseKeys = lock.New[string](Namespace, time.Second)

// Prefix begins the key of every job record (recordfmt.Prefix). The
// record of the job whose lease name is n is
//
//	@@wakuwaku-cron:{@@wakuwaku-entity:Lock:cron:n}
//
// its hash tag being the Rust crate's lease key, so that on a Redis Cluster the
// record and that lease share a hash slot and one script acts on both.
const Prefix = recordfmt.Prefix

// RunNowChannel is the Pub/Sub channel on which a run-now request is
// announced, with the job's lease name as the message (PROTOCOL.md, R16).
const RunNowChannel = "@@wakuwaku-cron:run-now"

// Key returns the key of the record of the job whose lease is named
// name.
func Key(name string) string { return recordfmt.Key(leaseKeys.Key(name)) }

// HistoryKey returns the key of the history of the job whose lease is
// named name: a list in the record's hash slot.
func HistoryKey(name string) string { return recordfmt.HistoryKey(leaseKeys.Key(name)) }

// LeaseKey returns the key of the lease (the Rust crate's) of the job
// whose lease is named name, which holds a duration policy's slot.
func LeaseKey(name string) string { return leaseKeys.Key(name) }

// NameOf returns the job's lease name in a record's key.
func NameOf(key string) (string, bool) {
	lease, ok := recordfmt.LeaseOf(key)
	if !ok {
		return "", false
	}
	return strings.CutPrefix(lease, leaseKeys.Key(""))
}

// NewLeaseToken returns a token for the Rust crate's lease key: 16 random
// bytes, as package lock's tokens are.
func NewLeaseToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return string(b[:])
}
