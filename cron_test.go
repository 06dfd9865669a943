package wakuwaku_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wakuwaku-go/wakuwaku"
	"github.com/wakuwaku-go/wakuwaku/cron"
	"github.com/wakuwaku-go/wakuwaku/internal/redistest"
	"github.com/wakuwaku-go/wakuwaku/interval"
	"github.com/wakuwaku-go/wakuwaku/lock"
)

// run is one run of a report, as the replicas record it.
type run struct {
	replica int
	tick    cron.Tick
	entered time.Time // when Process began, after the lease was taken
}

// journal collects the runs of every replica.
type journal struct {
	mu   sync.Mutex
	runs []run
}

func (j *journal) add(r run) {
	j.mu.Lock()
	j.runs = append(j.runs, r)
	j.mu.Unlock()
}

func (j *journal) sorted() []run {
	j.mu.Lock()
	defer j.mu.Unlock()
	out := slices.Clone(j.runs)
	slices.SortFunc(out, func(a, b run) int { return a.entered.Compare(b.entered) })
	return out
}

// replicaDeps is what a report job is built from in these tests.
type replicaDeps struct {
	replica int
	db      lock.DB
	every   interval.Interval
	lease   lock.Lock[string] // the seed pattern's lease; unused by leasedReport
	journal *journal
	work    time.Duration
}

// seedReport takes its lease itself and never releases it: the seed's pattern.
type seedReport struct{ d replicaDeps }

func (j *seedReport) Name() string                { return "report" }
func (j *seedReport) Interval() interval.Interval { return j.d.every }
func (j *seedReport) Process(ctx context.Context, t cron.Tick) error {
	tok, err := j.d.lease.TryLock(ctx, j.d.db, "report")
	if err != nil || tok == nil {
		return err
	}
	j.d.journal.add(run{replica: j.d.replica, tick: t, entered: time.Now()})
	time.Sleep(j.d.work)
	return nil
}

// leasedReport leaves the lease to the runtime (cron.Leased).
type leasedReport struct{ d replicaDeps }

func (j *leasedReport) Name() string                { return "report" }
func (j *leasedReport) Interval() interval.Interval { return j.d.every }
func (j *leasedReport) Lease() cron.LeaseConfig     { return cron.LeaseConfig{DB: j.d.db} }
func (j *leasedReport) Process(ctx context.Context, t cron.Tick) error {
	j.d.journal.add(run{replica: j.d.replica, tick: t, entered: time.Now()})
	select {
	case <-time.After(j.d.work):
	case <-ctx.Done():
	}
	return nil
}

// startReplicas starts n replicas, each with its own client and builder, at
// start times offset by stagger, and returns their handles.
func startReplicas(t *testing.T, srv *redistest.Server, n int, stagger time.Duration, deps replicaDeps, build func(*wakuwaku.ServiceBuilder)) []*wakuwaku.Crons {
	t.Helper()
	var out []*wakuwaku.Crons
	for i := range n {
		if i > 0 {
			time.Sleep(stagger)
		}
		d := deps
		d.replica = i + 1
		d.db = lock.NewDB(srv.Client(t))
		b := wakuwaku.NewServiceBuilder(d)
		build(b)
		_, crons, err := b.Start()
		if err != nil {
			t.Fatalf("replica %d: Start = %v", i+1, err)
		}
		t.Cleanup(func() { crons.Shutdown(context.Background()) })
		out = append(out, crons)
	}
	return out
}

// TestOncePerIntervalAcrossReplicas runs three replicas of a report, offset
// by a third of its interval, with the seed's pattern and with the built-in
// lease. What must hold however busy the machine is: a run begins only
// after the lease of the previous run, taken no earlier than that run's
// tick, has run out, so consecutive runs across all replicas begin at least
// a lease apart, counted from the previous run's tick.
func TestOncePerIntervalAcrossReplicas(t *testing.T) {
	const every = 450 * time.Millisecond
	ttl := every * 11 / 12 // the default lease
	builds := map[string]func(*wakuwaku.ServiceBuilder){
		"seed pattern": func(b *wakuwaku.ServiceBuilder) {
			wakuwaku.CronJob(b, func(d replicaDeps) *seedReport { return &seedReport{d} })
		},
		"built-in lease": func(b *wakuwaku.ServiceBuilder) {
			wakuwaku.CronJob(b, func(d replicaDeps) *leasedReport { return &leasedReport{d} })
		},
	}
	for name, build := range builds {
		t.Run(name, func(t *testing.T) {
			srv := redistest.Start(t)
			j := &journal{}
			deps := replicaDeps{every: interval.AtLeast(every), lease: lock.New[string]("cron", ttl), journal: j, work: 20 * time.Millisecond}
			replicas := startReplicas(t, srv, 3, every/3, deps, build)
			time.Sleep(12 * every)
			for _, r := range replicas {
				if err := r.Shutdown(t.Context()); err != nil {
					t.Fatal(err)
				}
			}
			runs := j.sorted()
			if len(runs) < 3 {
				t.Fatalf("%d runs in 12 intervals, want several", len(runs))
			}
			smallest := time.Duration(1<<63 - 1)
			byReplica := map[int]int{}
			for i, r := range runs {
				byReplica[r.replica]++
				if i == 0 {
					continue
				}
				prev := runs[i-1]
				if gap := r.entered.Sub(prev.tick.Started); gap < ttl {
					t.Errorf("run %d (replica %d) began %v after run %d's tick (replica %d), want at least the lease %v",
						i, r.replica, gap, i-1, prev.replica, ttl)
				}
				smallest = min(smallest, r.entered.Sub(prev.entered))
			}
			t.Logf("%d runs by replicas %v in %v; interval %v, lease %v; smallest gap between consecutive runs %v",
				len(runs), byReplica, 12*every, every, ttl, smallest)
		})
	}
}

