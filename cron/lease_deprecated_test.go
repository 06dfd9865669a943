package cron

import (
	"context"
	"testing"
	"time"

	"github.com/wakuwaku-go/wakuwaku/internal/redistest"
	"github.com/wakuwaku-go/wakuwaku/interval"
	"github.com/wakuwaku-go/wakuwaku/lock"
)

type formerDBJob struct{ db lock.DB }

func (formerDBJob) Name() string                        { return "former-db" }
func (formerDBJob) Process(context.Context, Tick) error { return nil }
func (j formerDBJob) Lease() LeaseConfig                { return LeaseConfig{Db: j.db} }
func (formerDBJob) Interval() interval.Interval         { return interval.AtLeast(time.Hour) }

// TestLeaseConfigFormerDBField keeps LeaseConfig's deprecated Db field
// working: a job that sets it, not DB, gets its record kept there.
func TestLeaseConfigFormerDBField(t *testing.T) {
	rdb := redistest.Start(t).Client(t)
	j := formerDBJob{db: lock.NewDB(rdb)}
	l, err := leaseOf(j.Name(), j)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := newJobState(interval.AtLeast(time.Hour), l, "r0", time.Now); err != nil {
		t.Fatalf("a LeaseConfig that sets only Db: %v", err)
	}
	l.Db = lock.NewDB(nil)
	l.DB = lock.NewDB(rdb)
	if _, err := newJobState(interval.AtLeast(time.Hour), l, "r0", time.Now); err != nil {
		t.Fatalf("a LeaseConfig whose DB is set and Db has no client: %v", err)
	}
}
