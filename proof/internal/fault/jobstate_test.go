package fault_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wakuwaku-go/wakuwaku/cron"
	"github.com/wakuwaku-go/wakuwaku/internal/redistest"
	"github.com/wakuwaku-go/wakuwaku/interval"
	"github.com/wakuwaku-go/wakuwaku/lock"
	"github.com/wakuwaku-go/wakuwaku/proof/internal/fault"
)

// The scenarios of the leased jobs' cluster-wide state (issue 11): three
// replica processes on one redis-server run one leased job, which tells the
// test process of every run it does (its slot, attempt and trigger, when it
// started and ended, how), and the test judges by that, the job's own
// account, and by what Admin.Status says.

func init() { roles["job-replica"] = jobReplicaRole }

// jobArgs are the arguments of the job-replica role: how the replica reaches
// Redis, and the leased job it runs.
type jobArgs struct {
	Conn         conn
	Name         string        // the job's name, and so its lease's
	Spec         string        // a Cron spec; "" for AtLeast(Every)
	Every        time.Duration // the AtLeast interval, without a Spec
	NoStartupRun bool
	Attempts     int
	Backoff      time.Duration
	CatchUp      time.Duration
	RunTTL       time.Duration
	Work         time.Duration // how long a run takes
	Fail         int64         // the first Fail attempts at each slot fail, counted across replicas
	Gate         string        // if set, the replica says "ready" and waits for this gate before it starts its runtime
	Outlast      bool          // a run begun before the time in the count "restart at" goes on until its context ends
}

// runNote is what the job tells the test process as a run starts (the note
// "run start") and ends ("run end"); the note's Value names the run.
type runNote struct {
	Slot      string // the slot's key; a duration policy's slot start, in RFC 3339
	SlotStart int64  // Unix nanoseconds
	Attempt   int
	Trigger   string
	Err       string // at the end: the error the run returned
	Lost      bool   // at the end: its context had ended with cause lock.ErrLeaseLost
}

// recordedJob is the leased job of the job-replica role.
type recordedJob struct {
	a    jobArgs
	db   lock.DB
	link *fault.Link
	seq  atomic.Int64
}

func (j *recordedJob) Name() string { return j.a.Name }

func (j *recordedJob) Interval() interval.Interval {
	var every interval.Interval
	if j.a.Spec != "" {
		every = interval.MustCron(j.a.Spec)
	} else {
		every = interval.AtLeast(j.a.Every)
	}
	if j.a.NoStartupRun {
		every = every.WithoutStartupRun()
	}
	return every
}

func (j *recordedJob) Lease() cron.LeaseConfig {
	return cron.LeaseConfig{DB: j.db, Attempts: j.a.Attempts, Backoff: j.a.Backoff, CatchUp: j.a.CatchUp, RunTTL: j.a.RunTTL}
}

func (j *recordedJob) Process(ctx context.Context, t cron.Tick) error {
	id := int64(j.link.Child())<<32 | j.seq.Add(1)
	key, ok := t.Slot.Key()
	if !ok {
		key = t.Slot.Start.UTC().Format(time.RFC3339Nano)
	}
	n := runNote{Slot: key, SlotStart: t.Slot.Start.UnixNano(), Attempt: t.Attempt, Trigger: t.Trigger.String()}
	started := fault.Now()
	if err := j.note("run start", id, n); err != nil {
		return err
	}
	var err error
	if j.a.Fail > 0 {
		k, lerr := j.link.Add("attempts at "+key, 1)
		if lerr != nil {
			return lerr
		}
		if k <= j.a.Fail {
			err = fmt.Errorf("planned failure %d of slot %s", k, key)
		}
	}
	select {
	case <-time.After(j.a.Work):
	case <-ctx.Done():
		err = context.Cause(ctx)
	}
	if err == nil && j.a.Outlast {
		err = j.outlast(ctx, started)
	}
	// The lease may be lost as the work ends, too: WhileHeld then
	// reports the run lost whatever it returned.
	n.Lost = ctx.Err() != nil && errors.Is(context.Cause(ctx), lock.ErrLeaseLost)
	if err != nil {
		n.Err = err.Error()
	}
	if nerr := j.note("run end", id, n); nerr != nil {
		return nerr
	}
	return err
}

