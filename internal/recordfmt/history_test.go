package recordfmt

import "testing"

// TestParseHistory skips an entry it can't read and keeps the others in
// order.
func TestParseHistory(t *testing.T) {
	got := ParseHistory([]string{`{"slot":"s2","outcome":"ok"}`, `not json`, `{"slot":"s1","outcome":"skipped","reason":"paused"}`})
	if len(got) != 2 || got[0].Slot != "s2" || got[1].Slot != "s1" || got[1].Reason != "paused" {
		t.Errorf("ParseHistory = %+v; want s2's entry, then s1's", got)
	}
}
