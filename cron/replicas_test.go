package cron_test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wakuwaku-go/wakuwaku/cron"
	"github.com/wakuwaku-go/wakuwaku/internal/redistest"
	"github.com/wakuwaku-go/wakuwaku/interval"
	"github.com/wakuwaku-go/wakuwaku/lock"
)

// commandCount counts the commands a client sends by name (not those of
// a pipeline, which only the registry's beats use).
type commandCount struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *commandCount) DialHook(next redis.DialHook) redis.DialHook { return next }
func (c *commandCount) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (c *commandCount) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.mu.Lock()
		c.n[cmd.Name()]++
		c.mu.Unlock()
		return next(ctx, cmd)
	}
}

func (c *commandCount) get(name string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[name]
}

// everySecondReplicas starts n replicas r0, r1, ... of a leased job run
// every second, each with a client whose commands are counted.
func everySecondReplicas(t *testing.T, srv *redistest.Server, n int, log *jobLog) []*commandCount {
	t.Helper()
	var counts []*commandCount
	for i := range n {
		name := fmt.Sprintf("r%d", i)
		c := srv.Client(t)
		cc := &commandCount{n: make(map[string]int)}
		c.AddHook(cc)
		counts = append(counts, cc)
		job := &leasedJob{
			testJob: testJob{name: "each-second", every: interval.MustCron("* * * * * *"), process: log.work(name, nil)},
			lease:   cron.LeaseConfig{DB: lock.NewDB(c)},
		}
		rt, err := cron.Start([]cron.Job{job}, cron.WithReplica(name))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { rt.Shutdown(context.Background()) })
	}
	return counts
}

