package cronsim

import (
	"runtime/debug"

	lua "github.com/yuin/gopher-lua"
)

// The simulator's cost is mostly miniredis's: it runs each script call in
// a fresh gopher-lua state, whose value stack (the registry) and call
// stack are allocated at their default sizes, 5,120 values and 256 frames
// (about 100 KB), and it never grows them. Those allocations were most of
// the bytes a seed allocated, and the collector's work most of what the
// rest cost. The scripts of cron/script.go need far less: a quarter of the
// values and frames leaves them a wide margin, and a script that
// overflowed would fail its command, which changes the seed's trace
// (BENCHMARKS.md compares the traces of the CI seeds with and without
// this). The collector runs at a quarter of its default frequency: the
// heap of a seed is a few megabytes.
func init() {
	lua.RegistrySize = 1024
	lua.CallStackSize = 64
	debug.SetGCPercent(400)
}
