package recordfmt

import "testing"

// TestKeys wraps lease keys in a record's and a history's key and reads
// the lease key back from the record's, braces and '|' included.
func TestKeys(t *testing.T) {
	for _, lease := range []string{"l", "", "a:b|c", "{x}"} {
		t.Run(lease, func(t *testing.T) {
			key := Key(lease)
			if got, ok := LeaseOf(key); !ok || got != lease {
				t.Errorf("LeaseOf(%q) = %q, %v, want %q, true", key, got, ok, lease)
			}
			if h := HistoryKey(lease); h != key+":runs" {
				t.Errorf("HistoryKey(%q) = %q, want %q", lease, h, key+":runs")
			}
		})
	}
}

// TestLeaseOfRefuses refuses the keys that are not a record's.
func TestLeaseOfRefuses(t *testing.T) {
	for _, key := range []string{"", "l", HistoryKey("l"), "@@wakuwaku-cron:run-now", Prefix + "l"} {
		if got, ok := LeaseOf(key); ok {
			t.Errorf("LeaseOf(%q) = %q, true, want false", key, got)
		}
	}
}
