package wakuwaku_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wakuwaku-go/wakuwaku"
	"github.com/wakuwaku-go/wakuwaku/cron"
	"github.com/wakuwaku-go/wakuwaku/interval"
	"github.com/wakuwaku-go/wakuwaku/lock"
	"github.com/wakuwaku-go/wakuwaku/service"
)

// counting is a job that counts its runs.
type counting struct {
	name string
	runs *atomic.Int64
}

func (j *counting) Name() string                             { return j.name }
func (j *counting) Interval() interval.Interval              { return interval.AtLeast(time.Hour) }
func (j *counting) Process(context.Context, cron.Tick) error { j.runs.Add(1); return nil }

type settings struct{ name string }

// pinger is a job that uses its Redis client only when it runs: given a nil
// one, every run panics.
type pinger struct {
	c    *redis.Client
	runs *atomic.Int64
}

func (j *pinger) Name() string                { return "pinger" }
func (j *pinger) Interval() interval.Interval { return interval.AtLeast(time.Hour) }
func (j *pinger) Process(ctx context.Context, _ cron.Tick) error {
	j.runs.Add(1)
	return j.c.Ping(ctx).Err()
}

// funcJob is a job of a kind that can be nil without being a pointer. Its
// methods work on a nil one; its runs would panic.
type funcJob func(context.Context) error

func (funcJob) Name() string                                     { return "func" }
func (funcJob) Interval() interval.Interval                      { return interval.AtLeast(time.Hour) }
func (f funcJob) Process(ctx context.Context, _ cron.Tick) error { return f(ctx) }

func TestBuilderStart(t *testing.T) {
	var runs atomic.Int64
	b := wakuwaku.NewServiceBuilder(&settings{"a"}, &runs)
	wakuwaku.CronJob(b, func(s *settings) *counting { return &counting{name: s.name, runs: &runs} })
	services, crons, err := b.Start()
	if err != nil {
		t.Fatalf("Start = %v", err)
	}
	if err := crons.Shutdown(t.Context()); err != nil {
		t.Errorf("Shutdown = %v", err)
	}
	if runs.Load() != 1 {
		t.Errorf("%d runs, want the startup run", runs.Load())
	}
	if job, err := service.Lookup[*counting](services); err != nil || job.name != "a" {
		t.Errorf("Lookup[*counting] = %v, %v, want the built job", job, err)
	}
	if s, ok := service.Get[*settings](services); !ok || s.name != "a" {
		t.Errorf("Get[*settings] = %v, %v", s, ok)
	}
	if _, _, err := b.Start(); err == nil {
		t.Error("second Start = nil error, want an error")
	}
}

func TestBuilderRefuses(t *testing.T) {
	var runs atomic.Int64
	newJob := func(s *settings) *counting { return &counting{name: "job", runs: &runs} }
	tests := []struct {
		name    string
		build   func() *wakuwaku.ServiceBuilder
		is      error    // errors.Is target, if any
		job     bool     // whether the error must be a *JobError
		mention []string // what the message must name
	}{
		{
			name:    "missing dependency",
			build:   func() *wakuwaku.ServiceBuilder { return wakuwaku.CronJob(wakuwaku.NewServiceBuilder(42), newJob) },
			is:      service.ErrMissing,
			mention: []string{"*wakuwaku_test.counting", "*wakuwaku_test.settings"},
		},
		{
			name: "two dependencies of one type",
			build: func() *wakuwaku.ServiceBuilder {
				return wakuwaku.CronJob(wakuwaku.NewServiceBuilder(&settings{}, &settings{}), newJob)
			},
			is:      service.ErrAmbiguous,
			mention: []string{"*wakuwaku_test.settings"},
		},
		{
			name: "an interface two dependencies implement",
			build: func() *wakuwaku.ServiceBuilder {
				b := wakuwaku.NewServiceBuilder(redis.NewClient(&redis.Options{}), redis.NewClusterClient(&redis.ClusterOptions{}))
				return wakuwaku.CronJob(b, func(redis.UniversalClient) *counting { return &counting{name: "x", runs: &runs} })
			},
			is:      service.ErrAmbiguous,
			mention: []string{"redis.UniversalClient", "*wakuwaku_test.counting"},
		},
		{
			name: "nil *redis.Client dependency",
			build: func() *wakuwaku.ServiceBuilder {
				b := wakuwaku.NewServiceBuilder((*redis.Client)(nil))
				return wakuwaku.CronJob(b, func(c *redis.Client) *pinger { return &pinger{c: c, runs: &runs} })
			},
			mention: []string{"nil *redis.Client"},
		},
		{
			name: "nil constructor",
			build: func() *wakuwaku.ServiceBuilder {
				return wakuwaku.CronJob[*settings, *counting](wakuwaku.NewServiceBuilder(&settings{}), nil)
			},
			mention: []string{"*wakuwaku_test.counting", "nil"},
		},
		{
			name: "constructor returns nil",
			build: func() *wakuwaku.ServiceBuilder {
				return wakuwaku.CronJob(wakuwaku.NewServiceBuilder(&settings{}), func(*settings) *counting { return nil })
			},
			job:     true,
			mention: []string{"*wakuwaku_test.counting", "nil job"},
		},
		{
			name: "constructor returns a nil func",
			build: func() *wakuwaku.ServiceBuilder {
				return wakuwaku.CronJob(wakuwaku.NewServiceBuilder(&settings{}), func(*settings) funcJob { return nil })
			},
			job:     true,
			mention: []string{"wakuwaku_test.funcJob", "nil job"},
		},
		{
			name: "constructor panics",
			build: func() *wakuwaku.ServiceBuilder {
				return wakuwaku.CronJob(wakuwaku.NewServiceBuilder(&settings{}), func(*settings) *counting { panic("no config") })
			},
			mention: []string{"*wakuwaku_test.counting", "no config"},
		},
		{
			name: "two jobs with one name",
			build: func() *wakuwaku.ServiceBuilder {
				b := wakuwaku.CronJob(wakuwaku.NewServiceBuilder(&settings{}), newJob)
				return wakuwaku.CronJob(b, newJob)
			},
			is:      cron.ErrInvalidJob,
			job:     true,
			mention: []string{`"job"`, "*wakuwaku_test.counting"},
		},
		{
			name: "a leased job with no name",
			build: func() *wakuwaku.ServiceBuilder {
				return wakuwaku.CronJob(wakuwaku.NewServiceBuilder(lock.NewDB(redis.NewClient(&redis.Options{}))), func(db lock.DB) cron.Job {
					return unnamedLeased{db: db}
				})
			},
			is:      cron.ErrInvalidJob,
			job:     true,
			mention: []string{"has no name", "cron.Job", "lock.DB"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			services, crons, err := tt.build().Start()
			if err == nil {
				crons.Shutdown(t.Context())
				t.Fatal("Start = nil error, want an error")
			}
			if services != nil || crons != nil {
				t.Errorf("Start returned services or crons with an error")
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("Start = %v, want errors.Is %v", err, tt.is)
			}
			if _, ok := errors.AsType[*wakuwaku.JobError](err); tt.job && !ok {
				t.Errorf("Start = %v, want a *wakuwaku.JobError", err)
			}
			for _, m := range tt.mention {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("Start = %q, want it to name %s", err, m)
				}
			}
		})
	}
	if n := runs.Load(); n != 0 {
		t.Errorf("%d runs after refused starts, want 0", n)
	}
}

