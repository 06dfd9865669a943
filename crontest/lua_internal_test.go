package crontest

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wakuwaku-go/wakuwaku/cron"
	"github.com/wakuwaku-go/wakuwaku/interval"
	"github.com/wakuwaku-go/wakuwaku/lock"
)

// TestClusterScriptsInOneState runs a leased job for ten minutes on three
// replicas: the record's scripts run in the cluster's one Lua state, but
// for the first EVALSHA of each script, which finds it not cached yet and
// answers NOSCRIPT, as miniredis answers it.
func TestClusterScriptsInOneState(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := New(t, 3, func(rdb *redis.Client) []cron.Job {
			return []cron.Job{cron.Func("j", interval.MustCron("*/5 * * * * *"), func(context.Context, cron.Tick) error { return nil },
				cron.WithLease(cron.LeaseConfig{DB: lock.NewDB(rdb)}))}
		})
		time.Sleep(10 * time.Minute)
		c.OncePerSlot(t, "j")
		if c.lua == nil {
			t.Skip("WAKUWAKU_CRONTEST_LUA=fresh: miniredis runs the scripts")
		}
		own, left := c.lua.Scripts()
		if own < 200 || left > 5 {
			t.Errorf("%d scripts ran in the cluster's Lua state, %d in miniredis's: want the record's scripts (about 2 a slot) in the one state", own, left)
		}
	})
}
