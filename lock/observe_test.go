package lock_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/wakuwaku-go/wakuwaku/internal/redistest"
	"github.com/wakuwaku-go/wakuwaku/lock"
)

// recorder keeps the events an observer is given.
type recorder struct {
	mu     sync.Mutex
	events []lock.Event
}

func (r *recorder) observe(e lock.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

// take returns the events recorded since the last take.
func (r *recorder) take() []lock.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.events
	r.events = nil
	return e
}

func TestObserver(t *testing.T) {
	srv := redistest.Start(t)
	rec := &recorder{}
	db := lock.NewDB(srv.Client(t), lock.WithObserver(rec.observe))
	ctx := t.Context()
	shops := lock.NewRW[string]("shop", time.Minute)

	var tok, w *lock.Token
	var r *lock.ReadToken
	type want struct{ kind, ns, op, result string }
	tests := []struct {
		name string
		op   func()
		want want
	}{
		{"lock acquired", func() { tok, _ = invoices.TryLock(ctx, db, 1) }, want{"Lock", "invoice", "lock", "acquired"}},
		{"lock busy", func() { invoices.TryLock(ctx, db, 1) }, want{"Lock", "invoice", "lock", "busy"}},
		{"extend", func() { tok.Extend(ctx) }, want{"Lock", "invoice", "extend", "extended"}},
		{"release", func() { tok.Release(ctx) }, want{"Lock", "invoice", "release", "released"}},
		{"release lost", func() { tok.Release(ctx) }, want{"Lock", "invoice", "release", "lost"}},
		{"extend lost", func() { tok.Extend(ctx) }, want{"Lock", "invoice", "extend", "lost"}},
		{"read", func() { r, _ = shops.TryRead(ctx, db, "a:b") }, want{"RwLock", "shop", "read", "acquired"}},
		{"write busy", func() { shops.TryWrite(ctx, db, "a:b") }, want{"RwLock", "shop", "write", "busy"}},
		{"read extend", func() { r.Extend(ctx) }, want{"RwLock", "shop", "extend", "extended"}},
		{"read release", func() { r.Release(ctx) }, want{"RwLock", "shop", "release", "released"}},
		{"write", func() { w, _ = shops.TryWrite(ctx, db.Only(shops), "a:b") }, want{"RwLock", "shop", "write", "acquired"}},
		{"write release", func() { w.Release(ctx) }, want{"RwLock", "shop", "release", "released"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.op()
			got := rec.take()
			if len(got) != 1 {
				t.Fatalf("%d events, want 1: %+v", len(got), got)
			}
			e := got[0]
			if (want{e.Kind, e.Namespace, e.Op, e.Result}) != tt.want || e.Err != nil || e.Latency <= 0 {
				t.Errorf("event = %+v, want %+v, no error, a latency", e, tt.want)
			}
		})
	}

	t.Run("not sent", func(t *testing.T) {
		done, cancel := context.WithCancel(ctx)
		cancel()
		invoices.TryLock(done, db, 2)
		invoices.TryLock(ctx, db.Only(), 2)
		invoices.Held(ctx, db.ReadOnly(), 2)
		if got := rec.take(); len(got) != 0 {
			t.Errorf("events = %+v, want none", got)
		}
	})
	t.Run("error", func(t *testing.T) {
		bad := lock.NewDB(failing{}, lock.WithObserver(rec.observe))
		if _, err := invoices.TryLock(ctx, bad, 3); !errors.Is(err, errFailing) {
			t.Fatalf("TryLock error = %v, want errFailing", err)
		}
		got := rec.take()
		if len(got) != 1 || got[0].Result != "error" || !errors.Is(got[0].Err, errFailing) {
			t.Errorf("events = %+v, want one with result error", got)
		}
	})
}

var errFailing = errors.New("failing client")

// failing is a client whose every command fails.
type failing struct{}

func (failing) Process(context.Context, redis.Cmder) error { return errFailing }
