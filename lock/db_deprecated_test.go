package lock

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/wakuwaku-go/wakuwaku/internal/redistest"
)

// TestFormerNames keeps the deprecated names working: code written against
// them builds and takes the same locks as the new names.
func TestFormerNames(t *testing.T) {
	srv := redistest.Start(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer c.Close()
	var opt DbOption = WithObserver(nil)
	var db Db = NewDb(c, opt)
	var ro ReadOnlyDb = NewReadOnlyDb(c)

	ctx := context.Background()
	l := New[string]("former-names", 10*time.Second)
	tok, err := l.TryLock(ctx, db, "a")
	if err != nil {
		t.Fatal(err)
	}
	if _, held, err := l.Held(ctx, ro, "a"); err != nil || !held {
		t.Fatalf("Held through a ReadOnlyDb = %v, %v; want held", held, err)
	}
	if tok == nil {
		t.Fatal("TryLock through a DB made by NewDb did not take a free lock")
	}
	if other, err := l.TryLock(ctx, NewDB(c), "a"); err != nil || other != nil {
		t.Fatalf("TryLock through NewDB of a lock taken through NewDb = %v, %v; want nil, nil", other, err)
	}
	if ok, err := tok.Release(ctx); err != nil || !ok {
		t.Fatalf("Release = %v, %v", ok, err)
	}
}
