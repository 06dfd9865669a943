package cron

import (
	"context"
	"fmt"
	"time"

	"github.com/wakuwaku-go/wakuwaku/interval"
)

// Func returns a job named name that runs f on the schedule every: a job
// without a type of its own. A job made by Func behaves as a job type with
// the same Name, Interval and Process methods would, and, with [WithLease],
// as one that also has the Lease method of a [Leased] job; with
// [WithRunDeadline], the RunDeadline method of a [Deadlined] one.
//
// A job that should not run at startup says so in its interval
// ([interval.Interval.WithoutStartupRun]). [Start] checks the job as it
// checks any other: it refuses an empty name or the zero interval. Func
// panics if f or an option is nil, a programmer's error like a nil job.
func Func(name string, every interval.Interval, f func(ctx context.Context, t Tick) error, opts ...FuncOption) Job {
	if f == nil {
		panic(fmt.Sprintf("cron: Func(%q) with a nil function", name))
	}
	var o funcOptions
	for i, opt := range opts {
		if opt == nil {
			panic(fmt.Sprintf("cron: Func(%q): option %d is nil", name, i))
		}
		opt(&o)
	}
	j := funcJob{name: name, every: every, f: f, deadline: o.deadline}
	if o.leased {
		return &leasedFunc{funcJob: j, lease: o.lease}
	}
	return &j
}

// FuncOption configures a job made by [Func].
type FuncOption func(*funcOptions)

type funcOptions struct {
	lease    LeaseConfig
	leased   bool
	deadline time.Duration
}

// WithLease makes a job made by [Func] a [Leased] job with the lease l: its
// Lease method returns l. The lease is named after the job unless l.Name
// says otherwise; [Start] checks l as it checks any leased job's.
func WithLease(l LeaseConfig) FuncOption {
	return func(o *funcOptions) { o.lease, o.leased = l, true }
}

// WithRunDeadline makes a job made by [Func] a [Deadlined] job whose runs
// may take d each: its RunDeadline method returns d. [Start] refuses a
// negative d; 0 is no limit.
func WithRunDeadline(d time.Duration) FuncOption {
	return func(o *funcOptions) { o.deadline = d }
}

// funcJob is a job made by Func without a lease.
type funcJob struct {
	name     string
	every    interval.Interval
	f        func(context.Context, Tick) error
	deadline time.Duration
}

func (j *funcJob) Name() string                              { return j.name }
func (j *funcJob) Interval() interval.Interval               { return j.every }
func (j *funcJob) Process(ctx context.Context, t Tick) error { return j.f(ctx, t) }
func (j *funcJob) RunDeadline() time.Duration                { return j.deadline }

// leasedFunc is a job made by Func with WithLease: a type apart, since a
// job is Leased by having the method.
type leasedFunc struct {
	funcJob
	lease LeaseConfig
}

func (j *leasedFunc) Lease() LeaseConfig { return j.lease }