// TestCronSlotsOnceAcrossReplicas runs a per-second Cron job with the
// built-in lease in three replicas whose start times are offset: no slot may
// run twice, the startup runs included.
func TestCronSlotsOnceAcrossReplicas(t *testing.T) {
	srv := redistest.Start(t)
	j := &journal{}
	deps := replicaDeps{every: interval.MustCron("* * * * * *"), journal: j, work: 10 * time.Millisecond}
	replicas := startReplicas(t, srv, 3, 330*time.Millisecond, deps, func(b *wakuwaku.ServiceBuilder) {
		wakuwaku.CronJob(b, func(d replicaDeps) *leasedReport { return &leasedReport{d} })
	})
	time.Sleep(4500 * time.Millisecond)
	for _, r := range replicas {
		r.Shutdown(t.Context())
	}
	seen := map[time.Time]int{}
	for _, r := range j.sorted() {
		slot := r.tick.Scheduled.Truncate(time.Second) // the latest slot at or before the tick
		if prev, dup := seen[slot]; dup {
			t.Errorf("slot %v ran twice: by replica %d and replica %d", slot.Format(time.TimeOnly), prev, r.replica)
		}
		seen[slot] = r.replica
	}
	if len(seen) < 3 {
		t.Errorf("%d slots ran in 4.5 s, want several", len(seen))
	}
	t.Logf("%d slots, each run once, by replicas %v", len(seen), seen)
}

// TestShutdownOneReplica shuts a replica down while it runs the report:
// Shutdown waits for the run, and the other replicas keep the schedule.
func TestShutdownOneReplica(t *testing.T) {
	srv := redistest.Start(t)
	const every = 400 * time.Millisecond
	j := &journal{}
	var finished atomic.Int64 // runs of replica 1 that returned
	deps := replicaDeps{every: interval.AtLeast(every), journal: j, work: 250 * time.Millisecond}
	build := func(b *wakuwaku.ServiceBuilder) {
		wakuwaku.CronJob(b, func(d replicaDeps) *finishing { return &finishing{leasedReport{d}, &finished} })
	}
	replicas := startReplicas(t, srv, 3, every/3, deps, build)
	// Replica 1 started first, so it runs the startup report; wait until it
	// is inside its run, then shut it down.
	deadline := time.Now().Add(5 * time.Second)
	for len(j.sorted()) == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if runs := j.sorted(); len(runs) == 0 || runs[0].replica != 1 {
		t.Fatalf("runs = %v, want replica 1's startup run first", runs)
	}
	if err := replicas[0].Shutdown(t.Context()); err != nil {
		t.Fatalf("Shutdown = %v", err)
	}
	if finished.Load() != 1 {
		t.Fatalf("Shutdown returned with %d finished runs of replica 1, want it to wait for its run", finished.Load())
	}
	stopped := time.Now()
	time.Sleep(6 * every)
	var after []string
	for _, r := range j.sorted() {
		if r.entered.After(stopped) {
			if r.replica == 1 {
				t.Errorf("replica 1 ran after its Shutdown returned")
			}
			after = append(after, fmt.Sprintf("replica %d", r.replica))
		}
	}
	if len(after) < 2 {
		t.Errorf("after replica 1 stopped, runs by %v, want the others to keep running", after)
	}
}

// finishing is a leasedReport that counts the runs of replica 1 that returned.
type finishing struct {
	leasedReport
	finished *atomic.Int64
}

func (j *finishing) Process(ctx context.Context, t cron.Tick) error {
	err := j.leasedReport.Process(ctx, t)
	if j.d.replica == 1 {
		j.finished.Add(1)
	}
	return err
}
