package redistest

import (
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// Mini starts an embedded miniredis and returns it with a go-redis client connected to it. The
// test's cleanup closes the client and then the server. miniredis is for quick unit tests
// only: its keys expire only when the test moves its clock (FastForward), its Lua is
// gopher-lua rather than Redis's own, and it is never a cluster, so lock semantics are tested
// on Start's real server.
func Mini(tb testing.TB) (*miniredis.Miniredis, *redis.Client) {
	tb.Helper()
	m := miniredis.RunT(tb)
	c := redis.NewClient(&redis.Options{Addr: m.Addr()})
	tb.Cleanup(func() { _ = c.Close() })
	return m, c
}
