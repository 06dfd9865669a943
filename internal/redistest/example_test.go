package redistest_test

import (
	"fmt"

	"github.com/wakuwaku-go/wakuwaku/internal/redistest"
)

// Keys that share a hash tag share a slot, which multi-key commands and scripts need.
func ExampleSlot() {
	fmt.Println(redistest.Slot("{user1000}.following") == redistest.Slot("{user1000}.followers"))
	fmt.Println(redistest.Slot("123456789"))
	// Output:
	// true
	// 12739
}
