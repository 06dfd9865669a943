package lock

// SlotOf exposes slotOf to the external tests, which check it against the
// rig's own slot function.
func SlotOf(key string) int { return int(slotOf(key)) }
