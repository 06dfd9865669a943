package fault_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/wakuwaku-go/wakuwaku"
	"github.com/wakuwaku-go/wakuwaku/cron"
	"github.com/wakuwaku-go/wakuwaku/internal/redistest"
	"github.com/wakuwaku-go/wakuwaku/interval"
	"github.com/wakuwaku-go/wakuwaku/lock"
	"github.com/wakuwaku-go/wakuwaku/proof/internal/fault"
)

func init() { roles["cron-replica"] = cronReplicaRole }

// cronArgs are the arguments of the cron-replica role.
type cronArgs struct {
	Conn   conn
	Offset time.Duration // how far this replica's clock is ahead (or behind) of the true time
	Work   time.Duration // how long a run takes
}

// slotJob is a per-second Cron job with the built-in lease: it tells the
// test process which slot each run is for, when it starts and when it ends.
type slotJob struct {
	db   lock.DB
	link *fault.Link
	work time.Duration
}

func (j *slotJob) Name() string                { return "per-second" }
func (j *slotJob) Interval() interval.Interval { return interval.MustCron("* * * * * *") }
func (j *slotJob) Lease() cron.LeaseConfig     { return cron.LeaseConfig{DB: j.db} }

func (j *slotJob) Process(ctx context.Context, t cron.Tick) error {
	// The startup run counts as the latest slot before it, as its lease does.
	slot := t.Scheduled.Truncate(time.Second).Unix()
	if err := j.link.Note("run", slot, ""); err != nil {
		return err
	}
	select {
	case <-time.After(j.work):
	case <-ctx.Done():
	}
	return j.link.Note("done", slot, "")
}

// cronReplicaRole is one replica of a service: its own client and builder,
// its clock offset, the job, and a graceful shutdown when told to stop.
func cronReplicaRole(ctx context.Context, env *fault.Env) error {
	var a cronArgs
	if err := env.Args(&a); err != nil {
		return err
	}
	rdb := a.Conn.client()
	defer rdb.Close()
	// A tick that did not run is noted with its slot and why (a note
	// can't fail the run; one that is lost only costs an excuse).
	skipped := func(t cron.Tick, reason string, _ error) {
		_ = env.Link.Note("skip", t.Scheduled.Truncate(time.Second).Unix(), reason)
	}
	b := wakuwaku.NewServiceBuilder(lock.NewDB(rdb)).
		WithCronOptions(cron.WithClock(func() time.Time { return time.Now().Add(a.Offset) }),
			cron.WithObserver(cron.Observer{RunSkipped: skipped}))
	wakuwaku.CronJob(b, func(db lock.DB) *slotJob { return &slotJob{db: db, link: env.Link, work: a.Work} })
	_, crons, err := b.Start()
	if err != nil {
		return err
	}
	<-ctx.Done()
	shutdown, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return crons.Shutdown(shutdown)
}