// waitReplicas waits until Admin.Replicas lists want, by name.
func waitReplicas(t *testing.T, admin cron.Admin, want ...string) []cron.ReplicaStatus {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, err := admin.Replicas(t.Context())
		var names []string
		for _, r := range got {
			names = append(names, r.Name)
		}
		if err == nil && slices.Equal(names, want) {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("Replicas = %v, %v after 10s; want %v", names, err, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// slotsRun checks that every whole second in [from, to) ran exactly
// once, and returns the runs by slot start.
func slotsRun(t *testing.T, log *jobLog, from, to time.Time) map[time.Time]jobRun {
	t.Helper()
	runs, most := log.all()
	if most > 1 {
		t.Errorf("%d runs at once", most)
	}
	bySlot := make(map[time.Time]jobRun)
	for _, r := range runs {
		s := r.tick.Slot.Start
		if prev, twice := bySlot[s]; twice {
			t.Errorf("slot %s ran twice: on %s and %s", s.Format(time.TimeOnly), prev.replica, r.replica)
		}
		bySlot[s] = r
	}
	for s := from.Truncate(time.Second).Add(time.Second); s.Before(to); s = s.Add(time.Second) {
		if _, ok := bySlot[s]; !ok {
			t.Errorf("slot %s did not run", s.Format(time.TimeOnly))
		}
	}
	return bySlot
}

// TestReplicasRegistry: each runtime with leased jobs beats in its group's
// registry, Admin.Replicas lists the live ones, and a runtime that shuts
// down takes itself out at once.
func TestReplicasRegistry(t *testing.T) {
	srv := redistest.Start(t)
	log := newJobLog()
	everySecondReplicas(t, srv, 2, log)
	admin := cron.NewAdmin(lock.NewDB(srv.Client(t)))
	got := waitReplicas(t, admin, "r0", "r1")
	if got[0].Group == "" || got[0].Group != got[1].Group {
		t.Errorf("groups %q and %q, want one", got[0].Group, got[1].Group)
	}
	for _, r := range got {
		if until := time.Until(r.LiveUntil); until < time.Second || until > 10*time.Second {
			t.Errorf("%s is live for %v more, want 3 beats of a quarter of its 1s interval, at least 1s each", r.Name, until)
		}
	}
	other, err := cron.Start([]cron.Job{&leasedJob{
		testJob: testJob{name: "other", every: interval.MustCron("0 * * * *"), process: func(context.Context, cron.Tick) error { return nil }},
		lease:   cron.LeaseConfig{DB: lock.NewDB(srv.Client(t))},
	}}, cron.WithReplica("x0"))
	if err != nil {
		t.Fatal(err)
	}
	got = waitReplicas(t, admin, "r0", "r1", "x0")
	if got[0].Group != got[1].Group || got[2].Group == got[0].Group {
		t.Errorf("groups %v: want r0 and r1 in one, x0 in another (its leased jobs differ)", got)
	}
	if err := other.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	got, err = admin.Replicas(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Errorf("after x0's Shutdown, Replicas = %v; want r0 and r1 only", got)
	}
}

// TestOwnerClaimsOthersLook: with three replicas of an every-second job,
// each slot is claimed at its tick by its owner only; the two others read
// the record once (HMGET) and send no script. Every slot runs once.
func TestOwnerClaimsOthersLook(t *testing.T) {
	srv := redistest.Start(t)
	log := newJobLog()
	counts := everySecondReplicas(t, srv, 3, log)
	waitReplicas(t, cron.NewAdmin(lock.NewDB(srv.Client(t))), "r0", "r1", "r2")
	time.Sleep(1500 * time.Millisecond) // a beat more: every replica knows the three
	from := time.Now()
	var scripts0, looks0 int
	for _, c := range counts {
		scripts0 += c.get("evalsha")
		looks0 += c.get("hmget")
	}
	time.Sleep(6 * time.Second)
	to := time.Now()
	var scripts, looks int
	for _, c := range counts {
		scripts += c.get("evalsha")
		looks += c.get("hmget")
	}
	scripts, looks = scripts-scripts0, looks-looks0
	slotsRun(t, log, from, to.Add(-time.Second))
	// 6 slots: a claim and a completion each by the owner, 2 looks by the
	// others. Without owners, every replica claimed: 4 scripts a slot.
	// An owner's tick more than 100 ms late lets a look find the slot
	// unclaimed and claim it: allow one slot in two so, on a busy machine.
	if scripts > 6*3 {
		t.Errorf("%d scripts in 6 slots of 3 replicas: want about 2 a slot (a claim and a completion), at most 3", scripts)
	}
	if looks < 6 {
		t.Errorf("%d looks in 6 slots: want about 2 a slot, by the replicas that do not own it", looks)
	}
	t.Logf("6 slots: %d scripts, %d looks", scripts, looks)
}

// TestOwnerGoneTakenOver: replicas that the registry lists but that do
// not run (it died, and its three beats have not passed) owns some of the
// slots; the live replicas look at those a grace period after their tick,
// find them unclaimed and claim them: every slot still runs once.
func TestOwnerGoneTakenOver(t *testing.T) {
	srv := redistest.Start(t)
	log := newJobLog()
	everySecondReplicas(t, srv, 2, log)
	admin := cron.NewAdmin(lock.NewDB(srv.Client(t)))
	got := waitReplicas(t, admin, "r0", "r1")
	key := "@@wakuwaku-cron:replicas:{" + got[0].Group + "}"
	c := srv.Client(t)
	// Four of them, so that most slots are the ghosts'.
	ghostNames := []string{"ghost0", "ghost1", "ghost2", "ghost3"}
	for _, g := range ghostNames {
		if err := c.ZAdd(t.Context(), key, redis.Z{Score: float64(time.Now().Add(time.Hour).UnixMilli()), Member: g}).Err(); err != nil {
			t.Fatal(err)
		}
	}
	all := append(ghostNames, "r0", "r1")
	waitReplicas(t, admin, all...)
	time.Sleep(1500 * time.Millisecond) // a beat more: both replicas know the ghost
	from := time.Now()
	time.Sleep(8 * time.Second)
	to := time.Now().Add(-time.Second)
	bySlot := slotsRun(t, log, from, to)
	var ghosts int
	for s := from.Truncate(time.Second).Add(time.Second); s.Before(to); s = s.Add(time.Second) {
		slot, _ := interval.MustCron("* * * * * *").Plan(s, s).Slot.Key()
		if o := cron.OwnerOf(all, "each-second", slot); !strings.HasPrefix(o, "ghost") {
			continue
		}
		ghosts++
		if r, ok := bySlot[s]; ok && r.start.Sub(s) < 100*time.Millisecond {
			t.Errorf("slot %s, a ghost's, started %v after it: want a look's grace (100ms) at least", slot, r.start.Sub(s))
		}
	}
	if ghosts == 0 {
		t.Fatal("no slot of the window was a ghost's: the test proved nothing; lengthen it")
	}
	t.Logf("%d of the slots were the ghosts'", ghosts)
}

// TestBeatRefusedWarnsOnce: a Redis user whose ACL lacks the registry's
// commands refuses every beat; the runtime warns once, not at every beat
// (one a second here), and its replica claims at each tick meanwhile.
func TestBeatRefusedWarnsOnce(t *testing.T) {
	srv := redistest.Start(t)
	srv.SetUser(t, "noregistry", "on", ">secret", "~*", "&*", "+@all", "-zadd")
	c := redis.NewClient(&redis.Options{Addr: srv.Addr(), Username: "noregistry", Password: "secret"})
	t.Cleanup(func() { c.Close() })
	var log records
	rec := newJobLog()
	job := &leasedJob{
		testJob: testJob{name: "each-second", every: interval.MustCron("* * * * * *"), process: rec.work("r0", nil)},
		lease:   cron.LeaseConfig{DB: lock.NewDB(c)},
	}
	rt, err := cron.Start([]cron.Job{job}, cron.WithReplica("r0"), cron.WithLogger(slog.New(&log)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Shutdown(context.Background()) })
	time.Sleep(3500 * time.Millisecond) // four beats
	if n := len(log.find("cron runtime could not beat in its replica registry; it claims every slot at its tick until it can")); n != 1 {
		t.Errorf("%d warnings of the refused beats, want 1", n)
	}
	if runs, _ := rec.all(); len(runs) < 3 {
		t.Errorf("%d runs in 3.5s, want the ticks claimed meanwhile", len(runs))
	}
}
