package wakuwaku_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/wakuwaku-go/wakuwaku"
	"github.com/wakuwaku-go/wakuwaku/cron"
	"github.com/wakuwaku-go/wakuwaku/interval"
)

// TestCronsChange adds, replaces and removes jobs through the handle that
// ServiceBuilder.Start returns.
func TestCronsChange(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var first, added atomic.Int64
		b := wakuwaku.NewServiceBuilder(settings{name: "a"})
		wakuwaku.CronJob(b, func(s settings) *counting { return &counting{name: s.name, runs: &first} })
		_, crons, err := b.Start()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { crons.Shutdown(context.Background()) })
		if err := crons.Add(&counting{name: "b", runs: &added}); err != nil {
			t.Fatalf("Add = %v", err)
		}
		synctest.Wait()
		if jobs := crons.Jobs(); len(jobs) != 2 || jobs[0].Name != "a" || jobs[1].Name != "b" {
			t.Errorf("Jobs = %+v, want a and b", jobs)
		}
		if added.Load() != 1 {
			t.Errorf("b ran %d times, want its startup run", added.Load())
		}
		every := interval.MustCron("*/10 * * * *")
		if err := crons.Replace(cron.Func("b", every, func(context.Context, cron.Tick) error { added.Add(1); return nil })); err != nil {
			t.Fatalf("Replace = %v", err)
		}
		time.Sleep(31 * time.Minute)
		if added.Load() != 4 {
			t.Errorf("b ran %d times, want 4: its startup run, then at 10, 20 and 30 minutes", added.Load())
		}
		if err := crons.Remove(t.Context(), "a"); err != nil {
			t.Fatalf("Remove = %v", err)
		}
		if err := crons.Remove(t.Context(), "a"); !errors.Is(err, cron.ErrUnknownJob) {
			t.Errorf("Remove again = %v, want %v", err, cron.ErrUnknownJob)
		}
		if jobs := crons.Jobs(); len(jobs) != 1 || jobs[0].Name != "b" || jobs[0].Interval != every {
			t.Errorf("Jobs = %+v, want b on %v", jobs, every)
		}
	})
	var none *wakuwaku.Crons
	if err := none.Add(&counting{name: "x"}); !errors.Is(err, cron.ErrShutdown) {
		t.Errorf("nil Crons: Add = %v, want %v", err, cron.ErrShutdown)
	}
	if jobs := none.Jobs(); jobs != nil {
		t.Errorf("nil Crons: Jobs = %v, want nil", jobs)
	}
}
