package cron_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
	_ "time/tzdata" // the zones' rules, whatever the machine has installed

	"github.com/redis/go-redis/v9"

	"github.com/wakuwaku-go/wakuwaku/cron"
	"github.com/wakuwaku-go/wakuwaku/internal/redistest"
	"github.com/wakuwaku-go/wakuwaku/interval"
	"github.com/wakuwaku-go/wakuwaku/lock"
)

// clockAt returns a clock that reads base when called first and then moves
// with the bubble's time.
func clockAt(base time.Time) func() time.Time {
	origin := time.Now()
	return func() time.Time { return base.Add(time.Since(origin)) }
}

// TestDaylightSavingRuns runs zoned jobs through the nights their zones
// change clocks, on the bubble's fake time, and checks the instants at which
// they ran: a repeated wall time once, a skipped one right after the change,
// a day without a midnight still at its start.
func TestDaylightSavingRuns(t *testing.T) {
	tests := []struct {
		name  string
		spec  string
		from  string // the runtime's start, UTC
		watch time.Duration
		want  []string // the Scheduled of each run, UTC
		keys  []string
	}{
		{"New York falls back", "CRON_TZ=America/New_York 30 1 * * *", "2026-10-31T12:00:00Z", 3 * 24 * time.Hour,
			[]string{"2026-11-01T05:30:00Z", "2026-11-02T06:30:00Z", "2026-11-03T06:30:00Z"},
			[]string{"2026-11-01T01:30:00[America/New_York]", "2026-11-02T01:30:00[America/New_York]", "2026-11-03T01:30:00[America/New_York]"}},
		{"New York springs forward", "CRON_TZ=America/New_York 30 2 * * *", "2027-03-13T12:00:00Z", 3 * 24 * time.Hour,
			[]string{"2027-03-14T07:00:00Z", "2027-03-15T06:30:00Z", "2027-03-16T06:30:00Z"},
			[]string{"2027-03-14T02:30:00[America/New_York]", "2027-03-15T02:30:00[America/New_York]", "2027-03-16T02:30:00[America/New_York]"}},
		{"Sao Paulo loses a midnight", "CRON_TZ=America/Sao_Paulo 0 0 4 11 *", "2018-06-01T00:00:00Z", 366 * 24 * time.Hour,
			[]string{"2018-11-04T03:00:00Z"},
			[]string{"2018-11-04T00:00:00[America/Sao_Paulo]"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var ticks list[cron.Tick]
				job := &testJob{name: "zoned", every: interval.MustCron(tc.spec).WithoutStartupRun(),
					process: func(_ context.Context, tick cron.Tick) error {
						ticks.add(tick)
						return nil
					}}
				rt := start(t, []cron.Job{job}, cron.WithClock(clockAt(mustParse(t, tc.from))))
				time.Sleep(tc.watch)
				synctest.Wait()
				if err := rt.Shutdown(t.Context()); err != nil {
					t.Fatal(err)
				}
				got := ticks.get()
				var at, keys []string
				for _, tick := range got {
					at = append(at, tick.Scheduled.UTC().Format(time.RFC3339))
					key, _ := tick.Slot.Key()
					keys = append(keys, key)
				}
				t.Logf("ran at %v as %v", at, keys)
				if fmt.Sprint(at) != fmt.Sprint(tc.want) || fmt.Sprint(keys) != fmt.Sprint(tc.keys) {
					t.Errorf("runs at %v (slots %v), want %v (slots %v)", at, keys, tc.want, tc.keys)
				}
			})
		})
	}
}

// TestWithoutStartupRun checks that a job whose interval opts out of the
// startup run first runs at its first slot (or d after the start), and that
// the default still runs at once.
func TestWithoutStartupRun(t *testing.T) {
	from := mustParse(t, "2026-12-02T10:00:00Z")
	tests := []struct {
		every interval.Interval
		want  []time.Duration // from the start, by the runtime's clock
	}{
		{interval.MustCron("0 0 3 * * *"), []time.Duration{0, 17 * time.Hour}},
		{interval.MustCron("0 0 3 * * *").WithoutStartupRun(), []time.Duration{17 * time.Hour}},
		{interval.AtLeast(10 * time.Hour).WithoutStartupRun(), []time.Duration{10 * time.Hour, 20 * time.Hour}},
	}
	for _, tc := range tests {
		t.Run(tc.every.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var ticks list[cron.Tick]
				job := &testJob{name: "nightly", every: tc.every, process: func(_ context.Context, tick cron.Tick) error {
					ticks.add(tick)
					return nil
				}}
				start(t, []cron.Job{job}, cron.WithClock(clockAt(from)))
				time.Sleep(24 * time.Hour)
				synctest.Wait()
				var got []time.Duration
				for _, tick := range ticks.get() {
					got = append(got, tick.Started.Sub(from))
				}
				if fmt.Sprint(got) != fmt.Sprint(tc.want) {
					t.Errorf("runs at +%v, want +%v", got, tc.want)
				}
			})
		})
	}
}

