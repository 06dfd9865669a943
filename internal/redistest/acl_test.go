package redistest

import (
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// TestSetUser makes a user that may read one key pattern: it logs in, its
// commands within the rule run, the others are refused with NOPERM and
// counted as rejected; a rule the server refuses fails the test.
func TestSetUser(t *testing.T) {
	s := Start(t)
	ctx := t.Context()
	s.SetUser(t, "reader", "on", ">secret", "resetkeys", "~app:*", "-@all", "+get", "+info")
	admin := s.Client(t)
	admin.Set(ctx, "app:1", "v", 0)
	before, err := CommandStats(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	opts := s.Options()
	opts.Username, opts.Password = "reader", "secret"
	c := redis.NewClient(opts)
	defer c.Close()
	if v, err := c.Get(ctx, "app:1").Result(); err != nil || v != "v" {
		t.Errorf("GET app:1 as reader = %q, %v; want v", v, err)
	}
	for name, err := range map[string]error{
		"SET app:1":    c.Set(ctx, "app:1", "w", 0).Err(),
		"GET other":    c.Get(ctx, "other").Err(),
		"DEL app:1":    c.Del(ctx, "app:1").Err(),
		"SET (script)": c.Eval(ctx, "return redis.call('SET', KEYS[1], 'x')", []string{"app:1"}).Err(),
	} {
		if err == nil || !strings.Contains(err.Error(), "NOPERM") {
			t.Errorf("%s as reader = %v, want NOPERM", name, err)
		}
	}
	after, err := CommandStats(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	if n := after["set"].Rejected - before["set"].Rejected; n != 1 {
		t.Errorf("set rejected calls went up by %d, want 1", n)
	}
	if n := after["get"].Rejected - before["get"].Rejected; n != 1 {
		t.Errorf("get rejected calls went up by %d, want 1 (the key outside the rule)", n)
	}

	if msg := fatalOf(t, func(tb testing.TB) { s.SetUser(tb, "bad", "+no-such-command") }); !strings.Contains(msg, "no-such-command") {
		t.Errorf("SetUser with an unknown command failed with %q, want the server's error", msg)
	}
}
