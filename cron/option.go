package cron

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"time"
)

// DefaultMaxOverlap is how many runs of one [interval.AfterStart] job may be
// in progress at once unless [WithMaxOverlap] says otherwise.
const DefaultMaxOverlap = 4

// The reasons the runtime gives, to the logger and to
// [Observer.RunSkipped], for a tick it skipped. They are constants, so a
// metrics adapter can use them as label values. An [Admission] that refuses
// a run gives its own reason.
const (
	// ReasonStillRunning is why a Cron job's slot that came while its
	// previous run was still going was skipped.
	ReasonStillRunning = "previous run still in progress"
	// ReasonTooManyRuns is why an AfterStart job's tick was skipped when
	// the job already had as many runs in progress as its limit allows.
	ReasonTooManyRuns = "too many runs in progress"
	// ReasonAdmissionFailed is why a run was skipped when its job's
	// Admission returned an error (or panicked): the run is not risked.
	ReasonAdmissionFailed = "admission failed"
	// ReasonNotAdmitted is why a run was skipped when its job's Admission
	// refused it without giving a reason.
	ReasonNotAdmitted = "not admitted"
)

// ErrInvalidOption is the error [Start] returns, wrapped with details, for
// an option that is not valid: a nil logger, a limit below 1, an admission
// for a job that does not exist.
var ErrInvalidOption = errors.New("cron: invalid option")

// Option configures a [Runtime]. Options are checked by [Start], which
// refuses invalid ones with an error that wraps [ErrInvalidOption].
type Option func(*options) error

type options struct {
	log        *slog.Logger
	replica    string // "": the host's name and the process id
	observer   Observer
	maxOverlap int
	admissions map[string]Admission
	now        func() time.Time
}

func defaultOptions() options {
	return options{
		log:        slog.New(slog.DiscardHandler),
		maxOverlap: DefaultMaxOverlap,
		now:        time.Now,
	}
}

// WithLogger makes the runtime log through l. The replica that runs a run
// logs it; the others stay quiet at Info:
//
//   - Info: the runtime's start ("jobs", "names") and shutdown ("runs" in
//     progress, then its stop); a job added, replaced ("interval") or
//     removed ("running"); each run's start and its end when it succeeded
//     ("duration", "outcome" ok); the end of an admission outage.
//   - Error: a run that failed ("error", "outcome" error), ran past its
//     deadline ("error", "outcome" timeout) or panicked ("panic", "stack",
//     "outcome" panic); the beginning of an admission outage ("error").
//   - Warn: a tick skipped because the job's previous run was still going
//     ([ReasonStillRunning], [ReasonTooManyRuns]) or that came too late
//     for its slot's lease ([ReasonTooLate]); a [Leased] job's slot
//     recorded skipped in its history, by the one replica whose claim
//     recorded it ([ReasonStillRunning]: a run of an earlier slot held the
//     job at the tick, and no replica runs the slot; [ReasonPaused]); a
//     late wake-up; a job with no further slots; a Shutdown ("runs" left)
//     or a Remove that gave up waiting; a leased job's run that ended after
//     its run lease was lost; a failed attempt whose retry would come
//     after its slot's claim window, which its completion closes as failed
//     (or, if the completion left it open, "retry_due", "slot_end"); a clock
//     that disagrees with Redis's by more than a second, or a twelfth of
//     the shortest leased interval ("skew", "limit"), checked at start and
//     every [SkewCheckEvery].
//   - Debug: a tick its admission or a leased job's record refused, such
//     as [ReasonLeaseHeld], [ReasonRunning], [ReasonPaused] or
//     [ReasonSkippedElsewhere] (the replica that runs logs the run, the
//     one that records a skip logs it); the ticks an outage skips after
//     its first.
//
// An admission that fails (a leased job's claim that Redis can't answer,
// or its run's end that Redis can't record) is an outage of the job: logged
// once, at Error, when it begins, and once when the admission answers
// again, with "skipped", the number of ticks it skipped, and "down", how
// long it lasted.
//
// Every record has the attribute "replica" (see [WithReplica]); a job's
// records have "job" and "tick" (this replica's count of the job's ticks,
// [Tick.Run]: the same number on two replicas names different ticks), and
// a run's and a skip's also "slot" and "scheduled". A [Leased] job's runs
// also have "attempt", so that job, slot and attempt name a run alike on
// every replica, and "trigger" for a retry, catch-up or requested run; at
// Debug, "record", the Redis key of its record, and for a duration policy
// "lease", the key of the Rust crate's lease.
//
// Without WithLogger the runtime is silent.
func WithLogger(l *slog.Logger) Option {
	return func(o *options) error {
		if l == nil {
			return fmt.Errorf("%w: WithLogger(nil)", ErrInvalidOption)
		}
		o.log = l
		return nil
	}
}