// TestEveryAcrossReplicas starts two replicas of a leased "@every 2s" job
// 1.1 s apart on a real redis-server: each 2-second slot of the grid runs
// once, on one of them. (With slots counted from each replica's start, both
// ran every slot.)
func TestEveryAcrossReplicas(t *testing.T) {
	srv := redistest.Start(t)
	db := lock.NewDB(srv.Client(t))
	var runs list[string]
	replica := func(name string) *cron.Runtime {
		job := &leasedJob{
			testJob: testJob{name: "every-2s", every: interval.MustCron("@every 2s"), process: func(_ context.Context, tick cron.Tick) error {
				// Which grid window the run began in, by the wall clock.
				window := tick.Started.Truncate(0).UnixMilli() / 2000
				runs.add(fmt.Sprintf("%d:%s", window, name))
				return nil
			}},
			lease: cron.LeaseConfig{DB: db},
		}
		rt, err := cron.Start([]cron.Job{job})
		if err != nil {
			t.Fatal(err)
		}
		return rt
	}
	a := replica("A")
	time.Sleep(1100 * time.Millisecond)
	b := replica("B")
	time.Sleep(7 * time.Second)
	a.Shutdown(t.Context())
	b.Shutdown(t.Context())

	got := runs.get()
	t.Logf("runs (grid window:replica): %v", got)
	seen := map[string]string{}
	for _, r := range got {
		var window int64
		var name string
		fmt.Sscanf(r, "%d:%s", &window, &name)
		key := fmt.Sprint(window)
		if prev, dup := seen[key]; dup {
			t.Errorf("window %s ran twice, on %s and %s", key, prev, name)
		}
		seen[key] = name
	}
	if len(got) < 3 {
		t.Errorf("%d runs in 8.1 s of a 2 s job, want at least 3", len(got))
	}
	var first, last int64 = 1 << 62, 0
	for key := range seen {
		var w int64
		fmt.Sscan(key, &w)
		first, last = min(first, w), max(last, w)
	}
	if n := last - first + 1; int64(len(seen)) != n {
		t.Errorf("%d windows ran between the first and the last, want all %d", len(seen), n)
	}
}

// TestRestartWithinSlot restarts a replica of a leased "@every 1h" job
// within its slot: the restarted startup run belongs to the slot that
// already ran, and is skipped.
func TestRestartWithinSlot(t *testing.T) {
	srv := redistest.Start(t)
	db := lock.NewDB(srv.Client(t))
	ran := make(chan cron.Tick, 4)
	job := &leasedJob{
		testJob: testJob{name: "hourly-grid", every: interval.MustCron("@every 1h"), process: func(_ context.Context, tick cron.Tick) error {
			ran <- tick
			return nil
		}},
		lease: cron.LeaseConfig{DB: db},
	}
	rt, err := cron.Start([]cron.Job{job})
	if err != nil {
		t.Fatal(err)
	}
	first := <-ran
	rt.Shutdown(t.Context())

	var sk skips
	rt, err = cron.Start([]cron.Job{job}, cron.WithObserver(sk.observer()))
	if err != nil {
		t.Fatal(err)
	}
	rt.Shutdown(t.Context())
	if reasons, _ := sk.get(); len(reasons) != 1 || reasons[0] != cron.ReasonLeaseHeld {
		key, _ := first.Slot.Key()
		t.Errorf("restart in slot %s: skips %q, want one %q", key, reasons, cron.ReasonLeaseHeld)
	}
	select {
	case tick := <-ran:
		t.Errorf("the restarted replica ran slot %v again", tick.Slot)
	default:
	}
}

