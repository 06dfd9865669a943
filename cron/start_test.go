package cron_test

import (
	"context"
	"errors"
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
