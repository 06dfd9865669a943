package cron

import (
	"fmt"
	"reflect"
	"time"

	"github.com/wakuwaku-go/wakuwaku/lock"
)

// Leased is implemented by a job that runs once per slot across all the
// replicas that run it, rather than once per slot in each, and one run at a
// time across all of them.
//
// # The record
//
// The runtime keeps a record of the job in Redis, a hash, under the name
// of its lease, <name> below: [LeaseConfig.Name], or else what the job's
// Name() string method returns. [Start] refuses a leased job with neither,
// since the name a job without a Name method is known by, its Go type,
// changes when the type is renamed or moved, and replicas running the two
// versions would keep two records; and a name holding '{' or '}', which
// would break the record's hash tag.
//
//	@@wakuwaku-cron:{@@wakuwaku-entity:Lock:cron:<name>}
//
// Its hash tag is the key of the Rust crate's lease for the job, so that on a
// Redis Cluster the record and that lease share a hash slot. The record
// holds the run in progress, the slot it claimed, the last run, the last
// failure, a pause and a run-now request; beside it, in the same hash
// slot, a list keeps the job's last runs ([LeaseConfig.History]). Every claim makes it live at
// least until that replica's next tick and the end of the slot's claim
// window, plus a few intervals, and no script shortens that: it expires
// only once no replica runs the job. [Admin] reads and steers it. The
// protocol that keeps it, its states, events and transitions, is stated
// once, in PROTOCOL.md beside this package's source.
//
// # A run
//
// Before each run, the startup run included, the replica claims it in
// the record: one script, which decides from the record and the server's
// clock whether this replica runs now. The run that goes ahead holds the
// job under a run lease ([LeaseConfig.RunTTL]), which the runtime extends
// every third of its TTL with [lock.WhileHeld] however long the run takes;
// if an extension finds the lease lost, or the lease's deadline passes
// without one (Redis stopped answering), the run's context is cancelled
// with cause [lock.ErrLeaseLost]. When the run returns, a second script
// records its outcome. So a run costs two round trips, plus one per third
// of the run lease while it runs.
//
// Of the replicas that tick a Cron slot, only its owner claims it at once:
// every runtime with leased jobs beats in a registry of the live replicas
// that run the same leased jobs ([Admin.Replicas]), and a hash of the job
// and the slot picks one of them. The others read the record a grace
// period after their tick (a tenth of the interval, from 50 ms to 2 s),
// one HMGET that writes nothing, and claim the slot only if the owner did
// not (it died, or its tick came late): such a slot starts a grace period
// late, and still once. A replica that does not know the live replicas
// claims at each tick.
//
// A tick that finds its slot's run in progress on another replica is
// skipped with [ReasonRunning]; one that finds its slot run already, with
// [ReasonLeaseHeld]. Each is logged at Debug and reported to
// [Observer.RunSkipped]: the replica that runs logs the run. A tick whose
// slot is new while a run of an earlier slot still holds the job, or while
// the job is paused, is skipped: the slot is not run by any replica (a
// run-over slot, as in classic cron), even one whose tick comes later. The
// first replica whose claim finds it so records the slot skipped in the
// record and in the job's history (outcome "skipped", reason "still
// running" or "paused", and the replica), logs that at Warn and reports it
// with [ReasonStillRunning] or [ReasonPaused]; every other tick of the
// slot is logged at Debug and reported with [ReasonSkippedElsewhere]. So a
// count of skips summed over the replicas is the number of slots skipped.
//
// # Slots
//
// An [interval.Cron] job's slots are the same on every replica (see
// [interval.Slot.Key]): the record names the latest slot claimed, so
// replicas whose ticks are offset, or a replica restarted within a slot,
// never run one slot twice, and a replica whose clock is behind never
// runs a slot older than one that ran.
//
// The slots of an [interval.AtLeast], [interval.AfterFinish] or
// [interval.AfterStart] job are each replica's own, so the job's slot is
// the Rust crate's: the tick that takes the Rust crate's lease opens it, and it lasts
// as long as that lease, 11/12 of the interval unless [LeaseConfig.TTL]
// says otherwise. The lease is never released and runs out before the
// interval ends, so the next interval's first tick, whichever replica it
// comes from, opens the next slot. Its key is the Rust crate's, holding a random
// 16-byte token, so a service that takes it by hand, as the Rust crate's
// HourlyReport does, shares it:
//
//	@@wakuwaku-entity:Lock:cron:<name>
//
// A lease ends where its slot says ([interval.Slot.LeaseEnd]), however late
// it is taken, so a slow Redis never makes a lease last into the replica's
// own next slot. A tick handled after its slot's lease would have ended is
// skipped with [ReasonTooLate]. And when a replica finds the lease held by
// its own previous slot (Redis answered its last claim so late that the
// lease outlived the interval), it takes the lease again and runs: no other
// replica can have run meanwhile.
//
// # Failures
//
// By default a slot is run at most once, as in the Rust crate: a run that fails,
// panics, loses its run lease or dies with its replica is not repeated (a
// replica killed mid-run holds the job until its run lease runs out, and
// its run is then recorded as lost). With [LeaseConfig.Attempts] of 2 or
// more, such a run leaves its slot open, and a further attempt runs inside
// the slot after a back-off ([LeaseConfig.Backoff]), on the replica whose
// run failed or on any other that ticks or that waited for the run to end,
// until one succeeds or the attempts are spent, when the slot is recorded
// as failed (later ticks of it are skipped with [ReasonAttemptsUsedUp]).
// Its [Tick] has [TriggerRetry] and its Attempt number. Either way, never
// two runs of the job at once. A retry or a look again at the slot can only
// run that slot: it never opens another.
//
// With [LeaseConfig.CatchUp], a job whose interval has no startup run
// catches up at start: if the latest slot that began within CatchUp never
// ran (every replica was down), one replica runs it, with
// [TriggerCatchUp]. A slot from before the job's record existed (its first
// deployment) is never caught up.
//
// If the claim fails because Redis failed, the run is skipped with
// [ReasonAdmissionFailed] and the error is logged: a run is never risked
// without its claim. If Redis does not answer a run's completion, the
// replica sends it again, backing off, while the slot can still be
// claimed, so that a slot with attempts left gets them once Redis is back
// (the completion that gets through records the run's own outcome, or
// finds it recorded lost). If Redis loses the record (a failover without
// persistence, an eviction), the run in progress loses its run lease and is
// cancelled, and a replica that ticks again within the slot runs it again:
// keep the job idempotent.
type Leased interface {
	Job
	// Lease says where the job's record and lease are kept, under which
	// name, and how its runs are claimed. The runtime calls it once, in
	// [Start].
	Lease() LeaseConfig
}

