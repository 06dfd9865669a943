// Package recordfmt reads the stored format of a leased cron job's record
// (cron/PROTOCOL.md, the record): the layout of its keys around its job's
// lease key, its packed fields, and its history's entries. It is strings
// and JSON only and imports nothing of this module's, so that the record
// protocol's package (cron/internal/record), which the runtime and the
// operators' reads go through, and the simulator's checks
// (proof/internal/cronsim) read the record with the same code. The lease
// key itself is package lock's.
package recordfmt

import "strings"

// Prefix begins the key of every job record. A record's key is its job's
// lease key (package lock's) wrapped in Prefix and "}":
//
//	@@wakuwaku-cron:{<lease key>}
//
// so that the lease key is the record's hash tag, and on a Redis Cluster
// the record and that lease share a hash slot and one script acts on both.
const Prefix = "@@wakuwaku-cron:{"

// Key returns the key of the record of the job whose lease's key is
// lease.
func Key(lease string) string { return Prefix + lease + "}" }

// HistoryKey returns the key of the history of the job whose lease's key
// is lease: a list in the record's hash slot.
func HistoryKey(lease string) string { return Key(lease) + ":runs" }

// LeaseOf returns the lease key in a record's key, and false if key is not
// a record's (a history's key is not).
func LeaseOf(key string) (string, bool) {
	inner, ok := strings.CutPrefix(key, Prefix)
	if !ok {
		return "", false
	}
	return strings.CutSuffix(inner, "}")
}
