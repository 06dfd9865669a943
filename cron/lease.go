package cron

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/wakuwaku-go/wakuwaku/interval"
	"github.com/wakuwaku-go/wakuwaku/lock"
)

// Leased is implemented by a job that runs once per slot across all the
// replicas that run it, rather than once per slot in each.
//
// Before each run, the startup run included, the runtime takes a lease on
// the run's slot (see [interval.Slot]): a [lock.Lock] in namespace
// [LeaseNamespace], never released. Its name, <name> below, is
// [LeaseConfig.Name], or else what the job's Name() string method returns;
// [Start] refuses a leased job with neither, since the name a job without a
// Name method is known by, its Go type, changes when the type is renamed or
// moved, and replicas running the two versions would take two leases. The first replica to tick takes it and
// runs; the others find it held and skip the tick, which is logged and
// reported to [Observer.RunSkipped] with [ReasonLeaseHeld].
//
// The slots of an [interval.AtLeast], [interval.AfterFinish] or
// [interval.AfterStart] job are each replica's own, so the lease is the
// job's, the seed's pattern; it lasts 11/12 of the interval unless
// [LeaseConfig.TTL] says otherwise, and runs out before the interval ends, so the
// next interval's first tick, whichever replica it comes from, takes it
// again:
//
//	@@wakuwaku-entity:Lock:cron:<name>
//
// An [interval.Cron] job's slots are the same on every replica, so its key
// names the slot ([interval.Slot.Key]), and replicas whose ticks are offset,
// or a replica restarted within a slot, can never run one slot twice:
//
//	@@wakuwaku-entity:Lock:cron:<name>@2026-12-02T14:00:00Z
//	@@wakuwaku-entity:Lock:cron:<name>@2026-11-01T01:30:00[America/New_York]
//
// A lease ends where its slot says ([interval.Slot.LeaseEnd]), however late
// it is taken, so a slow Redis never makes a lease last into the replica's
// own next slot. A tick handled after its slot's lease would have ended is
// skipped with [ReasonTooLate]: the other replicas' leases for that slot
// would have ended too, so running it could run it twice. And when a
// replica finds the lease of a duration policy held by its own previous
// run (Redis answered its last acquire so late that the lease outlived the
// interval), it renews that lease and runs: no other replica can have run
// meanwhile.
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
	Lease() LeaseConfig
}

// LeaseConfig configures the lease of a [Leased] job: where it is taken,
// under which name and for how long. It is the value the job's Lease method
// returns, read once by [Start].
type LeaseConfig struct {
	// Db is where the lease is taken; it must be able to take locks in
	// [LeaseNamespace]. Required.
	Db lock.Db
	// Name is the lease's name in [LeaseNamespace]; the default is what
	// the job's Name() string method returns. A job without a Name method
	// must set it. Replicas of one job must agree on it.
	Name string
	// TTL is how long a lease lasts from the start of its slot. The
	// default is 11/12 of the interval for a duration policy (55 minutes
	// of an hour), and twice the slot's length for a Cron job. For a
	// duration policy it must be shorter than the interval, or a replica
	// could find its own lease of the previous interval still held and the
	// interval would be skipped; Start refuses a longer one. A Cron job's
	// every slot has a key of its own, so its lease may outlast the slot;
	// it must outlast the spread of the replicas' ticks for one slot (clock
	// offsets, late wake-ups), or their ticks are skipped with
	// [ReasonTooLate].
	TTL time.Duration
}

// LeaseNamespace is the lock namespace of the leases of [Leased] jobs.
const LeaseNamespace = "cron"

// The reasons a [Leased] job's tick is skipped for.
const (
	// ReasonLeaseHeld is why a tick was skipped when another replica held
	// the slot's lease: the run took place there.
	ReasonLeaseHeld = "lease held by another replica"
	// ReasonTooLate is why a tick was skipped when it was handled after
	// its slot's lease would have ended (see [interval.Slot.LeaseEnd]).
	ReasonTooLate = "too late for its slot's lease"
)

// leaseOf calls the job's Lease method, turning a panic into an error that
// names the job.
func leaseOf(name string, j Leased) (l LeaseConfig, err error) {
	err = guard(jobCalled(name), "Lease", func() { l = j.Lease() })
	return l, err
}

// leaseName returns the name of job j's lease: l.Name, else the result of
// j's Name method (name). A job known only by its Go type has none: renaming
// the type or moving it to another package would change its lease, and
// replicas running two versions would each take their own.
func leaseName(name string, j Leased, l LeaseConfig) (string, error) {
	if l.Name != "" {
		return l.Name, nil
	}
	if _, named := j.(interface{ Name() string }); !named {
		return "", fmt.Errorf("%w: leased job %s has no name: add a Name() string method or set LeaseConfig.Name", ErrInvalidJob, name)
	}
	return name, nil
}

// leaseAdmission returns the admission that takes a Leased job's lease
// before each run, or an error naming the job if the lease can't work. now
// is the runtime's clock, which its ticks' slots are read on.
func leaseAdmission(name string, every interval.Interval, l LeaseConfig, now func() time.Time) (Admission, error) {
	if err := every.CheckLease(l.TTL); err != nil {
		return nil, fmt.Errorf("%w: job %q: %w", ErrInvalidJob, name, err)
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
	return (&leaser{LeaseConfig: l, now: now}).admit, nil
}

// leaser takes the leases of one job.
type leaser struct {
	LeaseConfig
	now func() time.Time
	// own is this replica's latest lease of a duration policy's slot.
	own atomic.Pointer[lock.Token]
}

func (l *leaser) admit(ctx context.Context, t Tick) (bool, string, error) {
	name, shared := slotLease(l.Name, t)
	ttl := t.Slot.LeaseEnd(l.TTL).Sub(l.now())
	if ttl < time.Millisecond {
		return false, ReasonTooLate, nil
	}
	slotLock := lock.New[string](LeaseNamespace, ttl)
	tok, err := slotLock.TryLock(ctx, l.Db, name)
	switch {
	case err != nil:
		return false, "", fmt.Errorf("cron: taking the lease %q: %w", slotLock.Key(name), err)
	case tok != nil:
		if !shared {
			l.own.Store(tok)
		}
		return true, "", nil // never released: the lease runs out by itself
	case shared:
		return false, ReasonLeaseHeld, nil
	}
	// The job's own key is held. If by this replica's previous lease, no
	// one else has run since it was taken: renew it and run.
	prev := l.own.Load()
	if prev == nil {
		return false, ReasonLeaseHeld, nil
	}
	renewed, err := prev.Extend(ctx)
	switch {
	case err != nil:
		return false, "", fmt.Errorf("cron: renewing the lease %q: %w", slotLock.Key(name), err)
	case !renewed:
		return false, ReasonLeaseHeld, nil
	}
	return true, "", nil
}

// slotLease returns the name of the lock that the run of t takes for the
// lease named name: name itself, or name@key for a slot with a key (see
// [interval.Slot.Key]), and whether the slot has one.
func slotLease(name string, t Tick) (string, bool) {
	key, shared := t.Slot.Key()
	if shared {
		name += "@" + key
	}
	return name, shared
}

// leaseKeys names the Redis keys of leases, for log records.
var leaseKeys = lock.New[string](LeaseNamespace, time.Second)

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
