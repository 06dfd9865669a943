package cronsim

import (
	"runtime/debug"

	lua "github.com/yuin/gopher-lua"
)

// The simulator's scripts run in crontest's one Lua state
// (internal/sharedlua), or, with WAKUWAKU_CRONTEST_LUA=fresh, as miniredis
// runs them: each script call in a fresh gopher-lua state, whose value
// stack (the registry) and call stack it allocates whole at gopher-lua's
// default sizes, 5,120 values and 256 frames, and never grows. Those two
// were 38 % of the bytes a seed allocated that way (BENCHMARKS.md).
// cron/internal/record/script.go's scripts need far less: the seeds tried
// replay alike with gopher-lua's least sizes, 128 values and 16 frames,
// and these are eight and four times those. A script that overflowed would
// fail its command and change the seed's trace (BENCHMARKS.md compares the
// traces with and without this). The collector runs at a quarter of its
// default frequency.
func init() {
	lua.RegistrySize = 1024
	lua.CallStackSize = 64
	debug.SetGCPercent(400)
}