// configured is a job whose schedule comes from configuration.
type configured struct {
	every interval.Interval
	runs  *atomic.Int64
}

func (j *configured) Name() string                             { return "configured" }
func (j *configured) Interval() interval.Interval              { return j.every }
func (j *configured) Process(context.Context, cron.Tick) error { j.runs.Add(1); return nil }

type config struct{ spec string }

func newConfigured(runs *atomic.Int64) func(config) (*configured, error) {
	return func(c config) (*configured, error) {
		every, err := interval.Cron(c.spec)
		if err != nil {
			return nil, err
		}
		return &configured{every: every, runs: runs}, nil
	}
}

// TestCronJobErr checks that a constructor's error, such as a bad spec
// read from configuration, fails Start with a *JobError naming the job,
// before any job runs, and that a good one starts.
func TestCronJobErr(t *testing.T) {
	var runs atomic.Int64
	b := wakuwaku.NewServiceBuilder(config{spec: "0 3 * *"})
	wakuwaku.CronJob(b, func(c config) *counting { return &counting{name: "other", runs: &runs} })
	wakuwaku.CronJobErr(b, newConfigured(&runs))
	_, crons, err := b.Start()
	var jobErr *wakuwaku.JobError
	var specErr *interval.SpecError
	if !errors.As(err, &jobErr) || !errors.As(err, &specErr) || crons != nil {
		t.Fatalf("Start = %v, %v; want a *JobError holding a *interval.SpecError", crons, err)
	}
	if !strings.Contains(err.Error(), "configured") || specErr.Spec != "0 3 * *" {
		t.Errorf("Start = %v, want it to name the job and quote the spec", err)
	}
	if n := runs.Load(); n != 0 {
		t.Errorf("%d runs before Start failed, want 0", n)
	}

	b = wakuwaku.NewServiceBuilder(config{spec: "0 3 * * *"})
	wakuwaku.CronJobErr(b, newConfigured(&runs))
	_, crons, err = b.Start()
	if err != nil {
		t.Fatalf("Start = %v", err)
	}
	if err := crons.Shutdown(t.Context()); err != nil {
		t.Errorf("Shutdown = %v", err)
	}
	if n := runs.Load(); n != 1 {
		t.Errorf("%d runs, want the startup run", n)
	}
}

// unnamedLeased is a leased job with neither a Name method nor a lease
// name, which the runtime refuses.
type unnamedLeased struct{ db lock.DB }

func (unnamedLeased) Interval() interval.Interval              { return interval.AtLeast(time.Hour) }
func (unnamedLeased) Process(context.Context, cron.Tick) error { return nil }
func (j unnamedLeased) Lease() cron.LeaseConfig                { return cron.LeaseConfig{DB: j.db} }
