package record

import (
	"context"
	"testing"

	"github.com/wakuwaku-go/wakuwaku/internal/redistest"
)

// TestSlotPatternKeepsLeaseBytes: a duration policy's lease token, the
// last part of the slot field, is 16 random bytes, any of which may be '|',
// a newline or a zero byte (one slot in 16 has a '|'); the claim's pattern
// gives it back whole, or the claim would not know its own lease (D2).
func TestSlotPatternKeepsLeaseBytes(t *testing.T) {
	rdb := redistest.Start(t).Client(t)
	script := packPatterns + `
local id, at, state, tries, retry, lease = string.match(ARGV[1] .. '|1|open|1|0|' .. ARGV[2], slotPat)
return {id, lease}`
	for _, lease := range []string{"", "a|\x00\n|b\xff", string([]byte{'|', '|', 0, 0xff}), NewLeaseToken()} {
		got, err := rdb.Eval(context.Background(), script, nil, "1764946800000", lease).StringSlice()
		if err != nil || len(got) != 2 || got[0] != "1764946800000" || got[1] != lease {
			t.Errorf("slot with lease %q read back as %q, %v", lease, got, err)
		}
	}
}
