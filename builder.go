package wakuwaku

import (
	"errors"
	"fmt"
	"reflect"

	"github.com/wakuwaku-go/wakuwaku/cron"
	"github.com/wakuwaku-go/wakuwaku/internal/servicehook"
	"github.com/wakuwaku-go/wakuwaku/internal/typednil"
	"github.com/wakuwaku-go/wakuwaku/service"
)

// ServiceBuilder collects a service's dependencies and the constructors of
// its cron jobs, and starts them all at once with [ServiceBuilder.Start].
//
// Build it in main, in one goroutine: NewServiceBuilder, then [CronJob] for
// each job, then Start. It is not safe for concurrent use.
type ServiceBuilder struct {
	deps    []any
	recipes []recipe
	options []cron.Option
	started bool
}

// recipe is how one cron job is built: the type its constructor needs and
// the constructor, wrapped to look that type up.
type recipe struct {
	job   reflect.Type // J, for errors
	dep   reflect.Type // D
	build func(*service.Services) (cron.Job, error)
}

// NewServiceBuilder returns a builder holding deps, each known by its Go
// type: a *redis.Client, a lock.DB, a config struct. A constructor that asks
// for an interface type gets the one dependency that implements it. Start
// refuses a nil dependency, a typed nil such as a (*redis.Client)(nil)
// included.
func NewServiceBuilder(deps ...any) *ServiceBuilder {
	return &ServiceBuilder{deps: deps}
}

// CronJob registers a cron job built by create from the dependency of type
// D. The job is built by [ServiceBuilder.Start], not now, and runs from then
// on in this replica: once at startup, then on its interval. It returns b,
// for chaining.
func CronJob[D any, J cron.Job](b *ServiceBuilder, create func(D) J) *ServiceBuilder {
	var build func(D) (J, error)
	if create != nil {
		build = func(d D) (J, error) { return create(d), nil }
	}
	return CronJobErr(b, build)
}

// CronJobErr is like [CronJob] for a constructor that can fail, such as one
// that reads its schedule from configuration with interval.Cron: an error
// from create fails Start with a *[JobError] that names the job, before any
// job runs.
func CronJobErr[D any, J cron.Job](b *ServiceBuilder, create func(D) (J, error)) *ServiceBuilder {
	r := recipe{job: reflect.TypeFor[J](), dep: reflect.TypeFor[D]()}
	r.build = func(s *service.Services) (job cron.Job, err error) {
		if create == nil {
			return nil, errors.New("the constructor is nil")
		}
		d, err := service.Lookup[D](s)
		if err != nil {
			return nil, err
		}
		defer func() {
			if v := recover(); v != nil {
				err = fmt.Errorf("the constructor panicked: %v", v)
			}
		}()
		j, err := create(d)
		if err != nil {
			return nil, fmt.Errorf("the constructor failed: %w", err)
		}
		return j, nil
	}
	b.recipes = append(b.recipes, r)
	return b
}

// WithCronOptions passes options, such as cron.WithLogger and
// cron.WithObserver, to the runtime that Start starts. It returns b.
func (b *ServiceBuilder) WithCronOptions(opts ...cron.Option) *ServiceBuilder {
	b.options = append(b.options, opts...)
	return b
}

// JobError is the error [ServiceBuilder.Start] returns for a cron job it
// could not build: its constructor's dependency is missing or ambiguous, or
// the constructor is nil, failed, panicked or returned a nil job. Err says which;
// errors.Is(err, service.ErrMissing) and service.ErrAmbiguous work through
// it.
type JobError struct {
	Job        reflect.Type // what the constructor returns
	Dependency reflect.Type // what it takes
	Err        error
}

// Error names the job, the dependency's type and what went wrong.
func (e *JobError) Error() string {
	return fmt.Sprintf("wakuwaku: building cron job %v from a %v: %v", e.Job, e.Dependency, e.Err)
}

// Unwrap returns the cause.
func (e *JobError) Unwrap() error { return e.Err }

// Start builds every cron job from its dependency and starts them: each
// job's startup run has begun when Start returns. It returns the services
// (the dependencies and the built jobs, by type; a type two jobs share is
// ambiguous) and the handle whose Shutdown stops the jobs.
//
// If a dependency is nil, missing or ambiguous, two dependencies have one
// type, a constructor is nil or fails, or the runtime refuses a job (two
// jobs with one name, a lease that can't work), Start returns an error, a
// *JobError where one job is to blame, and no job has run. Start may be
// called once.
func (b *ServiceBuilder) Start() (*service.Services, *Crons, error) {
	if b.started {
		return nil, nil, errors.New("wakuwaku: ServiceBuilder.Start called twice")
	}
	b.started = true
	deps, err := service.New(b.deps...)
	if err != nil {
		return nil, nil, fmt.Errorf("wakuwaku: dependencies: %w", err)
	}
	jobs := make([]cron.Job, 0, len(b.recipes))
	for _, r := range b.recipes {
		job, err := r.build(deps)
		if err == nil && typednil.Is(job) {
			err = errors.New("the constructor returned a nil job")
		}
		if err != nil {
			return nil, nil, &JobError{Job: r.job, Dependency: r.dep, Err: err}
		}
		jobs = append(jobs, job)
	}
	rt, err := cron.Start(jobs, b.options...)
	if err != nil {
		if bad, ok := errors.AsType[*cron.InvalidJobError](err); ok && bad.Index < len(b.recipes) {
			r := b.recipes[bad.Index] // jobs is in the recipes' order
			return nil, nil, &JobError{Job: r.job, Dependency: r.dep, Err: err}
		}
		return nil, nil, fmt.Errorf("wakuwaku: %w", err)
	}
	all := append(append([]any(nil), b.deps...), anys(jobs)...)
	return servicehook.Collect(all...).(*service.Services), newCrons(rt), nil
}

func anys(jobs []cron.Job) []any {
	out := make([]any, len(jobs))
	for i, j := range jobs {
		out[i] = j
	}
	return out
}
