package cron_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/wakuwaku-go/wakuwaku/cron"
	"github.com/wakuwaku-go/wakuwaku/interval"
)

// Report is a job without a Name method: it is known by its type.
type Report struct{ every interval.Interval }

func (r Report) Interval() interval.Interval            { return r.every }
func (Report) Process(context.Context, cron.Tick) error { return nil }

// PointerReport is a job whose methods have pointer receivers.
type PointerReport struct{}

func (*PointerReport) Interval() interval.Interval              { return interval.AtLeast(time.Hour) }
func (*PointerReport) Process(context.Context, cron.Tick) error { return nil }

// Generic is a job of a generic type.
type Generic[T any] struct{}

func (Generic[T]) Interval() interval.Interval              { return interval.AtLeast(time.Hour) }
func (Generic[T]) Process(context.Context, cron.Tick) error { return nil }

// FuncJob, MapJob, ChanJob and SliceJob are jobs of kinds that can be nil
// without being pointers. Their methods don't touch the value, so a nil one
// has working methods and nothing behind it to run.
type (
	FuncJob  func(context.Context) error
	MapJob   map[string]int
	ChanJob  chan struct{}
	SliceJob []string
)

func (FuncJob) Interval() interval.Interval { return interval.AtLeast(time.Hour) }
func (f FuncJob) Process(ctx context.Context, _ cron.Tick) error {
	return f(ctx)
}
func (MapJob) Interval() interval.Interval { return interval.AtLeast(time.Hour) }
func (m MapJob) Process(context.Context, cron.Tick) error {
	m["runs"]++
	return nil
}
func (ChanJob) Interval() interval.Interval { return interval.AtLeast(time.Hour) }
func (c ChanJob) Process(context.Context, cron.Tick) error {
	close(c)
	return nil
}
func (SliceJob) Interval() interval.Interval { return interval.AtLeast(time.Hour) }
func (s SliceJob) Process(context.Context, cron.Tick) error {
	s[0] = "ran"
	return nil
}

// TestStartRefusesNilKinds checks that a nil job of every kind that can be
// nil is refused by Start, with an error that names its type, rather than
// panicking at every run.
func TestStartRefusesNilKinds(t *testing.T) {
	tests := []struct {
		name string
		job  cron.Job
		want string
	}{
		{"func", FuncJob(nil), "jobs[0] is a nil cron_test.FuncJob"},
		{"map", MapJob(nil), "jobs[0] is a nil cron_test.MapJob"},
		{"chan", ChanJob(nil), "jobs[0] is a nil cron_test.ChanJob"},
		{"slice", SliceJob(nil), "jobs[0] is a nil cron_test.SliceJob"},
		{"pointer", (*PointerReport)(nil), "jobs[0] is a nil *cron_test.PointerReport"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var panics atomic.Int64
				rt, err := cron.Start([]cron.Job{tc.job}, cron.WithObserver(cron.Observer{
					RunFinished: func(_ cron.Tick, err error, _ time.Duration) {
						if _, ok := errors.AsType[*cron.PanicError](err); ok {
							panics.Add(1)
						}
					},
				}))
				if err == nil {
					synctest.Wait()
					rt.Shutdown(t.Context())
					t.Fatalf("Start(%T(nil)) = nil error, want %v (%d runs panicked)", tc.job, cron.ErrInvalidJob, panics.Load())
				}
				if !errors.Is(err, cron.ErrInvalidJob) || rt != nil {
					t.Errorf("Start(%T(nil)) = %v, %v; want nil, %v", tc.job, rt, err, cron.ErrInvalidJob)
				}
				if !strings.Contains(err.Error(), tc.want) {
					t.Errorf("Start(%T(nil)) = %q, want it to say %q", tc.job, err, tc.want)
				}
			})
		})
	}
}

func TestJobName(t *testing.T) {
	tests := []struct {
		job  cron.Job
		want string
	}{
		{Report{}, "cron_test.Report"},
		{&Report{}, "cron_test.Report"},
		{&PointerReport{}, "cron_test.PointerReport"},
		{Generic[int]{}, "cron_test.Generic[int]"},
		{&testJob{name: "nightly"}, "nightly"},
		{nil, ""},
		{(*testJob)(nil), ""}, // its Name method would dereference it
		{FuncJob(nil), ""},
	}
	for _, tc := range tests {
		if got := cron.JobName(tc.job); got != tc.want {
			t.Errorf("JobName(%T) = %q, want %q", tc.job, got, tc.want)
		}
	}
}

func TestStartRefuses(t *testing.T) {
	hourly := interval.AtLeast(time.Hour)
	admit := func(context.Context, cron.Tick) (bool, string, error) { return true, "", nil }
	tests := []struct {
		name string
		jobs []cron.Job
		opts []cron.Option
		want error
	}{
		{"nil job", []cron.Job{Report{every: hourly}, nil}, nil, cron.ErrInvalidJob},
		{"nil pointer job", []cron.Job{(*PointerReport)(nil)}, nil, cron.ErrInvalidJob},
		{"zero interval", []cron.Job{Report{}}, nil, cron.ErrInvalidJob},
		{"empty name", []cron.Job{&testJob{every: hourly}}, nil, cron.ErrInvalidJob},
		{"two jobs of one type", []cron.Job{Report{every: hourly}, &Report{every: hourly}}, nil, cron.ErrInvalidJob},
		{"two jobs of one name", []cron.Job{&testJob{name: "a", every: hourly}, &testJob{name: "a", every: hourly}}, nil, cron.ErrInvalidJob},
		{"nil option", []cron.Job{Report{every: hourly}}, []cron.Option{nil}, cron.ErrInvalidOption},
		{"nil logger", []cron.Job{Report{every: hourly}}, []cron.Option{cron.WithLogger(nil)}, cron.ErrInvalidOption},
		{"empty replica", []cron.Job{Report{every: hourly}}, []cron.Option{cron.WithReplica("")}, cron.ErrInvalidOption},
		{"overlap 0", []cron.Job{Report{every: hourly}}, []cron.Option{cron.WithMaxOverlap(0)}, cron.ErrInvalidOption},
		{"admission for no job", []cron.Job{Report{every: hourly}}, []cron.Option{cron.WithAdmission("Report", admit)}, cron.ErrInvalidOption},
		{"nil admission", []cron.Job{Report{every: hourly}}, []cron.Option{cron.WithAdmission("cron_test.Report", nil)}, cron.ErrInvalidOption},
		{"two admissions", []cron.Job{Report{every: hourly}}, []cron.Option{
			cron.WithAdmission("cron_test.Report", admit), cron.WithAdmission("cron_test.Report", admit),
		}, cron.ErrInvalidOption},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rt, err := cron.Start(tc.jobs, tc.opts...)
				if !errors.Is(err, tc.want) || rt != nil {
					t.Errorf("Start = %v, %v; want nil, %v", rt, err, tc.want)
				}
				t.Log(err)
			})
		})
	}
}

func TestStartAccepts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		admit := func(context.Context, cron.Tick) (bool, string, error) { return true, "", nil }
		start(t, []cron.Job{Report{every: interval.AtLeast(time.Hour)}, &PointerReport{}},
			cron.WithAdmission("cron_test.PointerReport", admit), cron.WithMaxOverlap(1))
	})
}