// slowOnce is a lock.Client that delays the nth command it forwards by
// delay, as a Redis that answers late does.
type slowOnce struct {
	lock.Client
	n, count atomic.Int64
	delay    time.Duration
}

func (c *slowOnce) Process(ctx context.Context, cmd redis.Cmder) error {
	if c.count.Add(1) == c.n.Load() {
		time.Sleep(c.delay)
	}
	return c.Client.Process(ctx, cmd)
}

// TestLeaseTakenLate has Redis take the second lease of an AtLeast(2s) job
// a second late, so that the key outlives the interval: the replica's next
// tick finds its own lease and still runs, rather than skipping as if
// another replica held it.
func TestLeaseTakenLate(t *testing.T) {
	srv := redistest.Start(t)
	client := &slowOnce{Client: srv.Client(t), delay: time.Second}
	client.n.Store(2) // the startup run's acquire is the first
	var sk skips
	ran := make(chan cron.Tick, 10)
	job := &leasedJob{
		testJob: testJob{name: "late-lease", every: interval.AtLeast(2 * time.Second), process: func(_ context.Context, tick cron.Tick) error {
			ran <- tick
			return nil
		}},
		lease: cron.LeaseConfig{DB: lock.NewDB(client)},
	}
	rt, err := cron.Start([]cron.Job{job}, cron.WithObserver(sk.observer()))
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Shutdown(context.Background())
	for i := range 3 {
		select {
		case tick := <-ran:
			t.Logf("run %d at %v", tick.Run, tick.Started.Format("15:04:05.000"))
		case <-time.After(5 * time.Second):
			reasons, errs := sk.get()
			t.Fatalf("run %d did not come; skips %q %v", i+1, reasons, errs)
		}
	}
	if reasons, _ := sk.get(); len(reasons) > 0 {
		t.Errorf("skipped %q, want no skip", reasons)
	}
}

// TestStartRefusesPanics checks that a panic in a job's Name, Interval or
// Lease method fails Start with an error naming the job, and that a spec
// error inside such a panic can be read back.
func TestStartRefusesPanics(t *testing.T) {
	badSpec := func() interval.Interval { return interval.MustCron("0 0 3 * * * *") }
	tests := []struct {
		name string
		job  cron.Job
		want string
	}{
		{"Name", &panicky{where: "Name"}, `jobs[0] (*cron_test.panicky): its Name method panicked: boom`},
		{"Interval", &panicky{where: "Interval"}, `job "panicky": its Interval method panicked: boom`},
		{"Lease", &panicky{where: "Lease"}, `job "panicky": its Lease method panicked: boom`},
		{"MustCron", &testJob{name: "from-config", every: interval.Interval{}}, `job "from-config" has no interval`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rt, err := cron.Start([]cron.Job{tc.job})
			if err == nil {
				rt.Shutdown(context.Background())
				t.Fatalf("Start = nil, want an error")
			}
			if !errors.Is(err, cron.ErrInvalidJob) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Start = %v, want ErrInvalidJob with %q", err, tc.want)
			}
		})
	}
	t.Run("spec error through the panic", func(t *testing.T) {
		_, err := cron.Start([]cron.Job{&intervalFunc{name: "cfg", every: badSpec}})
		var specErr *interval.SpecError
		if !errors.As(err, &specErr) {
			t.Errorf("Start = %v, want a *interval.SpecError inside", err)
		}
	})
}

type panicky struct{ where string }

func (p *panicky) Name() string {
	if p.where == "Name" {
		panic("boom")
	}
	return "panicky"
}

func (p *panicky) Interval() interval.Interval {
	if p.where == "Interval" {
		panic("boom")
	}
	return interval.AtLeast(time.Hour)
}

func (p *panicky) Lease() cron.LeaseConfig {
	if p.where == "Lease" {
		panic("boom")
	}
	return cron.LeaseConfig{}
}

func (p *panicky) Process(context.Context, cron.Tick) error { return nil }

type intervalFunc struct {
	name  string
	every func() interval.Interval
}

func (j *intervalFunc) Name() string                             { return j.name }
func (j *intervalFunc) Interval() interval.Interval              { return j.every() }
func (j *intervalFunc) Process(context.Context, cron.Tick) error { return nil }

func mustParse(t *testing.T, s string) time.Time {
	t.Helper()
	at, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatal(err)
	}
	return at
}
