package recordfmt_test

import (
	"fmt"

	"github.com/wakuwaku-go/wakuwaku/internal/recordfmt"
)

// A record's key around its job's lease key, and its slot read.
func Example() {
	lease := "@@wakuwaku-entity:Lock:cron:report"
	fmt.Println(recordfmt.Key(lease))
	s := recordfmt.ParseSlot("s1|1700000000000|open|2|0|tok|en")
	fmt.Printf("%s at %s, %s after %s tries, lease %q\n", s.ID, s.At, s.State, s.Tries, s.Lease)
	// Output:
	// @@wakuwaku-cron:{@@wakuwaku-entity:Lock:cron:report}
	// s1 at 1700000000000, open after 2 tries, lease "tok|en"
}
