package cron_test

import (
	"context"
	"testing"
	"time"

	"github.com/wakuwaku-go/wakuwaku/cron"
	"github.com/wakuwaku-go/wakuwaku/internal/redistest"
	"github.com/wakuwaku-go/wakuwaku/interval"
	"github.com/wakuwaku-go/wakuwaku/lock"
)

// TestReplaceInsideSpreadWindow replaces a leased */10s job spread over
// 9s by a */20s one with the same spread, on a real redis-server, after
// slot S began and before its due time (S plus the job's offset): S, a
// slot of both schedules, runs at its due time. Replace used to queue the
// job's next tick at the next slot's start, so S had no claim, no skip and
// no history entry on any replica that was replaced inside the window.
func TestReplaceInsideSpreadWindow(t *testing.T) {
	srv := redistest.Start(t)
	db := lock.NewDB(srv.Client(t))
	before := interval.MustCron("*/10 * * * * *").WithoutStartupRun().WithSpread(9 * time.Second)
	after := interval.MustCron("*/20 * * * * *").WithoutStartupRun().WithSpread(9 * time.Second)
	// A job whose offset into a slot leaves room to replace it first.
	name := ""
	for _, n := range []string{"report", "sweep", "invoice", "export", "rebuild", "digest", "audit", "billing"} {
		if d := after.Due(n, time.Unix(0, 0)).Sub(time.Unix(0, 0)); d >= 3*time.Second {
			name = n
			break
		}
	}
	if name == "" {
		t.Fatal("no job name with an offset of 3s or more")
	}
	ran := make(chan cron.Tick, 4)
	job := func(every interval.Interval) cron.Job {
		return &leasedJob{testJob: testJob{name: name, every: every, process: func(_ context.Context, tk cron.Tick) error {
			ran <- tk
			return nil
		}}, lease: cron.LeaseConfig{DB: db}}
	}
	// S: the next slot of both schedules that starts at least a second
	// from now.
	S := time.Now().Add(time.Second).Truncate(20 * time.Second).Add(20 * time.Second)
	due := after.Due(name, S)
	rt, err := cron.Start([]cron.Job{job(before)}, cron.WithReplica("a"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Shutdown(context.Background()) })
	time.Sleep(time.Until(S.Add(500 * time.Millisecond)))
	for len(ran) > 0 {
		<-ran // the slots before S
	}
	if err := rt.Replace(job(after)); err != nil {
		t.Fatal(err)
	}
	select {
	case tk := <-ran:
		if !tk.Slot.Start.Equal(S) {
			t.Errorf("ran slot %v, want %v (due %v)", tk.Slot.Start, S, due)
		}
	case <-time.After(time.Until(due.Add(2 * time.Second))):
		t.Errorf("slot %v, due at %v, did not run by 2s after", S, due)
	}
}