// outlast keeps a run that started at started going, if the test process
// has restarted Redis since (the count "restart at" is the time of the
// restart, 0 when none is under way), until its context ends, and returns
// the context's cause. It checks the context as a job checks it before a
// write, with Err, which reports a lease lost from the lease's deadline on.
func (j *recordedJob) outlast(ctx context.Context, started int64) error {
	for {
		at, err := j.link.Add("restart at", 0)
		if err != nil {
			return err
		}
		if at == 0 || at < started {
			return nil
		}
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (j *recordedJob) note(what string, id int64, n runNote) error {
	b, err := json.Marshal(n)
	if err != nil {
		return err
	}
	return j.link.Note(what, id, string(b))
}

// replicaName is the replica name of child n, as the job's record shows it.
func replicaName(n int) string { return fmt.Sprintf("replica-%d", n) }

// jobReplicaRole is one replica: its own client, a runtime with the job,
// and a graceful shutdown when told to stop.
func jobReplicaRole(ctx context.Context, env *fault.Env) error {
	var a jobArgs
	if err := env.Args(&a); err != nil {
		return err
	}
	rdb := a.Conn.client()
	defer rdb.Close()
	job := &recordedJob{a: a, db: lock.NewDB(rdb), link: env.Link}
	if a.Gate != "" {
		if err := env.Link.Note("ready", 0, ""); err != nil {
			return err
		}
		if err := env.Link.Wait(a.Gate); err != nil {
			return err
		}
	}
	rt, err := cron.Start([]cron.Job{job}, cron.WithReplica(replicaName(env.Child)))
	if err != nil {
		return err
	}
	if err := env.Link.Note("started", 0, ""); err != nil {
		return err
	}
	<-ctx.Done()
	shutdown, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return rt.Shutdown(shutdown)
}

// jobRun is one run as the job recorded it.
type jobRun struct {
	runNote
	ID    int64
	Child int
	Start int64 // on the suite's clock
	End   int64 // 0 while it runs, or if its replica was killed during it
}

// jobRuns returns the runs the job recorded, by start.
func jobRuns(coord *fault.Coordinator) []jobRun {
	byID := map[int64]*jobRun{}
	for _, n := range coord.Notes("") {
		if n.What != "run start" && n.What != "run end" {
			continue
		}
		var rn runNote
		_ = json.Unmarshal([]byte(n.Text), &rn)
		r := byID[n.Value]
		if r == nil {
			r = &jobRun{ID: n.Value, Child: n.Child}
			byID[n.Value] = r
		}
		if n.What == "run start" {
			r.runNote.Slot, r.SlotStart, r.Attempt, r.Trigger = rn.Slot, rn.SlotStart, rn.Attempt, rn.Trigger
			r.Start = n.At
		} else {
			r.Err, r.Lost, r.End = rn.Err, rn.Lost, n.At
		}
	}
	runs := make([]jobRun, 0, len(byID))
	for _, r := range byID {
		if r.Start != 0 {
			runs = append(runs, *r)
		}
	}
	slices.SortFunc(runs, func(a, b jobRun) int { return int(a.Start - b.Start) })
	return runs
}

// waitRun waits until the job has recorded a run that ok accepts, and
// returns the first; it fails the test after timeout.
func waitRun(t *testing.T, coord *fault.Coordinator, timeout time.Duration, what string, ok func(jobRun) bool) jobRun {
	t.Helper()
	r, found := findRun(coord, timeout, ok)
	if !found {
		t.Fatalf("no %s within %v; runs: %v", what, timeout, describeRuns(jobRuns(coord)))
	}
	return r
}

// findRun waits until the job has recorded a run that ok accepts, and
// returns the first, or false after timeout.
func findRun(coord *fault.Coordinator, timeout time.Duration, ok func(jobRun) bool) (jobRun, bool) {
	deadline := time.Now().Add(timeout)
	for {
		for _, r := range jobRuns(coord) {
			if ok(r) {
				return r, true
			}
		}
		if time.Now().After(deadline) {
			return jobRun{}, false
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// end returns when run r ended, by the job's account: its end, else the
// time its replica was killed (dead), else never (it runs still).
func (r jobRun) end(dead map[int]int64) int64 {
	if r.End != 0 {
		return r.End
	}
	if at, ok := dead[r.Child]; ok {
		return at
	}
	return math.MaxInt64
}

// overlap is two runs in progress at once, by the job's account.
type overlap struct {
	a, b jobRun
	d    time.Duration // how long both ran
}

// overlapping returns the pairs of runs that were in progress at once.
func overlapping(runs []jobRun, dead map[int]int64) []overlap {
	var out []overlap
	for i, a := range runs {
		for _, b := range runs[i+1:] {
			if b.Start < a.end(dead) {
				out = append(out, overlap{a, b, time.Duration(min(a.end(dead), b.end(dead), fault.Now()) - b.Start)})
			}
		}
	}
	return out
}

func (r jobRun) String() string {
	s := fmt.Sprintf("%s#%d(slot %s, attempt %d, %s, %s", replicaName(r.Child), r.ID&math.MaxUint32, r.runNote.Slot, r.Attempt, r.Trigger,
		time.Unix(0, r.Start).Format("15:04:05.000"))
	if r.End != 0 {
		s += fmt.Sprintf("+%v", time.Duration(r.End-r.Start).Round(time.Millisecond))
	}
	if r.Err != "" {
		s += ", " + r.Err
	}
	return s + ")"
}

func describeRuns(runs []jobRun) string {
	var b strings.Builder
	for _, r := range runs {
		b.WriteString("\n\t" + r.String())
	}
	return b.String()
}

// checkOverlaps fails the test for every pair of runs in progress at once,
// but those where the earlier run had lost its run lease: its context was
// cancelled with lock.ErrLeaseLost, and it went on past its lease by its
// own account only as far as its process was stalled (no lease prevents
// that). It returns how many pairs it found of each.
func checkOverlaps(t *testing.T, runs []jobRun, dead map[int]int64) (overlaps, afterLoss int) {
	t.Helper()
	for _, o := range overlapping(runs, dead) {
		if o.a.Lost {
			afterLoss++
			t.Logf("two runs at once for %v, the first having lost its run lease: %v and %v", o.d, o.a, o.b)
			continue
		}
		overlaps++
		t.Errorf("two runs at once for %v: %v and %v", o.d, o.a, o.b)
	}
	return overlaps, afterLoss
}

// lostRuns counts the runs whose run lease was lost.
func lostRuns(runs []jobRun) int {
	n := 0
	for _, r := range runs {
		if r.Lost {
			n++
		}
	}
	return n
}

// atOnce describes the overlaps for the figures.
func atOnce(overlaps, afterLoss, lost int) string {
	return fmt.Sprintf("%d pairs of runs at once, %d more after the first lost its run lease; %d runs lost their run lease", overlaps, afterLoss, lost)
}

// bySlot groups runs by slot, in the order of their first run.
func bySlot(runs []jobRun) ([]string, map[string][]jobRun) {
	var order []string
	m := map[string][]jobRun{}
	for _, r := range runs {
		if _, ok := m[r.runNote.Slot]; !ok {
			order = append(order, r.runNote.Slot)
		}
		m[r.runNote.Slot] = append(m[r.runNote.Slot], r)
	}
	return order, m
}

// spawnReplicas spawns n job-replica children numbered from first on, and
// waits until each has started its runtime, or, with a gate, waits for it.
func spawnReplicas(t *testing.T, coord *fault.Coordinator, first, n int, a jobArgs) map[int]*fault.Child {
	t.Helper()
	children := map[int]*fault.Child{}
	for i := first; i < first+n; i++ {
		children[i] = fault.Spawn(t, coord, i, "job-replica", a)
	}
	what := "started"
	if a.Gate != "" {
		what = "ready"
	}
	deadline := time.Now().Add(60 * time.Second)
	for i := first; i < first+n; i++ {
		for !slices.ContainsFunc(coord.Notes(what), func(n fault.Note) bool { return n.Child == i }) {
			if time.Now().After(deadline) {
				t.Fatalf("child %d sent no note %q within 60s; its output:\n%s", i, what, children[i].Output())
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	return children
}

// allStarted returns when the last replica to start, of those started so
// far, had started its runtime (by its note "started"): a slot that begins
// later is one that every one of them ticks. A replica knows of a slot's
// next attempt only if it ticked the slot (its tick found the run in
// progress and set a timer), or if it ran the attempt that failed.
func allStarted(coord *fault.Coordinator) int64 {
	var at int64
	for _, n := range coord.Notes("started") {
		at = max(at, n.At)
	}
	return at
}

// stopAll stops the children in children, all at once, and waits for them.
func stopAll(t *testing.T, children map[int]*fault.Child) {
	t.Helper()
	var wg sync.WaitGroup
	for _, c := range children {
		wg.Go(func() { c.Stop(t) })
	}
	wg.Wait()
}

// waitJobStatus polls the job's status until ok accepts it, and returns
// it; it fails the test after timeout.
func waitJobStatus(t *testing.T, admin cron.Admin, job string, timeout time.Duration, ok func(cron.JobStatus) bool) cron.JobStatus {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		st, err := admin.Status(t.Context(), job)
		if err == nil && ok(st) {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("Status(%q) = %+v (last %+v, last failure %+v), %v after %v", job, st, st.Last, st.LastFailure, err, timeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// sleepUntil sleeps until the suite's clock reads at.
func sleepUntil(at int64) { time.Sleep(time.Duration(at - fault.Now())) }

// ms formats durations in milliseconds for the figures.
func ms(ds []time.Duration) string {
	var s []string
	for _, d := range ds {
		s = append(s, fmt.Sprint(d.Round(time.Millisecond)))
	}
	return "[" + strings.Join(s, " ") + "]"
}

// nextSlotStart returns the first multiple of every, on the suite's clock,
// after at.
func nextSlotStart(at int64, every time.Duration) int64 {
	return (at/int64(every) + 1) * int64(every)
}

// TestJobKilledMidRun kills, with SIGKILL, the replica that runs a slot, in
// the middle of the run, and starts another replica in its place, again
// and again. With attempts until success, another replica runs the slot
// again once the run lease has run out, and the slot succeeds once; with at
// most once, the default, nobody runs that slot again.
func TestJobKilledMidRun(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		attempts int
	}{
		{"until it succeeds", 3},
		{"at most once", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := redistest.Start(t)
			coord := fault.NewCoordinator(t)
			admin := cron.NewAdmin(lock.NewDB(srv.Client(t)))
			const slotLen, runTTL = 4 * time.Second, time.Second
			args := jobArgs{
				Conn: conn{Addr: srv.Addr()}, Name: "killed", Spec: "*/4 * * * * *", NoStartupRun: true,
				Attempts: tc.attempts, RunTTL: runTTL, Work: time.Second,
			}
			start := time.Now()
			live := spawnReplicas(t, coord, 1, 3, args)
			dead := map[int]int64{}
			kills := fault.Pick(1, 5)
			var delays []time.Duration
			var victims []string
			lateKills, movedOn := 0, 0
			// The slot of the latest kill; the first one is ticked by
			// every replica, so that the others know the killed run.
			last := allStarted(coord)
			for k := range kills {
				victim := waitRun(t, coord, 2*slotLen, "scheduled run on a live replica", func(r jobRun) bool {
					return r.Trigger == "schedule" && r.SlotStart > last && live[r.Child] != nil
				})
				last = victim.SlotStart
				// After two heartbeats, before the first, after one.
				into := []time.Duration{800, 300, 550}[k%3] * time.Millisecond
				sleepUntil(victim.Start + int64(into))
				live[victim.Child].Kill(t)
				killedAt := fault.Now()
				dead[victim.Child] = killedAt
				delete(live, victim.Child)
				victims = append(victims, fmt.Sprintf("%s %v into slot %s's run", replicaName(victim.Child), into, victim.runNote.Slot))

				if _, over := findRun(coord, 0, func(r jobRun) bool { return r.ID == victim.ID && r.End != 0 }); over {
					// A busy machine woke the test too late: not a kill
					// mid-run, and nothing to check.
					t.Logf("replica %d was killed after its run had ended", victim.Child)
					lateKills++
				} else if tc.attempts >= 2 {
					retry := waitRun(t, coord, runTTL+10*time.Second, "run of the killed slot elsewhere", func(r jobRun) bool {
						return r.runNote.Slot == victim.runNote.Slot && r.ID != victim.ID
					})
					d := time.Duration(retry.Start - killedAt)
					delays = append(delays, d)
					if d > runTTL+2*time.Second {
						t.Errorf("the killed slot ran again %v after the kill, want within the run lease, %v (+2s for a busy machine)", d, runTTL)
					}
					if retry.Attempt != 2 || retry.Trigger != cron.TriggerRetry.String() {
						t.Errorf("the killed slot's next run: %v; want attempt 2, a retry", retry)
					}
					ended := waitRun(t, coord, 10*time.Second, "end of the retry", func(r jobRun) bool { return r.ID == retry.ID && r.End != 0 })
					// The record tells of the next slot once it begins: read
					// late (a busy machine), it is checked for what is still
					// about the killed one.
					slot := victim.runNote.Slot
					st := waitJobStatus(t, admin, args.Name, 10*time.Second, func(st cron.JobStatus) bool {
						return st.Last != nil && st.Last.Slot == slot && st.Running == nil || st.Slot != "" && st.Slot != slot
					})
					if st.Slot == slot {
						if st.SlotState != "done" || st.Attempts != 2 {
							t.Errorf("Status: slot %s %s after %d attempts; want done after 2", st.Slot, st.SlotState, st.Attempts)
						}
					} else {
						movedOn++
						t.Logf("slot %s: the record had moved on to slot %s when the test read it", slot, st.Slot)
					}
					if st.Last != nil && st.Last.Slot == slot && (st.Last.Outcome != "ok" || st.Last.Replica != replicaName(ended.Child) || st.Last.Attempt != 2) {
						t.Errorf("Status.Last = %+v; want attempt 2, ok, by %s", *st.Last, replicaName(ended.Child))
					}
					if f := st.LastFailure; st.Slot == slot && (f == nil || f.Slot != slot) || f != nil && f.Slot == slot && (f.Outcome != "lost" || f.Replica != replicaName(victim.Child) || f.Attempt != 1) {
						t.Errorf("Status.LastFailure = %+v; want attempt 1 of %s lost, by %s", f, slot, replicaName(victim.Child))
					}
				} else {
					// The replicas go on with the next slot; the killed one
					// is recorded as lost.
					waitRun(t, coord, 2*slotLen, "run of a later slot", func(r jobRun) bool { return r.SlotStart > victim.SlotStart })
					st := waitJobStatus(t, admin, args.Name, 10*time.Second, func(st cron.JobStatus) bool {
						return st.LastFailure != nil && st.LastFailure.Slot == victim.runNote.Slot
					})
					if f := st.LastFailure; f.Outcome != "lost" || f.Replica != replicaName(victim.Child) {
						t.Errorf("Status.LastFailure = %+v; want the killed run, lost, by %s", *f, replicaName(victim.Child))
					}
				}
				if k < kills-1 {
					for n, c := range spawnReplicas(t, coord, 4+k, 1, args) {
						live[n] = c
					}
				}
			}
			stopAll(t, live)

			runs := jobRuns(coord)
			slots, runsOf := bySlot(runs)
			killedSlots := map[string]bool{}
			for _, r := range runs {
				if _, ok := dead[r.Child]; ok && r.End == 0 {
					killedSlots[r.runNote.Slot] = true
				}
			}
			reruns, lostSlots := 0, 0
			for _, s := range slots {
				ok := 0
				for _, r := range runsOf[s] {
					if r.End != 0 && r.Err == "" {
						ok++
					}
				}
				switch {
				case slices.ContainsFunc(runsOf[s], func(r jobRun) bool { return r.Lost }):
					// A stalled replica lost its run lease: the slot is
					// then open or failed, as the attempts say.
					lostSlots++
					t.Logf("slot %s: a run lost its run lease: %v", s, describeRuns(runsOf[s]))
				case killedSlots[s] && tc.attempts >= 2:
					reruns += len(runsOf[s]) - 1
					if ok != 1 || len(runsOf[s]) != 2 {
						t.Errorf("killed slot %s: %d runs, %d ok, want 2 runs, 1 ok: %v", s, len(runsOf[s]), ok, describeRuns(runsOf[s]))
					}
				case killedSlots[s]:
					reruns += len(runsOf[s]) - 1
					if len(runsOf[s]) != 1 {
						t.Errorf("killed slot %s ran %d times, want once, at most once: %v", s, len(runsOf[s]), describeRuns(runsOf[s]))
					}
				case len(runsOf[s]) != 1 || ok != 1:
					t.Errorf("slot %s: %d runs, %d ok, want 1: %v", s, len(runsOf[s]), ok, describeRuns(runsOf[s]))
				}
			}
			if lateKills == len(dead) {
				// Every kill came after its run had ended: the scenario
				// showed nothing of a run killed mid-way.
				t.Errorf("all %d kills came after the run had ended; want kills mid-run", len(dead))
			}
			overlaps, afterLoss := checkOverlaps(t, runs, dead)
			notes := []string{
				fmt.Sprintf("%d runs in %d slots; %d kills (%s), %d of them after the run had ended; %d reruns of a killed slot", len(runs), len(slots), len(dead), strings.Join(victims, ", "), lateKills, reruns),
				atOnce(overlaps, afterLoss, lostRuns(runs)) + fmt.Sprintf(" (%d slots not checked for it)", lostSlots),
			}
			if tc.attempts >= 2 {
				notes = append(notes, fmt.Sprintf("killed slot run again after the kill by %s (run lease %v); %d killed slots whose record had moved on to the next slot when the test read it", ms(delays), runTTL, movedOn))
			}
			fault.Publish(t, fault.Figures{
				Scenario: "job killed mid-run, " + tc.name,
				Seconds:  time.Since(start).Seconds(),
				Ops:      len(runs),
				Faults:   fmt.Sprintf("%d × SIGKILL of the replica running a slot, 0.3–0.8 s into its 1 s run", len(dead)),
				Overlaps: overlaps,
				Notes:    notes,
			})
		})
	}
}

// TestJobLongRuns runs a job whose runs last three intervals on three
// replicas, for many intervals: never two runs at once, by the job's own
// account, since the run lease is kept by heartbeat however long a run goes.
func TestJobLongRuns(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		spec      string
		every     time.Duration // of the schedule, a Spec's included
		intervals int
	}{
		{"at least 300ms", "", 300 * time.Millisecond, fault.Pick(20, 200)},
		{"cron per second", "* * * * * *", time.Second, fault.Pick(7, 30)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := redistest.Start(t)
			coord := fault.NewCoordinator(t)
			args := jobArgs{
				Conn: conn{Addr: srv.Addr()}, Name: "long", Spec: tc.spec, Every: tc.every,
				RunTTL: time.Second, Work: 3 * tc.every,
			}
			live := spawnReplicas(t, coord, 1, 3, args)
			start := time.Now()
			time.Sleep(time.Duration(tc.intervals) * tc.every)
			spell, stopAt := time.Since(start), fault.Now()
			stopAll(t, live)

			all := jobRuns(coord)
			runs := slices.DeleteFunc(slices.Clone(all), func(r jobRun) bool { return r.Start > stopAt })
			overlaps, afterLoss := checkOverlaps(t, all, nil)
			failed, lost, unexplained := 0, 0, 0
			on := map[int]int{}
			var gaps []time.Duration
			for i, r := range runs {
				on[r.Child]++
				if r.Err != "" {
					failed++
				}
				if r.Lost {
					lost++ // it may have failed, or ended its work as the lease ran out
				}
				if r.Err != "" && !r.Lost {
					unexplained++
				}
				if i > 0 && runs[i-1].End != 0 {
					gaps = append(gaps, time.Duration(r.Start-runs[i-1].End))
				}
			}
			if len(runs) < 2 {
				t.Errorf("%d runs in %d intervals, want the job to go on running", len(runs), tc.intervals)
			}
			if unexplained > 0 {
				t.Errorf("%d runs failed, %d of them not by losing their run lease; want none but those: %v", failed, unexplained, describeRuns(runs))
			}
			var minGap, maxGap time.Duration
			if len(gaps) > 0 {
				minGap, maxGap = slices.Min(gaps), slices.Max(gaps)
			}
			// The job goes on running (RELIABILITY.md, Runs three
			// intervals long): the next run begins at most an interval
			// after one ends (measured: 1-2 ms for AtLeast, up to 1 s for
			// the per-second Cron job, whose tick just before a run's end
			// is skipped), and it ran until the replicas stopped; 2 s more
			// for a busy machine.
			slack := tc.every + 2*time.Second
			if maxGap > slack {
				t.Errorf("a run began %v after the one before it ended, want at most an interval, %v, +2s for a busy machine: %v", maxGap, tc.every, describeRuns(runs))
			}
			if len(runs) > 0 {
				if last := runs[len(runs)-1]; last.End != 0 && last.End < stopAt && time.Duration(stopAt-last.End) > slack {
					t.Errorf("the last run before the replicas stopped ended %v before they did, want at most an interval, %v, +2s: %v", time.Duration(stopAt-last.End), tc.every, describeRuns(runs))
				}
			}
			fault.Publish(t, fault.Figures{
				Scenario: "job runs 3 intervals long, " + tc.name,
				Seconds:  spell.Seconds(),
				Ops:      len(runs),
				Faults:   "none: runs 3 intervals long, run lease 1 s kept by heartbeat",
				Overlaps: overlaps,
				Notes: []string{
					fmt.Sprintf("%d intervals of %v, %d runs of %v begun in them on 3 replicas (runs per replica %v), %d failed, %d lost their lease; %d more runs begun while the replicas stopped",
						tc.intervals, tc.every, len(runs), args.Work, on, failed, lost, len(all)-len(runs)),
					fmt.Sprintf("between one run's end and the next one's start: %v to %v", minGap.Round(time.Millisecond), maxGap.Round(time.Millisecond)),
					atOnce(overlaps, afterLoss, lostRuns(all)),
				},
			})
		})
	}
}

// TestJobRetries runs a job whose slots get three attempts, and whose first
// two attempts at every slot fail, counted across the replicas: the third
// succeeds, after the back-offs, and the record says so. Once a failed
// attempt is recorded, the test stops its replica with SIGSTOP until the
// next attempt has begun, so that the attempts run across the replicas:
// left alone, the replica that failed claims the next attempt, its own
// timer being due when the back-off ends, the other replicas' no earlier.
func TestJobRetries(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	coord := fault.NewCoordinator(t)
	admin := cron.NewAdmin(lock.NewDB(srv.Client(t)))
	const backoff = 500 * time.Millisecond
	args := jobArgs{
		Conn: conn{Addr: srv.Addr()}, Name: "flaky", Spec: "*/4 * * * * *", NoStartupRun: true,
		Attempts: 3, Backoff: backoff, RunTTL: time.Second, Work: 100 * time.Millisecond, Fail: 2,
	}
	start := time.Now()
	live := spawnReplicas(t, coord, 1, 3, args)
	slotsWanted := fault.Pick(1, 10)
	var checked []string
	pauses, late, movedOn := 0, 0, 0
	// The first slot is one that every replica ticks: a replica that
	// started after a slot began knows nothing of the slot's next
	// attempts, and with the one that failed stopped, nobody would run
	// them; its own timer, late after the stop, would find the next slot
	// open. The replicas start some time apart (longer on a busy
	// machine), and a slot may begin in between.
	after := allStarted(coord)
	for range slotsWanted {
		first := waitRun(t, coord, 10*time.Second, "first attempt at a slot", func(r jobRun) bool { return r.SlotStart > after })
		after = first.SlotStart
		key := first.runNote.Slot
		prev := first
		for attempt := 1; attempt <= 2; attempt++ {
			waitJobStatus(t, admin, args.Name, 10*time.Second, func(st cron.JobStatus) bool {
				return st.Last != nil && st.Last.Slot == key && st.Last.Attempt >= attempt
			})
			if slices.ContainsFunc(jobRuns(coord), func(r jobRun) bool { return r.runNote.Slot == key && r.Attempt == attempt+1 }) {
				late++ // begun already, on the replica that failed
				prev = waitRun(t, coord, time.Second, "next attempt", func(r jobRun) bool { return r.runNote.Slot == key && r.Attempt == attempt+1 })
				continue
			}
			c := live[prev.Child]
			c.Pause(t)
			pausedAt := fault.Now()
			pauses++
			isNext := func(r jobRun) bool { return r.runNote.Slot == key && r.Attempt == attempt+1 }
			next, found := findRun(coord, 5*time.Second, isNext)
			c.Resume(t)
			switch {
			case !found:
				// The stopped replica may have claimed it just before the
				// stop: it tells of the run once resumed.
				late++
				next = waitRun(t, coord, 10*time.Second, fmt.Sprintf("attempt %d", attempt+1), isNext)
			case next.Child == prev.Child && next.Start < pausedAt:
				// Its back-off ended before the test could stop it (a busy
				// machine delays the test past the back-off): it had begun
				// the attempt, and said so, before the stop.
				late++
			case next.Child == prev.Child:
				t.Errorf("attempt %d: %v, on the replica stopped since attempt %d failed", attempt+1, next, attempt)
			}
			prev = next
		}
		third := waitRun(t, coord, 10*time.Second, "third attempt's end", func(r jobRun) bool {
			return r.runNote.Slot == key && r.Attempt == 3 && r.End != 0
		})
		// The record keeps one slot, its last run and its last failure:
		// once the next slot begins, it tells of that one. A test that
		// reads it late (a busy machine) checks what is still about key.
		st := waitJobStatus(t, admin, args.Name, 10*time.Second, func(st cron.JobStatus) bool {
			return st.Last != nil && st.Last.Slot == key && st.Last.Attempt == 3 || st.Slot != "" && st.Slot != key
		})
		if st.Slot == key {
			if st.SlotState != "done" || st.Attempts != 3 {
				t.Errorf("Status: slot %s %s after %d attempts; want done after 3", st.Slot, st.SlotState, st.Attempts)
			}
		} else {
			movedOn++
			t.Logf("slot %s: the record had moved on to slot %s when the test read it", key, st.Slot)
		}
		if st.Last != nil && st.Last.Slot == key {
			if st.Last.Attempt != 3 || st.Last.Outcome != "ok" || st.Last.Trigger != cron.TriggerRetry || st.Last.Replica != replicaName(third.Child) {
				t.Errorf("Status.Last = %+v; want attempt 3, a retry, ok, by %s", *st.Last, replicaName(third.Child))
			}
		}
		if f := st.LastFailure; st.Slot == key && (f == nil || f.Slot != key) {
			t.Errorf("Status.LastFailure = %+v; want attempt 2's error at slot %s", f, key)
		} else if f != nil && f.Slot == key && (f.Attempt != 2 || f.Outcome != "error" || !strings.Contains(f.Error, "planned failure 2")) {
			t.Errorf("Status.LastFailure = %+v; want attempt 2's error, planned failure 2", f)
		}
		checked = append(checked, key)
	}
	stopAll(t, live)

	runs := jobRuns(coord)
	slots, runsOf := bySlot(runs)
	var who []string
	spread := 0
	for _, s := range slots {
		rs := runsOf[s]
		if !slices.Contains(checked, s) {
			continue // begun as the replicas stopped
		}
		var replicas []string
		for i, r := range rs {
			replicas = append(replicas, strings.TrimPrefix(replicaName(r.Child), "replica-"))
			wantErr := i < 2
			wantTrigger := cron.TriggerRetry.String()
			if i == 0 {
				wantTrigger = cron.TriggerSchedule.String()
			}
			if r.Attempt != i+1 || r.Trigger != wantTrigger || (r.Err != "") != wantErr {
				t.Errorf("slot %s run %d: %v; want attempt %d, %s, failed %v", s, i+1, r, i+1, wantTrigger, wantErr)
			}
			if i > 0 {
				// The back-off doubles: Backoff after the first failure,
				// twice it after the second. Both stamps are the suite's,
				// the end before the failure was recorded, the start after
				// the claim, so the gap can't be shorter, however busy the
				// machine.
				want := backoff << (i - 1)
				if gap := time.Duration(r.Start - rs[i-1].End); gap < want-2*time.Millisecond {
					t.Errorf("slot %s: attempt %d started %v after attempt %d ended, want the back-off, %v, at least", s, i+1, gap, i, want)
				}
			}
		}
		if len(rs) != 3 {
			t.Errorf("slot %s ran %d times, want 3: %v", s, len(rs), describeRuns(rs))
		}
		if len(rs) == 3 && rs[0].Child != rs[1].Child && rs[1].Child != rs[2].Child {
			spread++
		}
		who = append(who, strings.Join(replicas, ","))
	}
	overlaps, afterLoss := checkOverlaps(t, runs, nil)
	fault.Publish(t, fault.Figures{
		Scenario: "job fails its first 2 attempts",
		Seconds:  time.Since(start).Seconds(),
		Ops:      len(runs),
		Faults:   fmt.Sprintf("the first 2 attempts at each slot fail, counted across replicas; back-off %v, doubling; %d × SIGSTOP of the replica that failed until the next attempt began", backoff, pauses),
		Overlaps: overlaps,
		Notes: []string{
			fmt.Sprintf("%d slots checked, each 3 attempts, the 3rd ok; %d slots whose every attempt ran on another replica than the one before; %d attempts begun on the failed replica before the test could stop it; %d slots whose record had moved on to the next slot when the test read it",
				len(checked), spread, late, movedOn),
			"replicas per attempt, by slot: " + strings.Join(who, " "),
			atOnce(overlaps, afterLoss, lostRuns(runs)),
		},
	})
}

// TestJobCatchUp stops every replica across 3 slots of a job that has no
// startup run, then starts three together: exactly one of them runs the
// latest slot, as a catch-up, and the missed slots before it never run.
func TestJobCatchUp(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	coord := fault.NewCoordinator(t)
	admin := cron.NewAdmin(lock.NewDB(srv.Client(t)))
	const slotLen = 2 * time.Second
	args := jobArgs{
		Conn: conn{Addr: srv.Addr()}, Name: "nightly", Spec: "*/2 * * * * *", NoStartupRun: true,
		CatchUp: 10 * time.Second, Work: 200 * time.Millisecond, Gate: "go 0",
	}
	start := time.Now()
	live := spawnReplicas(t, coord, 1, 3, args)
	coord.Open(args.Gate)
	rounds := fault.Pick(1, 4)
	var delays []time.Duration
	var report []string
	lateGates, lostCatchUps := 0, 0
	for round := range rounds {
		// Two slots run, then every replica stops.
		upAt := fault.Now()
		waitRun(t, coord, 3*slotLen, "run of a second slot", func(r jobRun) bool { return r.SlotStart > upAt+int64(slotLen) && r.End != 0 })
		stopAll(t, live)
		stoppedAt := fault.Now()
		// New replicas, ready but not running, until 3 slots have begun
		// without any replica and the third is half a second old.
		args.Gate = fmt.Sprintf("go %d", round+1)
		live = spawnReplicas(t, coord, 4+3*round, 3, args)
		missed := nextSlotStart(stoppedAt, slotLen)
		third := missed + 2*int64(slotLen)
		sleepUntil(third + int64(500*time.Millisecond))
		openedAt := fault.Now()
		coord.Open(args.Gate)

		catchUp := waitRun(t, coord, 10*time.Second, "catch-up run", func(r jobRun) bool { return r.Start > openedAt && r.Trigger == cron.TriggerCatchUp.String() })
		delays = append(delays, time.Duration(catchUp.Start-openedAt))
		// The latest slot is the one in progress when the replica's
		// runtime started: after the gate opened, before its note
		// "started". The gate opens half a second into the third missed
		// slot, but a busy machine may wake the test, or start the
		// runtimes, a slot later.
		startedAt := int64(0)
		for _, n := range coord.Notes("started") {
			if n.Child == catchUp.Child {
				startedAt = n.At
			}
		}
		if lo, hi := nextSlotStart(openedAt, slotLen)-int64(slotLen), nextSlotStart(startedAt, slotLen)-int64(slotLen); catchUp.SlotStart < lo || catchUp.SlotStart > hi {
			t.Errorf("catch-up run %v; want the latest slot when its runtime started, between %s and %s", catchUp,
				time.Unix(0, lo).UTC().Format(time.TimeOnly), time.Unix(0, hi).UTC().Format(time.TimeOnly))
		}
		if catchUp.SlotStart != third {
			lateGates++
		}
		ended := waitRun(t, coord, 10*time.Second, "end of the catch-up run", func(r jobRun) bool { return r.ID == catchUp.ID && r.End != 0 })
		st := waitJobStatus(t, admin, args.Name, 10*time.Second, func(st cron.JobStatus) bool {
			return st.Last != nil && st.Last.Slot == catchUp.runNote.Slot
		})
		// A run that lost its run lease is recorded so (see the notes of
		// the figures): counted apart.
		outcome := "ok"
		if ended.Lost {
			outcome = "lost"
			lostCatchUps++
			t.Logf("round %d: the catch-up run lost its run lease: %v", round+1, ended)
		}
		if st.Last.Trigger != cron.TriggerCatchUp || st.Last.Replica != replicaName(catchUp.Child) || st.Last.Outcome != outcome {
			t.Errorf("Status.Last = %+v; want the catch-up run by %s, %s", *st.Last, replicaName(catchUp.Child), outcome)
		}
		// The next slot runs as scheduled: the first whose tick came
		// after the catch-up run ended (a tick while it runs is
		// skipped), or an earlier one.
		next := waitRun(t, coord, 3*slotLen+time.Duration(ended.End-catchUp.Start), "run of a slot after the catch-up", func(r jobRun) bool { return r.SlotStart > catchUp.SlotStart })
		if next.Trigger != cron.TriggerSchedule.String() || next.SlotStart > nextSlotStart(ended.End, slotLen) {
			t.Errorf("run after the catch-up: %v; want a scheduled one, of the first slot after the catch-up ended or an earlier one", next)
		}
		var inGap, catchUps int
		for _, r := range jobRuns(coord) {
			if r.Start > stoppedAt && r.Start < next.Start {
				inGap++
			}
			if r.Start > stoppedAt && r.Trigger == cron.TriggerCatchUp.String() {
				catchUps++
			}
		}
		if inGap != 1 || catchUps != 1 {
			t.Errorf("round %d: %d runs between the stop and the next scheduled slot, %d catch-up runs since the stop; want 1 and 1: %v", round+1, inGap, catchUps, describeRuns(jobRuns(coord)))
		}
		report = append(report, fmt.Sprintf("round %d: down %.1fs across slots %s..%s; 1 catch-up of %s by %s",
			round+1, time.Duration(openedAt-stoppedAt).Seconds(), time.Unix(0, missed).UTC().Format(time.TimeOnly),
			time.Unix(0, third).UTC().Format(time.TimeOnly), time.Unix(0, catchUp.SlotStart).UTC().Format(time.TimeOnly), replicaName(catchUp.Child)))
	}
	stopAll(t, live)
	runs := jobRuns(coord)
	catchUps, initial := 0, 0
	for _, r := range runs {
		if r.Trigger == cron.TriggerCatchUp.String() {
			catchUps++
			if r.Child <= 3 {
				initial++ // at the very first start, with no record: never, by R4
			}
		}
	}
	// RELIABILITY.md (Catch-up): the very first start ran no catch-up.
	// There was no record yet, and a slot from before the job's record
	// existed is never caught up (LeaseConfig.CatchUp, R4 of
	// cron/PROTOCOL.md).
	if initial != 0 {
		t.Errorf("%d catch-up runs at the very first start, with no record yet; want none: %v", initial, describeRuns(runs))
	}
	overlaps, afterLoss := checkOverlaps(t, runs, nil)
	fault.Publish(t, fault.Figures{
		Scenario: "job catch-up",
		Seconds:  time.Since(start).Seconds(),
		Ops:      len(runs),
		Faults:   fmt.Sprintf("%d × every replica stopped across 3 slots of 2 s, then 3 started together", rounds),
		Overlaps: overlaps,
		Notes: append(report,
			fmt.Sprintf("%d runs, %d catch-up runs (%d at the very first start, with no record yet) in %d rounds; catch-up run started %s after the replicas were let go; %d rounds whose runtimes started after the third missed slot had ended; %d catch-up runs that lost their run lease",
				len(runs), catchUps, initial, rounds, ms(delays), lateGates, lostCatchUps),
			atOnce(overlaps, afterLoss, lostRuns(runs))),
	})
}

// TestJobPause pauses a job from an Admin in the test process: no replica
// runs a slot while it is paused; a run-now request is run exactly once,
// paused or not; after Resume the job runs again from its next slot.
func TestJobPause(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	coord := fault.NewCoordinator(t)
	admin := cron.NewAdmin(lock.NewDB(srv.Client(t)))
	args := jobArgs{
		Conn: conn{Addr: srv.Addr()}, Name: "steered", Spec: "* * * * * *", NoStartupRun: true,
		Work: 100 * time.Millisecond,
	}
	start := time.Now()
	live := spawnReplicas(t, coord, 1, 3, args)
	cycles := fault.Pick(1, 5)
	pauseFor := fault.Pick(3*time.Second, 5*time.Second)
	var runNowDelays, resumeDelays []time.Duration
	pausedRuns, requested, notNext := 0, 0, 0
	for range cycles {
		upAt := fault.Now()
		waitRun(t, coord, 5*time.Second, "scheduled run", func(r jobRun) bool { return r.Start > upAt && r.End != 0 })
		if err := admin.Pause(t.Context(), args.Name); err != nil {
			t.Fatal(err)
		}
		pausedAt := fault.Now()
		if st, err := admin.Status(t.Context(), args.Name); err != nil || !st.Paused {
			t.Errorf("Status after Pause = paused %v, %v; want paused", st.Paused, err)
		}
		time.Sleep(pauseFor)
		for _, r := range jobRuns(coord) {
			if r.Start > pausedAt && r.SlotStart > pausedAt {
				pausedRuns++
				t.Errorf("run while paused: %v", r)
			}
		}

		askedAt := fault.Now()
		if err := admin.RunNow(t.Context(), args.Name); err != nil {
			t.Fatal(err)
		}
		req := waitRun(t, coord, 5*time.Second, "requested run", func(r jobRun) bool { return r.Start > askedAt })
		runNowDelays = append(runNowDelays, time.Duration(req.Start-askedAt))
		if req.Trigger != cron.TriggerRequest.String() {
			t.Errorf("the run after RunNow while paused: %v; want one requested", req)
		}
		waitRun(t, coord, 5*time.Second, "requested run's end", func(r jobRun) bool { return r.ID == req.ID && r.End != 0 })
		time.Sleep(1500 * time.Millisecond)
		var since []jobRun
		for _, r := range jobRuns(coord) {
			if r.Start > askedAt {
				since = append(since, r)
			}
		}
		requested += len(since)
		if len(since) != 1 {
			t.Errorf("%d runs after one RunNow while paused, want 1: %v", len(since), describeRuns(since))
		}
		st, err := admin.Status(t.Context(), args.Name)
		if err != nil || st.RunRequested || st.Last == nil || st.Last.Trigger != cron.TriggerRequest || st.Last.Replica != replicaName(req.Child) {
			t.Errorf("Status after the requested run = %+v (last %+v), %v; want no request left, the last run requested, by %s", st, st.Last, err, replicaName(req.Child))
		}

		resumeSent := fault.Now()
		if err := admin.Resume(t.Context(), args.Name); err != nil {
			t.Fatal(err)
		}
		resumedAt := fault.Now()
		next := waitRun(t, coord, 5*time.Second, "run after Resume", func(r jobRun) bool { return r.Start > resumedAt })
		resumeDelays = append(resumeDelays, time.Duration(next.Start-resumedAt))
		// The pause is lifted at some instant between the call and its
		// return (on a busy machine, tens of milliseconds apart), and a
		// tick whose claim reaches Redis after it runs: the slot in
		// progress at the call may run, no slot over by then.
		if first := nextSlotStart(resumeSent, time.Second) - int64(time.Second); next.Trigger != cron.TriggerSchedule.String() || next.SlotStart < first || next.SlotStart > resumedAt+int64(3*time.Second) {
			t.Errorf("run after Resume: %v; want a scheduled run of the slot in progress when Resume was called, %s, or a later one", next, time.Unix(0, first).UTC().Format(time.TimeOnly))
		}
		if next.SlotStart != nextSlotStart(resumedAt, time.Second) {
			notNext++
		}
	}
	stopAll(t, live)
	runs := jobRuns(coord)
	overlaps, afterLoss := checkOverlaps(t, runs, nil)
	fault.Publish(t, fault.Figures{
		Scenario: "job pause, run-now, resume",
		Seconds:  time.Since(start).Seconds(),
		Ops:      len(runs),
		Faults:   fmt.Sprintf("%d × Pause for %v, RunNow while paused, Resume (from an Admin in the test process)", cycles, pauseFor),
		Overlaps: overlaps,
		Notes: []string{
			fmt.Sprintf("%d runs in all; %d runs of slots begun while paused; %d runs after %d RunNow", len(runs), pausedRuns, requested, cycles),
			fmt.Sprintf("requested run started %s after RunNow returned", ms(runNowDelays)),
			fmt.Sprintf("first run after Resume started %s after it returned; %d of %d not of the next slot", ms(resumeDelays), notNext, cycles),
			atOnce(overlaps, afterLoss, lostRuns(runs)),
		},
	})
}

// TestJobRedisRestart restarts redis-server without persistence in the
// middle of a run, and measures what follows: the record and every lease
// are gone, so the run's heartbeat finds its run lease lost and cancels it
// with cause lock.ErrLeaseLost, and nothing keeps another replica from
// starting the job before that. It asserts the cancellation and what
// becomes of the slot: at most once, it never runs again; with attempts
// left, it runs again and succeeds within a slot of the cancelled run's
// end. The overlaps are figures.
func TestJobRedisRestart(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		spec     string
		slotLen  time.Duration
		attempts int
		work     time.Duration
	}{
		{"at most once, per-second slots", "* * * * * *", time.Second, 0, 2500 * time.Millisecond},
		{"until it succeeds, 4-second slots", "*/4 * * * * *", 4 * time.Second, 3, 1500 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := redistest.Start(t)
			coord := fault.NewCoordinator(t)
			const runTTL = time.Second
			args := jobArgs{
				Conn: conn{Addr: srv.Addr()}, Name: "restarted", Spec: tc.spec, NoStartupRun: true,
				Attempts: tc.attempts, RunTTL: runTTL, Work: tc.work, Outlast: true,
			}
			start := time.Now()
			live := spawnReplicas(t, coord, 1, 3, args)
			restarts := fault.Pick(1, 10)
			var cancelDelays, overlapDurs []time.Duration
			cancelled, dupSlots, overlaps, reruns, lateRestarts, rescued := 0, 0, 0, 0, 0, 0
			var notes []string
			settled := fault.Now()
			var lastRestart int64
			for k := range restarts {
				// Into the run by 950 ms (just before a per-second slot's
				// next tick), 450, 200, 700 or 1200 ms.
				into := []time.Duration{950, 450, 200, 700, 1200}[k%5] * time.Millisecond
				victim := waitRun(t, coord, 3*tc.slotLen+5*time.Second, "run to restart Redis under", func(r jobRun) bool {
					return r.Start > settled && r.End == 0 && r.Trigger == cron.TriggerSchedule.String()
				})
				sleepUntil(victim.Start + int64(into))
				restartAt := fault.Now()
				lastRestart = restartAt
				// The run goes on past its work until it learns that it
				// lost its lease, however long the restart takes: on a
				// busy machine the rig took up to 2.2 s to bring the
				// server back, and a run that ended before then had not
				// lost its lease by its own account yet.
				coord.Add("restart at", restartAt)
				srv.Restart(t)
				backAt := fault.Now()
				ended := waitRun(t, coord, tc.work+runTTL+10*time.Second, "end of the run under the restart", func(r jobRun) bool { return r.ID == victim.ID && r.End != 0 })
				coord.Add("restart at", -restartAt)
				if ended.End < restartAt {
					// A busy machine woke the test too late: the run was
					// over before the restart.
					t.Logf("restart %d came after the run had ended: %v", k+1, ended)
					lateRestarts++
					sleepUntil(backAt + int64(tc.slotLen))
					settled = fault.Now()
					continue
				}
				d := time.Duration(ended.End - restartAt)
				cancelDelays = append(cancelDelays, d)
				if !ended.Lost {
					t.Errorf("the run in progress when Redis restarted: %v; want it cancelled with cause lock.ErrLeaseLost", ended)
				} else {
					cancelled++
				}
				if d > runTTL+2*time.Second {
					t.Errorf("the run in progress ended %v after Redis restarted, want within its run lease, %v (+2s for a busy machine)", d, runTTL)
				}
				// Let the replicas run on for a slot past its end.
				sleepUntil(max(ended.End, backAt) + int64(tc.slotLen) + int64(500*time.Millisecond))
				settled = fault.Now()

				runs := jobRuns(coord)
				var same, beside []string
				succeeded := false
				for _, r := range runs {
					if r.ID == victim.ID {
						continue
					}
					if r.runNote.Slot == victim.runNote.Slot {
						same = append(same, r.String())
						succeeded = succeeded || r.End != 0 && r.Err == ""
					}
					if r.Start > restartAt && r.Start < ended.End {
						beside = append(beside, r.String())
						overlapDurs = append(overlapDurs, time.Duration(min(ended.End, r.end(nil), fault.Now())-r.Start).Round(time.Microsecond))
					}
				}
				reruns += len(same)
				if len(same) > 0 {
					dupSlots++
				}
				switch {
				case tc.attempts > 1 && ended.Lost && !succeeded:
					// The run lost its lease with attempts left: its slot
					// runs again, and succeeds, though the record that
					// counted its attempts is gone.
					t.Errorf("restart %d, %v into %v: its slot did not run again with success within a slot of its end (runs of it: %v)", k+1, into, victim, same)
				case tc.attempts <= 1 && len(same) > 0:
					t.Errorf("restart %d, %v into %v: its slot ran again, at most once: %v", k+1, into, victim, same)
				}
				if succeeded {
					rescued++
				}
				overlaps += len(beside)
				notes = append(notes, fmt.Sprintf("restart %d, %v into %v, Redis down %v: cancelled %v (lost %v) %v after the restart; same slot run again: %v; runs started before it ended: %v",
					k+1, into, victim, time.Duration(backAt-restartAt).Round(time.Millisecond), ended.Err != "", ended.Lost,
					d.Round(time.Millisecond), same, beside))
			}
			stopAll(t, live)
			runs := jobRuns(coord)
			okAfter := 0
			for _, r := range runs {
				if r.Start > lastRestart && r.End != 0 && r.Err == "" {
					okAfter++
				}
			}
			if okAfter == 0 {
				t.Errorf("no run begun after the last restart succeeded: %v", describeRuns(runs))
			}
			for _, n := range notes {
				t.Log(n)
			}
			fault.Publish(t, fault.Figures{
				Scenario: "job under a Redis restart without persistence, " + tc.name,
				Seconds:  time.Since(start).Seconds(),
				Ops:      len(runs),
				Faults:   fmt.Sprintf("%d × redis-server killed and restarted empty, 0.2–1.2 s into a run of %v (run lease %v)", restarts, tc.work, runTTL),
				Overlaps: len(overlapping(runs, nil)),
				Notes: []string{
					fmt.Sprintf("%d runs; %d of %d runs under a restart cancelled with lock.ErrLeaseLost, %s after the restart; %d restarts came after the run had ended",
						len(runs), cancelled, restarts-lateRestarts, ms(cancelDelays), lateRestarts),
					fmt.Sprintf("%d restarts after which the same slot ran again (%d reruns), %d of them with success; %d runs started beside the cancelled run before it ended, for %v",
						dupSlots, reruns, rescued, overlaps, overlapDurs),
				},
			})
		})
	}
}
