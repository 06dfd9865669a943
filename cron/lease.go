package cron

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/wakuwaku-go/wakuwaku/interval"
	"github.com/wakuwaku-go/wakuwaku/lock"
)

// Leased is implemented by a job that runs once per interval across all the
// replicas that run it, rather than once per interval in each.
//
// Before each run, the startup run included, the runtime takes a lease on
// the job: a [lock.Lock] in namespace [LeaseNamespace], named after the job,
// held for most of the interval and never released. The first replica to
// tick takes it and runs; the others find it held and skip the tick, which
// is logged and reported to [Observer.RunSkipped] with [ReasonLeaseHeld].
// The lease runs out before the interval ends, so the next interval's first
// tick, whichever replica it comes from, takes it again.
//
// A lease key for an [interval.AtLeast], [interval.AfterFinish] or
// [interval.AfterStart] job is the job's own:
//
//	@@wakuwaku-entity:Lock:cron:<name>
//
// For an [interval.Cron] job the key also names the slot, so that replicas
// whose ticks are offset can never run one slot twice:
//
//	@@wakuwaku-entity:Lock:cron:<name>@2026-12-02T14:00:00Z
//
// The startup run of a Cron job counts as a run of the latest slot at or
// before the start.
//
// If the lease can't be taken because Redis failed, the run is skipped with
// [ReasonAdmissionFailed] and the error is logged: a run is never risked
// without its lease. The lease is not extended while the job runs, so keep
// runs shorter than the lease, or extend it yourself (see [lock.WhileHeld]).
// If Redis loses the key (a failover without persistence, an eviction), two
// replicas may both run in one interval: keep the job idempotent.
type Leased interface {
	Job
	// Lease says where and for how long the lease is taken. The runtime
	// calls it once, in [Start].
	Lease() Lease
}

// Lease configures the lease of a [Leased] job.
type Lease struct {
	// Db is where the lease is taken; it must be able to take locks in
	// [LeaseNamespace]. Required.
	Db lock.Db
	// Name is the lease's name in [LeaseNamespace]; the default is the
	// job's name. Replicas of one job must agree on it.
	Name string
	// TTL is how long a lease lasts. The default is [DefaultLeaseFraction]
	// of the interval: for AtLeast(time.Hour), 55 minutes. It must be
	// shorter than the interval, or a replica could find its own lease of
	// the previous interval still held and the interval would be skipped;
	// Start refuses a longer one.
	//
	// A Cron job's every slot has a key of its own, so its lease may
	// outlast the interval; it must outlast the spread of the replicas'
	// ticks for one slot (clock offsets, late wake-ups), or a replica whose
	// tick comes after the lease ran out runs the slot again. The default is
	// twice the time from the slot to the next.
	TTL time.Duration
}

// LeaseNamespace is the lock namespace of the leases of [Leased] jobs.
const LeaseNamespace = "cron"

// DefaultLeaseFraction is the part of its interval that the lease of a
// [Leased] job with a duration policy lasts unless [Lease.TTL] says
// otherwise: 11/12, which is 55 minutes of an hour. The rest is the margin by which a lease runs out before the
// next interval's tick, however the replicas' schedules drift.
const DefaultLeaseFraction = 11.0 / 12.0

// ReasonLeaseHeld is why a [Leased] job's tick was skipped when another
// replica held the lease: the run took place there.
const ReasonLeaseHeld = "lease held by another replica"

// leaseAdmission returns the admission that takes a Leased job's lease
// before each run, or an error naming the job if the lease can't work.
func leaseAdmission(name string, every interval.Interval, l Lease) (Admission, error) {
	if l.Name == "" {
		l.Name = name
	}
	if l.TTL < 0 {
		return nil, fmt.Errorf("%w: job %q: lease TTL %v is negative", ErrInvalidJob, name, l.TTL)
	}
	// Ask the Db the way a run will, with a context that is already done,
	// so nothing is sent: a Db without a client or without permission for
	// the namespace fails now, not at every run.
	probe := lock.New[string](LeaseNamespace, time.Second)
	done, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := probe.TryLock(done, l.Db, l.Name); !errors.Is(err, context.Canceled) {
		return nil, fmt.Errorf("%w: job %q: its lease can't be taken: %w", ErrInvalidJob, name, err)
	}

	if _, isCron := every.Spec(); isCron {
		if l.TTL > 0 {
			fixed := lock.New[string](LeaseNamespace, l.TTL)
			return func(ctx context.Context, t Tick) (bool, string, error) {
				slot, _ := slotOf(every, t.Scheduled)
				return takeLease(ctx, l.Db, fixed, l.Name+"@"+slot.UTC().Format(time.RFC3339))
			}, nil
		}
		return func(ctx context.Context, t Tick) (bool, string, error) {
			slot, period := slotOf(every, t.Scheduled)
			slotLock := lock.New[string](LeaseNamespace, slotLeaseFactor*period)
			return takeLease(ctx, l.Db, slotLock, l.Name+"@"+slot.UTC().Format(time.RFC3339))
		}, nil
	}

	period, _ := every.Period()
	ttl := l.TTL
	if ttl == 0 {
		ttl = leaseTTL(period)
	}
	if ttl >= period {
		return nil, fmt.Errorf("%w: job %q: lease TTL %v is not shorter than its interval %v", ErrInvalidJob, name, ttl, period)
	}
	fixed := lock.New[string](LeaseNamespace, ttl)
	return func(ctx context.Context, _ Tick) (bool, string, error) {
		return takeLease(ctx, l.Db, fixed, l.Name)
	}, nil
}

// slotLeaseFactor is how many of its slot's periods the lease of a Cron
// slot lasts by default. The key is the slot's alone, so a long lease costs
// nothing but the key's memory, and it covers replicas whose ticks for one
// slot are up to that far apart.
const slotLeaseFactor = 2

// leaseTTL is DefaultLeaseFraction of period, and at least a millisecond.
func leaseTTL(period time.Duration) time.Duration {
	return max(time.Duration(float64(period)*DefaultLeaseFraction), time.Millisecond)
}

// slotOf returns the slot a run due at scheduled belongs to, the latest
// slot at or before it, and the time from that slot to the next. A run
// before any slot the spec has (only a spec whose slots are years apart)
// is its own slot.
func slotOf(every interval.Interval, scheduled time.Time) (time.Time, time.Duration) {
	slot := scheduled
	if s, ok := every.LatestSlot(scheduled.AddDate(-5, 0, 0), scheduled); ok {
		slot = s
	}
	next, ok := every.NextSlot(slot)
	if !ok {
		return slot, time.Hour
	}
	return slot, next.Sub(slot)
}

func takeLease(ctx context.Context, db lock.Db, l lock.Lock[string], name string) (bool, string, error) {
	tok, err := l.TryLock(ctx, db, name)
	switch {
	case err != nil:
		return false, "", fmt.Errorf("cron: taking the lease %q: %w", l.Key(name), err)
	case tok == nil:
		return false, ReasonLeaseHeld, nil
	}
	return true, "", nil // never released: the lease runs out by itself
}

// chain returns an admission that asks first, then second.
func chain(first, second Admission) Admission {
	if first == nil {
		return second
	}
	return func(ctx context.Context, t Tick) (bool, string, error) {
		ok, reason, err := first(ctx, t)
		if err != nil || !ok {
			return ok, reason, err
		}
		return second(ctx, t)
	}
}
