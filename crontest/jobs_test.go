package crontest

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wakuwaku-go/wakuwaku/cron"
	"github.com/wakuwaku-go/wakuwaku/lock"
)

// TestRollingAdd adds a leased job to one replica of three, then, hours
// later, to the two others, as a rolling deploy does, then removes it from
// the first: every slot of the whole time runs once, on whichever
// replicas had it. A restart in between keeps the job its replica was
// given.
func TestRollingAdd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		time.Sleep(30 * time.Minute)
		t0 := time.Now()
		c := New(t, 3, func(*redis.Client) []cron.Job { return nil }, WithClockOffsets(0, time.Second, -2*time.Second))
		job := func(rdb *redis.Client) cron.Job { return &report{db: lock.NewDB(rdb), work: 10 * time.Minute} }
		c.Add(job, 0)
		time.Sleep(3 * time.Hour)
		c.Add(job, 1, 2)
		time.Sleep(3 * time.Hour)
		c.Restart(1)
		time.Sleep(2 * time.Hour)
		c.Remove("report", 0)
		time.Sleep(3 * time.Hour)
		checkAll(t, c, "report", t0, time.Now())

		by := map[int]int{}
		for _, r := range c.Runs() {
			by[r.Replica]++
			switch {
			case r.Replica != 0 && r.Start.Before(t0.Add(3*time.Hour)):
				t.Errorf("replica %d ran slot %s before it had the job", r.Replica, r.Tick.Slot)
			case r.Replica == 0 && r.Start.After(t0.Add(8*time.Hour)):
				t.Errorf("replica 0 ran slot %s after the job was removed from it", r.Tick.Slot)
			}
		}
		if by[1]+by[2] == 0 {
			t.Errorf("runs by replica: %v; want replicas 1 and 2 to share the slots once they had the job", by)
		}
	})
}

// TestRemoveEverywhere removes a job from every replica while a run of it
// is in progress: the run ends (Remove waits for it), and no slot runs
// after.
func TestRemoveEverywhere(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := New(t, 2, func(rdb *redis.Client) []cron.Job {
			return []cron.Job{&report{db: lock.NewDB(rdb), work: 10 * time.Minute}}
		})
		time.Sleep(time.Hour + 5*time.Minute)
		removed := time.Now()
		c.Remove("report")
		if d := time.Since(removed); d != 5*time.Minute {
			t.Errorf("Remove returned after %v, want 5m, when the 01:00 slot's run ended", d)
		}
		time.Sleep(3 * time.Hour)
		runs := c.Runs()
		if len(runs) != 2 {
			t.Errorf("%d runs, want 2: the startup run and the 01:00 slot's", len(runs))
		}
		for _, r := range runs {
			if r.Err != nil || r.End.IsZero() {
				t.Errorf("run of slot %s ended %v with %v, want it to finish", r.Tick.Slot, r.End, r.Err)
			}
		}
		c.Restart(0) // a restart keeps it removed
		time.Sleep(2 * time.Hour)
		if n := len(c.Runs()); n != 2 {
			t.Errorf("%d runs after a restart, want still 2", n)
		}
	})
}
