package crontest

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wakuwaku-go/wakuwaku/cron"
	"github.com/wakuwaku-go/wakuwaku/interval"
	"github.com/wakuwaku-go/wakuwaku/lock"
)

// recorded returns an hourly leased job with the given lease settings
// whose runs take work.
func recorded(every interval.Interval, d time.Duration, lease cron.LeaseConfig) func(*redis.Client) []cron.Job {
	return func(rdb *redis.Client) []cron.Job {
		l := lease
		l.DB = lock.NewDB(rdb)
		return []cron.Job{cron.Func("report", every, func(ctx context.Context, _ cron.Tick) error { return work(ctx, d) }, cron.WithLease(l))}
	}
}

// runningAt returns the run of the cluster in progress at the bubble's
// now, failing t if there is none.
func runningAt(t *testing.T, c *Cluster) Run {
	t.Helper()
	for _, r := range c.Runs() {
		if r.End.IsZero() {
			return r
		}
	}
	t.Fatal("no run in progress")
	return Run{}
}

// TestKilledRunRetried kills the replica whose run is going, for a job
// whose slots get three attempts: another replica runs the slot again as
// soon as the dead run's lease has run out, and the slot is done once.
func TestKilledRunRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		t0 := time.Now()
		c := New(t, 3, recorded(hourly, 10*time.Minute, cron.LeaseConfig{Attempts: 3, RunTTL: time.Minute}))
		time.Sleep(5 * time.Minute)
		victim := runningAt(t, c)
		c.Kill(victim.Replica)
		killed := time.Now()
		time.Sleep(time.Hour - 5*time.Minute - time.Second) // to the end of the slot
		var slot []Run
		for _, r := range c.Runs() {
			if r.Tick.Slot.Start.Equal(t0) {
				slot = append(slot, r)
			}
		}
		if len(slot) != 2 {
			t.Fatalf("slot %v had %d runs: %v; want the killed one and one retry", t0, len(slot), describeRuns(slot))
		}
		retry := slot[1]
		if !errors.Is(slot[0].Err, ErrKilled) || retry.Err != nil || retry.Replica == victim.Replica ||
			retry.Tick.Attempt != 2 || retry.Tick.Trigger != cron.TriggerRetry {
			t.Errorf("runs of the slot: %v; want the killed one, then attempt 2 (retry) on another replica, ok", describeRuns(slot))
		}
		// The dead run's lease ran out a minute after its last heartbeat,
		// at the kill or before, and the replicas that waited for it look
		// again a millisecond after that.
		if d := retry.Start.Sub(killed); d <= 0 || d > time.Minute+time.Millisecond {
			t.Errorf("the retry started %v after the kill, want within the run lease, 1m (and 1ms)", d)
		}
		st, err := cron.NewAdmin(lock.NewDB(c.Client())).Status(t.Context(), "report")
		if err != nil || st.SlotState != "done" || st.Attempts != 2 || st.LastFailure == nil || st.LastFailure.Outcome != "lost" {
			t.Errorf("Status = slot %q after %d attempts, last failure %+v, %v; want done after 2, the killed run lost", st.SlotState, st.Attempts, st.LastFailure, err)
		}
		c.NoOverlap(t, "report")
	})
}

// TestKilledRunAtMostOnce kills the replica whose run is going, for a job
// with the default of one attempt: nobody runs the slot again, and the
// next slot runs as usual.
func TestKilledRunAtMostOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		t0 := time.Now()
		c := New(t, 3, recorded(hourly, 10*time.Minute, cron.LeaseConfig{RunTTL: time.Minute}))
		time.Sleep(5 * time.Minute)
		c.Kill(runningAt(t, c).Replica)
		time.Sleep(2 * time.Hour)
		c.OncePerSlot(t, "report")
		c.NoSlotMissing(t, "report", t0, time.Now())
		c.NoOverlap(t, "report")
	})
}

// TestPauseRunNowResume pauses a job from an Admin for three slots, asks
// for one run meanwhile, and resumes it.
func TestPauseRunNowResume(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := New(t, 3, recorded(hourly, time.Minute, cron.LeaseConfig{}))
		admin := cron.NewAdmin(lock.NewDB(c.Client()))
		time.Sleep(30 * time.Minute)
		if err := admin.Pause(t.Context(), "report"); err != nil {
			t.Fatal(err)
		}
		paused := time.Now()
		time.Sleep(3 * time.Hour)
		for _, r := range c.Runs() {
			if r.Start.After(paused) {
				t.Errorf("a run while paused: %v", describeRuns([]Run{r}))
			}
		}
		asked := time.Now()
		if err := admin.RunNow(t.Context(), "report"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Minute)
		var requested []Run
		for _, r := range c.Runs() {
			if !r.Start.Before(asked) {
				requested = append(requested, r)
			}
		}
		if len(requested) != 1 || requested[0].Tick.Trigger != cron.TriggerRequest || requested[0].Start.Sub(asked) > time.Second {
			t.Fatalf("runs after RunNow: %v; want one, requested, within a second", describeRuns(requested))
		}
		if err := admin.Resume(t.Context(), "report"); err != nil {
			t.Fatal(err)
		}
		resumed := time.Now()
		time.Sleep(time.Hour)
		var after []Run
		for _, r := range c.Runs() {
			if r.Start.After(resumed) {
				after = append(after, r)
			}
		}
		if len(after) != 1 || after[0].Tick.Trigger != cron.TriggerSchedule {
			t.Errorf("runs in the hour after Resume: %v; want the next slot's", describeRuns(after))
		}
	})
}

// TestCatchUpOnce stops every replica across three slots of a job without
// a startup run and starts them together: one of them, and only one,
// catches up the latest slot.
func TestCatchUpOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := New(t, 3, recorded(hourly.WithoutStartupRun(), time.Minute, cron.LeaseConfig{CatchUp: 2 * time.Hour}))
		time.Sleep(90 * time.Minute) // the 01:00 slot runs
		for i := range 3 {
			c.Kill(i)
		}
		time.Sleep(3 * time.Hour) // 02:00, 03:00 and 04:00 missed
		for i := range 3 {
			c.Restart(i)
		}
		restarted := time.Now()
		time.Sleep(10 * time.Minute)
		var caught []Run
		for _, r := range c.Runs() {
			if !r.Start.Before(restarted) {
				caught = append(caught, r)
			}
		}
		want := restarted.Truncate(time.Hour)
		if len(caught) != 1 || caught[0].Tick.Trigger != cron.TriggerCatchUp || !caught[0].Tick.Slot.Start.Equal(want) {
			t.Errorf("runs after the restart: %v; want one catch-up of slot %v", describeRuns(caught), want)
		}
	})
}
