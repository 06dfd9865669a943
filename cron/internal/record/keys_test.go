package record

import (
	"testing"
	"time"

	"github.com/wakuwaku-go/wakuwaku/internal/recordfmt"
	"github.com/wakuwaku-go/wakuwaku/lock"
)

// TestNameOf reads a job's lease name back from its record's key, and
// refuses a history's key and the record of a lease in another namespace.
func TestNameOf(t *testing.T) {
	for _, name := range []string{"report", "", "a:b|c"} {
		if got, ok := NameOf(Key(name)); !ok || got != name {
			t.Errorf("NameOf(Key(%q)) = %q, %v, want %q, true", name, got, ok, name)
		}
		if got, ok := NameOf(HistoryKey(name)); ok {
			t.Errorf("NameOf(HistoryKey(%q)) = %q, true, want false", name, got)
		}
	}
	other := recordfmt.Key(lock.New[string]("invoice", time.Second).Key("42"))
	if got, ok := NameOf(other); ok {
		t.Errorf("NameOf(%q) = %q, true, want false", other, got)
	}
}
