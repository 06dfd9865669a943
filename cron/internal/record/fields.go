package record

import "github.com/wakuwaku-go/wakuwaku/internal/recordfmt"

// The record's packed fields and its history's entries are read by
// package recordfmt, the one reading of the record's stored format, which
// the simulator's checks share with the runtime; these are its names as
// the runtime knows them.
type (
	// RunField is the record's run (recordfmt.RunField).
	RunField = recordfmt.RunField
	// Slot is the record's slot (recordfmt.Slot).
	Slot = recordfmt.Slot
	// Skip is the record's skip (recordfmt.Skip).
	Skip = recordfmt.Skip
	// Ended is a run that ended, as the record's last or fail holds it
	// (recordfmt.Ended).
	Ended = recordfmt.Ended
	// Mark is a field of two parts, ms|by: paused, want, seen
	// (recordfmt.Mark).
	Mark = recordfmt.Mark
	// Fields is a whole record, its packed fields read (recordfmt.Fields).
	Fields = recordfmt.Fields
	// Entry is one run of a job's history (recordfmt.Entry).
	Entry = recordfmt.Entry
)

// ParseSlot reads a slot field.
func ParseSlot(v string) Slot { return recordfmt.ParseSlot(v) }

// ParseSkip reads a skip field.
func ParseSkip(v string) Skip { return recordfmt.ParseSkip(v) }

// Parse reads a record's fields, as HGETALL answers them.
func Parse(f map[string]string) Fields { return recordfmt.Parse(f) }

// ParseHistory reads a history's entries, as LRANGE answers them, in
// their order, skipping any it can't read.
func ParseHistory(runs []string) []Entry { return recordfmt.ParseHistory(runs) }