// TestCronReplicas runs a per-second job with the built-in lease in three
// replica processes whose clocks are offset, kills one with SIGKILL in the
// middle of one of its runs, and checks that no slot ran twice, that none
// was missed but the one after the killed run's (whose ticks may all come
// while the dead run's lease holds the job) and those every live replica
// skipped with a reason that holds (too late, or an earlier slot's run
// still going), and that the others went on running the slots after the
// kill.
func TestCronReplicas(t *testing.T) {
	srv := redistest.Start(t)
	coord := fault.NewCoordinator(t)
	offsets := []time.Duration{0, 350 * time.Millisecond, -600 * time.Millisecond}
	var children []*fault.Child
	for i, off := range offsets {
		children = append(children, fault.Spawn(t, coord, i+1, "cron-replica",
			cronArgs{Conn: conn{Addr: srv.Addr()}, Offset: off, Work: 300 * time.Millisecond}))
	}
	spell := fault.Pick(4*time.Second, 30*time.Second)
	start := time.Now()
	time.Sleep(spell / 2)

	// Kill the replica that starts the next run, while the run is going.
	killed := make(chan int, 1)
	coord.OnNote("run", func(n fault.Note) {
		select {
		case killed <- n.Child:
		default:
		}
	})
	var victim int
	select {
	case victim = <-killed:
	case <-time.After(10 * time.Second):
		t.Fatal("no run within 10 s")
	}
	coord.OnNote("run", nil)
	children[victim-1].Kill(t)
	killedAt := time.Now()
	killedSlot := slices.MaxFunc(notesOf(coord, "run", victim), func(a, b fault.Note) int { return int(a.Value - b.Value) }).Value

	// Two slot starts at least after the kill, and time for the replica
	// whose clock is behind to tick the second.
	time.Sleep(spell/2 + 1500*time.Millisecond)
	for i, c := range children {
		if i+1 != victim {
			c.Stop(t)
		}
	}

	runs := coord.Notes("run")
	bySlot := map[int64][]int{}
	for _, n := range runs {
		bySlot[n.Value] = append(bySlot[n.Value], n.Child)
	}
	slots := make([]int64, 0, len(bySlot))
	for s := range bySlot {
		slots = append(slots, s)
	}
	slices.Sort(slots)
	// A slot that every replica alive then skipped, each for a reason
	// that says the slot could not run, was not missed by the protocol but
	// by the machine: a replica whose tick comes after the slot's lease
	// has ended (a process that did not run for most of a second, beside a
	// CPU load) must skip it as too late, and one whose tick finds an
	// earlier slot's run still going skips it as classic cron does (a run
	// begun late on a busy machine runs into the next second; the first
	// replica whose tick finds so records the slot skipped, and the
	// others find it recorded). The second excuse holds only if such a
	// run really was going: its end was noted after the first replica's
	// clock reached the slot.
	why := map[int64]map[int]string{}
	for _, n := range coord.Notes("skip") {
		if why[n.Value] == nil {
			why[n.Value] = map[int]string{}
		}
		why[n.Value][n.Child] = n.Text
	}
	overran := func(slot int64) bool {
		firstTick := time.Unix(slot, 0).Add(-slices.Max(offsets)).UnixNano()
		return slices.ContainsFunc(coord.Notes("done"), func(n fault.Note) bool { return n.Value < slot && n.At >= firstTick })
	}
	skippedEverywhere := func(slot int64) bool {
		for i := range children {
			r := i + 1
			if r == victim && slot > killedSlot {
				continue
			}
			switch why[slot][r] {
			case cron.ReasonTooLate:
			case cron.ReasonStillRunning, cron.ReasonSkippedElsewhere:
				// One replica's tick records the slot skipped, the
				// others find it so (PROTOCOL.md, R20).
				if !overran(slot) {
					return false
				}
			default:
				return false
			}
		}
		return true
	}
	twice, missing, afterKill, heldByDead, skipped := 0, 0, 0, 0, 0
	for i, s := range slots {
		if len(bySlot[s]) > 1 {
			twice++
			t.Errorf("slot %s ran %d times, by replicas %v", time.Unix(s, 0).Format(time.TimeOnly), len(bySlot[s]), bySlot[s])
		}
		if i > 0 && s != slots[i-1]+1 {
			gap := int(s - slots[i-1] - 1)
			if slots[i-1] == killedSlot && gap == 1 {
				// The slot after the killed run's: the dead run holds the
				// job until its run lease (half a slot) runs out, and the
				// replicas' ticks for that slot may all come before.
				heldByDead++
				continue
			}
			for m := slots[i-1] + 1; m < s; m++ {
				if skippedEverywhere(m) {
					skipped++
					continue
				}
				missing++
				t.Errorf("slot %s did not run (slots ran: %s); its skips: %s", time.Unix(m, 0).Format(time.TimeOnly), describeSlots(slots), describeSkips(coord, m))
			}
		}
		if s > killedSlot {
			afterKill++
		}
	}
	if afterKill < 2 {
		t.Errorf("%d slots ran after replica %d was killed (in slot %s), want the others to go on",
			afterKill, victim, time.Unix(killedSlot, 0).Format(time.TimeOnly))
	}
	var who []string
	for _, s := range slots {
		who = append(who, fmt.Sprint(bySlot[s]))
	}
	fault.Publish(t, fault.Figures{
		Scenario: "cron replicas",
		Seconds:  time.Since(start).Seconds(),
		Ops:      len(runs),
		Faults:   fmt.Sprintf("clock offsets %v; SIGKILL of replica %d mid-run, %.1fs in", offsets, victim, killedAt.Sub(start).Seconds()),
		Overlaps: twice,
		Notes: []string{
			fmt.Sprintf("%d slots, %d run twice, %d missed, %d missed under the killed run's lease, %d skipped by every live replica as too late or behind an earlier slot's run, %d after the kill", len(slots), twice, missing, heldByDead, skipped, afterKill),
			"replica per slot: " + fmt.Sprint(who),
		},
	})
}

// notesOf returns the notes called what that child sent.
func notesOf(coord *fault.Coordinator, what string, child int) []fault.Note {
	return slices.DeleteFunc(coord.Notes(what), func(n fault.Note) bool { return n.Child != child })
}

// describeSkips lists the replicas' skipped ticks of slot, with why, and
// when, by the replica's clock without its offset; and the previous slot's
// run.
func describeSkips(coord *fault.Coordinator, slot int64) string {
	var b []string
	for _, n := range coord.Notes("skip") {
		if n.Value == slot {
			b = append(b, fmt.Sprintf("replica %d at %s: %s", n.Child, time.Unix(0, n.At).Format("15:04:05.000"), n.Text))
		}
	}
	if b == nil {
		b = append(b, "none")
	}
	for _, what := range []string{"run", "done"} {
		for _, n := range coord.Notes(what) {
			if n.Value == slot-1 {
				b = append(b, fmt.Sprintf("the previous slot's %s by replica %d at %s", what, n.Child, time.Unix(0, n.At).Format("15:04:05.000")))
			}
		}
	}
	return strings.Join(b, "; ")
}

// describeSlots lists slots, as Unix seconds, by their time of day.
func describeSlots(slots []int64) string {
	var b []string
	for _, s := range slots {
		b = append(b, time.Unix(s, 0).Format(time.TimeOnly))
	}
	return fmt.Sprint(b)
}
