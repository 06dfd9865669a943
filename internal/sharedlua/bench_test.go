package sharedlua_test

import (
	"context"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/wakuwaku-go/wakuwaku/internal/sharedlua"
)

// claimLike is a script of a claim's size: it reads a record's fields with
// one HMGET, splits one with string.match, and writes two with one HSET.
var claimLike = redis.NewScript(`
local run, slot, last = unpack(redis.call('HMGET', KEYS[1], 'run', 'slot', 'last'))
local a, b, c = string.match(run or 'x|1|2', '^([^|]*)|([^|]*)|([^|]*)$')
redis.call('HSET', KEYS[1], 'run', ARGV[1] .. '|' .. (tonumber(b or '0') + 1) .. '|' .. ARGV[2], 'seen', ARGV[2])
redis.call('PEXPIRE', KEYS[1], 60000)
return {1, tonumber(b or '0'), a, slot or ''}`)

// BenchmarkScripts measures, in one run, a claim-sized script and a plain
// command (HSET) on a miniredis server whose scripts run in the engine's
// one state (shared) and on one that gives each script a fresh state
// (fresh), over TCP from go-redis.
func BenchmarkScripts(b *testing.B) {
	ctx := context.Background()
	for _, mode := range []string{"fresh", "shared"} {
		m := miniredis.RunT(b)
		if mode == "shared" {
			sharedlua.Install(m)
		}
		rdb := redis.NewClient(&redis.Options{Addr: m.Addr()})
		b.Cleanup(func() { rdb.Close() })
		b.Run("script/"+mode, func(b *testing.B) {
			for b.Loop() {
				if err := claimLike.Run(ctx, rdb, []string{"rec"}, "tok", "1700000000000").Err(); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("command/"+mode, func(b *testing.B) {
			for b.Loop() {
				if err := rdb.HSet(ctx, "h", "f", "v").Err(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