// LeaseConfig configures a [Leased] job's record and lease: where they are
// kept, under which name, how long a slot can be claimed, and what becomes
// of a run that fails. It is the value the job's Lease method returns, read
// once by [Start].
type LeaseConfig struct {
	// DB is where the record and the lease are kept; it must be able to
	// take locks in [LeaseNamespace]. Required.
	//
	// A DB made with [lock.WithReplicas] makes the record's writes wait
	// for its replicas, as a lock's acquire does, in the same round
	// trip: claims, heartbeats and completions (a replica that does not
	// own a Cron slot only looks at it, writes nothing, and needs no
	// wait). A run starts only once its claim is acknowledged (see
	// [ReasonNotReplicated]); a completion that is not is sent again
	// while the slot lasts; a heartbeat that is not does not extend the
	// run's deadline. Such a DB needs a *redis.Client (a Sentinel
	// failover client is one) or a *redis.ClusterClient: [Start] refuses
	// any other.
	DB lock.DB
	// Name is the lease's name in [LeaseNamespace]; the default is what
	// the job's Name() string method returns. A job without a Name method
	// must set it. Replicas of one job must agree on it.
	Name string
	// TTL is how long a slot can be claimed, from its start. For a
	// duration policy it is the Rust crate's lease, 11/12 of the interval by
	// default (55 minutes of an hour); it must be shorter than the
	// interval, or a replica could find its own lease of the previous
	// interval still held and the interval would be skipped: Start refuses
	// a longer one. For a Cron job it is twice the slot's length by
	// default, and may be longer than the slot; it must outlast the spread
	// of the replicas' ticks for one slot (clock offsets, late wake-ups),
	// or their ticks are skipped with [ReasonTooLate]; with a spread
	// (interval.Interval.WithSpread) it must be longer than the spread, or
	// Start refuses it.
	TTL time.Duration

	// Attempts is how many runs a slot gets until one succeeds. 0 or 1,
	// the default, is the Rust crate's at most once: a run that fails, panics,
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
	// History is how many of the job's last runs its record keeps, for
	// [Admin.Status], the command-line tool and the status page: from 1
	// to 1000; 0, the default, keeps 20. A run's end adds it to the
	// history in the same round trip that records it.
	History int
	// Db is the former name of DB, read when DB is not set.
	//
	// Deprecated: use DB.
	Db lock.DB //lint:ignore ST1003 the former name, kept for one release
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
	// ReasonAttemptsUsedUp is why a tick was skipped when its slot had
	// failed every attempt [LeaseConfig.Attempts] allows.
	ReasonAttemptsUsedUp = "slot used up its attempts"
	// ReasonNotReplicated is why a tick was skipped when its claim won
	// but the replicas that the DB waits for (see [lock.WithReplicas])
	// did not acknowledge it within half the run lease: a failover could
	// have lost it and let another replica run the slot too. The run
	// lease lapses by itself, and the record then counts the attempt as
	// lost (retried if [LeaseConfig.Attempts] allows).
	ReasonNotReplicated = "claim not acknowledged by replicas"
	// ReasonSkippedElsewhere is why a tick was skipped when the record
	// names its slot skipped, as another replica's tick recorded (its
	// reason being ReasonStillRunning or ReasonPaused): the replica that
	// recorded it reports that reason, once, and the slot's history entry
	// says so.
	ReasonSkippedElsewhere = "slot already recorded skipped"
)

// leaseOf calls the job's Lease method, turning a panic into an error that
// names the job.
func leaseOf(name string, j Leased) (l LeaseConfig, err error) {
	err = guard(jobCalled(name), "Lease", func() { l = j.Lease() })
	if reflect.ValueOf(l.DB).IsZero() {
		l.DB = l.Db
	}
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
