package fault_test

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/wakuwaku-go/wakuwaku/proof/internal/fault"
)

// roles are the parts a child process can play; see fault.Main.
var roles = map[string]fault.Role{
	"contend": contendRole,
	"holder":  holderRole,
	"noop":    noopRole,
}

// quiet drops go-redis' own log lines (failed dials while the server is
// down, by design here); what reaches the callers is what the suite counts.
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

func TestMain(m *testing.M) {
	redis.SetLogger(quiet{})
	fault.Main(m, roles)
}
