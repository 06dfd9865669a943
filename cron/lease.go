package cron

import (
	"fmt"
	"time"

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

	// Attempts is how many runs a slot gets until one succeeds. 0 or 1,
	// the default, is the seed's at most once: a run that fails, panics,
	// loses its run lease or dies with its replica is not repeated. With
	// 2 or more, such a run leaves its slot open, and the next tick of any
	// replica inside the slot runs it again, after a back-off, until a run
	// succeeds or the attempts are spent; then the slot is recorded as
	// failed.
	Attempts int
	// Backoff is how long an open slot waits after its first failed
	// attempt; it doubles after each further one, up to 64 times itself.
	// The default is a second. A run whose replica died waits for its run
	// lease to run out instead.
	Backoff time.Duration
	// CatchUp, if positive, makes a job that has no startup run catch up
	// at the runtime's start: if the latest slot that began at most
	// CatchUp ago never ran (every replica was down), it runs once, on
	// whichever replica claims it first. A duration policy's slot is
	// missed when no run started within the last interval.
	CatchUp time.Duration
	// RunTTL is the run lease: how long a run holds the job against every
	// other replica without a heartbeat. The runtime extends it every
	// third of RunTTL while the run goes on, however long it takes, and
	// cancels the run's context with cause [lock.ErrLeaseLost] if it
	// can't. A replica that dies mid-run holds the job until RunTTL has
	// passed. The default is half the interval (of its first slot, for a
	// Cron spec), at most 30 seconds.
	RunTTL time.Duration
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
	// ReasonRunning is why a tick was skipped while a run of the job was
	// in progress, on this replica or another, under its run lease.
	ReasonRunning = "run in progress"
	// ReasonPaused is why a tick was skipped while the job was paused (see
	// [Admin.Pause]).
	ReasonPaused = "paused"
	// ReasonRetryWait is why a tick was skipped when its slot's last
	// attempt failed and the back-off before the next had not passed.
	ReasonRetryWait = "waiting to retry"
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

// leaseKeys names the Redis keys of leases, for log records.
var leaseKeys = lock.New[string](LeaseNamespace, time.Second)