// WithReplica names the replica in the runtime's log records, as their
// attribute "replica", and in the records of [Leased] jobs, so that a
// deployment's logs and [Admin.Status] say which replica ran each run. The
// default is the host's name, the process id and four random characters,
// "web-7f9c4/1/k3xq": the host names the pod on Kubernetes, and the random
// part tells apart two runtimes of one process, or processes of one id in
// two containers. name must not be empty.
func WithReplica(name string) Option {
	return func(o *options) error {
		if name == "" {
			return fmt.Errorf("%w: WithReplica(\"\")", ErrInvalidOption)
		}
		o.replica = name
		return nil
	}
}

// defaultReplica is the replica's name without WithReplica.
func defaultReplica() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown-host"
	}
	return host + "/" + strconv.Itoa(os.Getpid()) + "/" + randomName(4)
}

// randomName returns n random lower-case letters and digits.
func randomName(n int) string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, n)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b)
}

// Observer is told about every run, for metrics. Each field may be nil.
//
// The functions are called synchronously, from the run's goroutine or from
// the runtime's scheduler, and concurrently for different runs: they must be
// safe for concurrent use, fast (a counter, not a network call) and must not
// panic.
type Observer struct {
	// RunStarted is called right before Process.
	RunStarted func(t Tick)
	// RunFinished is called when Process returned, with its error (a
	// *PanicError if it panicked) and how long it took.
	RunFinished func(t Tick, err error, took time.Duration)
	// RunSkipped is called for a tick that did not run, with why: one of
	// the Reason constants or an Admission's own reason. err is the
	// Admission's error for ReasonAdmissionFailed, nil otherwise.
	RunSkipped func(t Tick, reason string, err error)
	// RunContext, if set, is called right before Process, after
	// RunStarted, with the run's context; Process gets the context it
	// returns. A tracer starts the run's span there, so that the spans
	// the job starts are its children. It must return a context derived
	// from ctx.
	RunContext func(ctx context.Context, t Tick) context.Context
	// ClockSkew is called, for a runtime with [Leased] jobs, at its start
	// and then every [SkewCheckEvery], with how far the runtime's clock is
	// ahead of the Redis server's (negative: behind), as measured from the
	// server's TIME halfway through the round trip.
	ClockSkew func(skew time.Duration)
}

// SkewCheckEvery is how often a runtime with [Leased] jobs compares its
// clock with Redis's (see [Observer.ClockSkew]).
const SkewCheckEvery = 10 * time.Minute

// WithObserver makes the runtime report runs to o. A later WithObserver
// replaces an earlier one.
func WithObserver(o Observer) Option {
	return func(opts *options) error {
		opts.observer = o
		return nil
	}
}

// WithMaxOverlap sets how many runs of one [interval.AfterStart] job may be
// in progress at once; the default is [DefaultMaxOverlap]. A tick that comes
// when a job is at its limit is skipped with [ReasonTooManyRuns], so a job
// that is slower than its interval for a long time holds at most n
// goroutines, not one more every interval. n must be at least 1. Other
// policies never overlap and ignore it.
func WithMaxOverlap(n int) Option {
	return func(o *options) error {
		if n < 1 {
			return fmt.Errorf("%w: WithMaxOverlap(%d): the limit must be at least 1", ErrInvalidOption, n)
		}
		o.maxOverlap = n
		return nil
	}
}

// WithClock makes the runtime read the time from now instead of time.Now:
// the times it schedules by and hands to jobs in [Tick]. Timers still wait
// on the monotonic clock. It exists for tests and simulations, to run
// replicas whose clocks are offset or to step a clock the way a stalled
// machine or an NTP correction does; a service has no use for it. now must
// be safe for concurrent use.
func WithClock(now func() time.Time) Option {
	return func(o *options) error {
		if now == nil {
			return fmt.Errorf("%w: WithClock(nil)", ErrInvalidOption)
		}
		o.now = now
		return nil
	}
}

// Admission decides whether a run goes ahead. The runtime calls it right
// before each run of its job, the startup run included, in the run's
// goroutine and with the run's context and tick.
//
// It returns admitted true to let the run go ahead. Returning false skips the
// run, which is logged and reported to [Observer.RunSkipped] with reason
// (or [ReasonNotAdmitted] if reason is empty). Returning an error skips the
// run too, failing closed: it is logged with the error and reported with
// [ReasonAdmissionFailed]; a panic is treated as an error. Either way the job
// keeps its schedule, and the skipped tick counts as a run that started and
// finished at its start: an AtLeast(d) job ticks again d later.
type Admission func(ctx context.Context, t Tick) (admitted bool, reason string, err error)

// WithAdmission puts admit in front of every run of the job named job (see
// [JobName]). A job has at most one admission. [Start] refuses an admission
// for a name that none of its jobs has, and a nil admit.
func WithAdmission(job string, admit Admission) Option {
	return func(o *options) error {
		if admit == nil {
			return fmt.Errorf("%w: WithAdmission(%q, nil)", ErrInvalidOption, job)
		}
		if _, dup := o.admissions[job]; dup {
			return fmt.Errorf("%w: job %q has two admissions", ErrInvalidOption, job)
		}
		if o.admissions == nil {
			o.admissions = make(map[string]Admission)
		}
		o.admissions[job] = admit
		return nil
	}
}
