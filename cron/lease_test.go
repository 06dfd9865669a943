package cron_test

import (
	"context"
	"errors"
	"log/slog"
	"net"
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

// leasedJob is a testJob that asks for the runtime's lease.
type leasedJob struct {
	testJob
	lease cron.LeaseConfig
}

func (j *leasedJob) Lease() cron.LeaseConfig { return j.lease }

// skips records the skipped ticks an Observer reports.
type skips struct {
	mu      sync.Mutex
	reasons []string
	errs    []error
}

func (s *skips) observer() cron.Observer {
	return cron.Observer{RunSkipped: func(_ cron.Tick, reason string, err error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.reasons = append(s.reasons, reason)
		s.errs = append(s.errs, err)
	}}
}

func (s *skips) get() ([]string, []error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.reasons...), append([]error(nil), s.errs...)
}

func TestLeaseOnRedis(t *testing.T) {
	srv := redistest.Start(t)
	raw := srv.Client(t)
	db := lock.NewDB(srv.Client(t))
	ctx := t.Context()

	ran := make(chan cron.Tick, 10)
	job := &leasedJob{
		testJob: testJob{name: "report", every: interval.AtLeast(time.Hour), process: func(_ context.Context, t cron.Tick) error {
			ran <- t
			return nil
		}},
		lease: cron.LeaseConfig{DB: db},
	}
	rt, err := cron.Start([]cron.Job{job})
	if err != nil {
		t.Fatal(err)
	}
	<-ran
	rt.Shutdown(ctx)
	key := "@@wakuwaku-entity:Lock:cron:report"
	if pttl := raw.PTTL(ctx, key).Val(); pttl <= 54*time.Minute || pttl > 55*time.Minute {
		t.Errorf("PTTL(%s) = %v, want 55m (11/12 of the hour)", key, pttl)
	}

	// A second replica finds the lease held and skips, observed.
	var sk skips
	rt, err = cron.Start([]cron.Job{job}, cron.WithObserver(sk.observer()))
	if err != nil {
		t.Fatal(err)
	}
	rt.Shutdown(ctx)
	if reasons, _ := sk.get(); len(reasons) != 1 || reasons[0] != cron.ReasonLeaseHeld {
		t.Errorf("skips = %q, want one %q", reasons, cron.ReasonLeaseHeld)
	}
	if len(ran) != 0 {
		t.Errorf("the job ran while another replica held the lease")
	}

	// A Cron job's lease key names the slot of its run; the startup run
	// counts as the latest slot before it.
	cronJob := &leasedJob{
		testJob: testJob{name: "nightly", every: interval.MustCron("0 3 * * *"), process: func(_ context.Context, t cron.Tick) error {
			ran <- t
			return nil
		}},
		lease: cron.LeaseConfig{DB: db},
	}
	rt, err = cron.Start([]cron.Job{cronJob})
	if err != nil {
		t.Fatal(err)
	}
	tick := <-ran
	rt.Shutdown(ctx)
	slot := time.Date(tick.Scheduled.Year(), tick.Scheduled.Month(), tick.Scheduled.Day(), 3, 0, 0, 0, tick.Scheduled.Location())
	if slot.After(tick.Scheduled) {
		slot = slot.AddDate(0, 0, -1)
	}
	// Its record names the slot, and no key names it: the record is the
	// lease of every slot.
	record := "@@wakuwaku-cron:{@@wakuwaku-entity:Lock:cron:nightly}"
	if got, want := raw.HGet(ctx, record, "slot").Val(), slot.UTC().Format(time.RFC3339)+"|"; !strings.HasPrefix(got, want) {
		t.Errorf("HGET %s slot = %q, want it to begin %q", record, got, want)
	}
	if pttl := raw.PTTL(ctx, record).Val(); pttl <= 0 {
		t.Errorf("PTTL(%s) = %v, want a TTL: every key of a record expires", record, pttl)
	}
	if keys := raw.Keys(ctx, "@@wakuwaku-entity:Lock:cron:nightly*").Val(); len(keys) != 0 {
		t.Errorf("a Cron job's run left lease keys %q, want none", keys)
	}
	if got := tick.Slot.Start; !got.Equal(slot) {
		t.Errorf("tick.Slot.Start = %v, want %v", got, slot)
	}
}

// TestLeaseRedisDown checks that a lease that can't be taken skips the run,
// failing closed, and that the job keeps its schedule.
func TestLeaseRedisDown(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: 200 * time.Millisecond, DialerRetries: 1})
	t.Cleanup(func() { c.Close() })
	var sk skips
	ran := 0
	job := &leasedJob{
		testJob: testJob{name: "r", every: interval.AtLeast(100 * time.Millisecond), process: func(context.Context, cron.Tick) error {
			ran++
			return nil
		}},
		lease: cron.LeaseConfig{DB: lock.NewDB(c)},
	}
	rt, err := cron.Start([]cron.Job{job}, cron.WithObserver(sk.observer()))
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(350 * time.Millisecond)
	rt.Shutdown(t.Context())
	reasons, errs := sk.get()
	if len(reasons) < 2 {
		t.Fatalf("%d skipped ticks, want the job to keep its schedule while Redis is down", len(reasons))
	}
	for i, r := range reasons {
		if r != cron.ReasonAdmissionFailed || errs[i] == nil {
			t.Errorf("skip %d = %q, %v, want %q with the error", i, r, errs[i], cron.ReasonAdmissionFailed)
		}
	}
	if ran != 0 {
		t.Errorf("the job ran %d times without its lease", ran)
	}
}

// TestLeaseOffsetClocks runs a per-second Cron job in two runtimes whose
// clocks are 950 ms apart, as replicas on machines with offset clocks are:
// the late one's tick for a slot comes after a lease of 11/12 of a second
// would have run out. No slot may run twice.
func TestLeaseOffsetClocks(t *testing.T) {
	srv := redistest.Start(t)
	var mu sync.Mutex
	seen := map[time.Time]string{}
	dup := 0
	start := func(name string, offset time.Duration) *cron.Runtime {
		job := &leasedJob{
			testJob: testJob{name: "per-second", every: interval.MustCron("* * * * * *"), process: func(_ context.Context, tick cron.Tick) error {
				mu.Lock()
				defer mu.Unlock()
				slot := tick.Scheduled.Truncate(time.Second)
				if prev, ok := seen[slot]; ok {
					dup++
					t.Errorf("slot %v ran in %s and in %s", slot.Format(time.TimeOnly), prev, name)
				}
				seen[slot] = name
				return nil
			}},
			lease: cron.LeaseConfig{DB: lock.NewDB(srv.Client(t))},
		}
		rt, err := cron.Start([]cron.Job{job}, cron.WithClock(func() time.Time { return time.Now().Add(offset) }))
		if err != nil {
			t.Fatal(err)
		}
		return rt
	}
	early := start("early", 0)
	late := start("late", -950*time.Millisecond)
	time.Sleep(3500 * time.Millisecond)
	early.Shutdown(t.Context())
	late.Shutdown(t.Context())
	mu.Lock()
	defer mu.Unlock()
	if len(seen) < 3 {
		t.Errorf("%d slots ran, want several", len(seen))
	}
	if dup != 0 {
		t.Errorf("%d slots ran twice", dup)
	}
}

// unnamedLeased is a leased job without a Name method: it is known by its
// Go type, which is no name for a lease that replicas share.
type unnamedLeased struct {
	lease cron.LeaseConfig
	ran   chan cron.Tick
}

func (j *unnamedLeased) Interval() interval.Interval { return interval.AtLeast(time.Hour) }
func (j *unnamedLeased) Lease() cron.LeaseConfig     { return j.lease }
func (j *unnamedLeased) Process(_ context.Context, t cron.Tick) error {
	j.ran <- t
	return nil
}

// TestLeaseNeedsName checks that a leased job names its lease itself, by a
// Name method or LeaseConfig.Name, rather than by its Go type, which a
// rename or a move to another package would change, splitting the lease
// between replicas of two versions.
func TestLeaseNeedsName(t *testing.T) {
	srv := redistest.Start(t)
	raw := srv.Client(t)
	db := lock.NewDB(srv.Client(t))

	job := &unnamedLeased{lease: cron.LeaseConfig{DB: db}, ran: make(chan cron.Tick, 1)}
	rt, err := cron.Start([]cron.Job{job})
	if err == nil {
		rt.Shutdown(t.Context())
		t.Fatalf("Start(leased job without a name) = nil error, want %v", cron.ErrInvalidJob)
	}
	const fix = "leased job cron_test.unnamedLeased has no name: add a Name() string method or set LeaseConfig.Name"
	if !errors.Is(err, cron.ErrInvalidJob) || !strings.Contains(err.Error(), fix) {
		t.Errorf("Start(leased job without a name) = %v, want %v saying %q", err, cron.ErrInvalidJob, fix)
	}

	// LeaseConfig.Name names the lease; the key is the one a Name method
	// of that name gives.
	job.lease.Name = "cleanup"
	rt, err = cron.Start([]cron.Job{job})
	if err != nil {
		t.Fatalf("Start(leased job with LeaseConfig.Name) = %v", err)
	}
	<-job.ran
	rt.Shutdown(t.Context())
	key := "@@wakuwaku-entity:Lock:cron:cleanup"
	if n := raw.Exists(t.Context(), key).Val(); n != 1 {
		t.Errorf("EXISTS %s = %d after the run, want 1", key, n)
	}
}

func TestLeaseRefused(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	t.Cleanup(func() { c.Close() })
	db := lock.NewDB(c)
	job := func(every interval.Interval, l cron.LeaseConfig) cron.Job {
		return &leasedJob{testJob: testJob{name: "j", every: every}, lease: l}
	}
	tests := []struct {
		name    string
		job     cron.Job
		mention string // what the error must name, if anything
	}{
		{"no DB", job(interval.AtLeast(time.Hour), cron.LeaseConfig{}), ""},
		{"DB of a nil client", job(interval.AtLeast(time.Hour), cron.LeaseConfig{DB: lock.NewDB((*redis.Client)(nil))}), "nil *redis.Client"},
		{"DB without the cron namespace", job(interval.AtLeast(time.Hour), cron.LeaseConfig{DB: db.Only(lock.New[string]("other", time.Second))}), ""},
		{"TTL as long as the interval", job(interval.AtLeast(time.Hour), cron.LeaseConfig{DB: db, TTL: time.Hour}), ""},
		{"negative TTL", job(interval.AfterFinish(time.Hour), cron.LeaseConfig{DB: db, TTL: -time.Second}), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rt, err := cron.Start([]cron.Job{tt.job})
			if err == nil {
				rt.Shutdown(t.Context())
			}
			if !errors.Is(err, cron.ErrInvalidJob) {
				t.Errorf("Start = %v, want ErrInvalidJob", err)
			}
			if err != nil && !strings.Contains(err.Error(), tt.mention) {
				t.Errorf("Start = %q, want it to name %s", err, tt.mention)
			}
		})
	}
}

// TestLeaseRedisOutageLoggedOnce stops Redis across several ticks of a
// leased job: the outage is logged once when it begins and once when it
// ends, with the number of ticks it skipped, rather than once per tick.
func TestLeaseRedisOutageLoggedOnce(t *testing.T) {
	srv := redistest.Start(t)
	opts := srv.Options()
	opts.MaxRetries, opts.DialerRetries, opts.DialTimeout = -1, 1, 200*time.Millisecond
	c := redis.NewClient(opts)
	t.Cleanup(func() { c.Close() })
	ran := make(chan cron.Tick, 100)
	job := &leasedJob{
		testJob: testJob{name: "r", every: interval.AtLeast(50 * time.Millisecond), process: func(_ context.Context, tick cron.Tick) error {
			ran <- tick
			return nil
		}},
		lease: cron.LeaseConfig{DB: lock.NewDB(c)},
	}
	var sk skips
	var logs records
	rt, err := cron.Start([]cron.Job{job}, cron.WithObserver(sk.observer()), cron.WithLogger(slog.New(&logs)))
	if err != nil {
		t.Fatal(err)
	}
	<-ran
	srv.Kill(t)
	for len(ran) > 0 { // a run that started before the kill
		<-ran
	}
	time.Sleep(300 * time.Millisecond) // about six ticks
	srv.Restart(t)
	select {
	case <-ran:
	case <-time.After(5 * time.Second):
		t.Fatal("the job did not run again within 5s of Redis's restart")
	}
	rt.Shutdown(t.Context())

	reasons, _ := sk.get()
	failed := 0
	for _, r := range reasons {
		if r == cron.ReasonAdmissionFailed {
			failed++
		}
	}
	if failed < 3 {
		t.Fatalf("%d ticks skipped with %q while Redis was down, want several", failed, cron.ReasonAdmissionFailed)
	}
	var loud []string
	for _, r := range logs.all() {
		// A busy machine can delay the start's clock check by more than
		// this interval's margin (4 ms); that warning is not the outage's.
		if r.Level < slog.LevelWarn || r.Message == "cron runtime's clock disagrees with Redis's" {
			continue
		}
		// A run in progress as Redis went loses its run lease (a busy
		// machine can make it so): that failure is the run's, not the
		// outage's beginning.
		if err, _ := attr(r, "error").Any().(error); r.Message == "cron job failed" && errors.Is(err, lock.ErrLeaseLost) {
			continue
		}
		loud = append(loud, r.Message)
	}
	// The outage begins with the first skipped tick, or with the run in
	// progress when Redis went, whose end could not be recorded.
	began := map[string]bool{
		"cron job's admission failed; its runs are skipped until it succeeds":     true,
		"cron job's run could not be recorded; trying again while its slot lasts": true,
	}
	recordFailed := 0
	if len(loud) == 1 && loud[0] == "cron job's run could not be recorded; trying again while its slot lasts" {
		recordFailed = 1
	}
	if len(loud) != 1 || !began[loud[0]] {
		t.Errorf("%d records at Warn or above for an outage of %d ticks: %q, want the outage's beginning once", len(loud), failed, loud)
	}
	ended := logs.find("cron job's admission succeeded again")
	if len(ended) != 1 {
		t.Fatalf("the outage's end logged %d times, want once", len(ended))
	}
	if e := ended[0]; e.Level != slog.LevelInfo || attr(e, "skipped").Uint64() != uint64(failed+recordFailed) || attr(e, "job").String() != "r" {
		t.Errorf("the outage's end logged at %v with skipped=%v job=%v, want Info, skipped=%d, job=r", e.Level, attr(e, "skipped"), attr(e, "job"), failed+recordFailed)
	}
}

// TestLeaseLogged runs two replicas of a leased duration job and a leased
// Cron job: the replica that takes the leases logs each run's start and end
// at Info with the lease's key; the other logs its skips at Debug only.
func TestLeaseLogged(t *testing.T) {
	srv := redistest.Start(t)
	replica := func(name string) *records {
		db := lock.NewDB(srv.Client(t))
		report := &leasedJob{testJob: testJob{name: "report", every: interval.AtLeast(time.Hour)}, lease: cron.LeaseConfig{DB: db}}
		nightly := &leasedJob{testJob: testJob{name: "nightly", every: interval.MustCron("0 3 * * *")}, lease: cron.LeaseConfig{DB: db}}
		var logs records
		rt, err := cron.Start([]cron.Job{report, nightly}, cron.WithLogger(slog.New(&logs)), cron.WithReplica(name))
		if err != nil {
			t.Fatal(err)
		}
		if err := rt.Shutdown(t.Context()); err != nil { // after the startup runs
			t.Fatal(err)
		}
		return &logs
	}
	ran, skipped := replica("a"), replica("b")

	for _, msg := range []string{"cron job started", "cron job finished"} {
		got := ran.find(msg)
		if len(got) != 2 {
			t.Fatalf("replica a: %d records %q, want 2", len(got), msg)
		}
		for _, r := range got {
			// A duration policy's slot is the seed's lease; a Cron job's,
			// a field of the record.
			lease, record := "@@wakuwaku-entity:Lock:cron:report", "@@wakuwaku-cron:{@@wakuwaku-entity:Lock:cron:report}"
			if attr(r, "job").String() == "nightly" {
				lease, record = "<nil>", "@@wakuwaku-cron:{@@wakuwaku-entity:Lock:cron:nightly}"
			}
			if r.Level != slog.LevelInfo || attr(r, "lease").String() != lease || attr(r, "record").String() != record || attr(r, "replica").String() != "a" {
				t.Errorf("replica a: %q at %v with lease=%v record=%v replica=%v, want Info, lease=%s, record=%s, replica=a",
					msg, r.Level, attr(r, "lease"), attr(r, "record"), attr(r, "replica"), lease, record)
			}
		}
	}
	for _, r := range skipped.all() {
		switch r.Message {
		case "cron runtime started", "cron runtime shutting down", "cron runtime stopped":
		case "cron job skipped a run":
			if r.Level != slog.LevelDebug || attr(r, "reason").String() != cron.ReasonLeaseHeld || attr(r, "replica").String() != "b" {
				t.Errorf("replica b: skip at %v with reason=%v replica=%v, want Debug, %q, b", r.Level, attr(r, "reason"), attr(r, "replica"), cron.ReasonLeaseHeld)
			}
		default:
			t.Errorf("replica b, whose runs were all skipped, logged %v %q", r.Level, r.Message)
		}
	}
	if n := len(skipped.find("cron job skipped a run")); n != 2 {
		t.Errorf("replica b logged %d skips, want 2", n)
	}
}

// TestLeaseSpreadPastTTL gives a leased job a spread that is not shorter
// than its lease's TTL: a tick due that far into its slot would find the
// slot's claim window over, and every such tick was skipped, too late, so
// the job never ran. Start, Add and Replace refuse it, as they refuse any
// lease that can't work; a spread shorter than the TTL is taken.
func TestLeaseSpreadPastTTL(t *testing.T) {
	srv := redistest.Start(t)
	db := lock.NewDB(srv.Client(t))
	every := interval.MustCron("* * * * * *").WithoutStartupRun()
	job := func(name string, spread, ttl time.Duration) *leasedJob {
		return &leasedJob{
			testJob: testJob{name: name, every: every.WithSpread(spread)},
			lease:   cron.LeaseConfig{DB: db, TTL: ttl},
		}
	}
	for _, tc := range []struct {
		name        string
		spread, ttl time.Duration
		ok          bool
	}{
		{"spread past the TTL", time.Second, 100 * time.Millisecond, false},
		{"spread as long as the TTL", 500 * time.Millisecond, 500 * time.Millisecond, false},
		{"spread shorter than the TTL", 500 * time.Millisecond, 600 * time.Millisecond, true},
		{"spread and the default TTL", time.Second, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			check := func(what string, err error) {
				t.Helper()
				if tc.ok && err != nil {
					t.Errorf("%s = %v, want nil", what, err)
				} else if !tc.ok && !errors.Is(err, cron.ErrInvalidJob) {
					t.Errorf("%s = %v, want %v", what, err, cron.ErrInvalidJob)
				}
			}
			var sk skips
			rt, err := cron.Start([]cron.Job{job("started", tc.spread, tc.ttl)}, cron.WithObserver(sk.observer()))
			check("Start", err)
			if err == nil {
				if !tc.ok {
					// What became of its ticks.
					time.Sleep(1500 * time.Millisecond)
					reasons, _ := sk.get()
					t.Logf("the job started; its ticks in 1.5 s were skipped: %q", reasons)
				}
				rt.Shutdown(t.Context())
			}
			rt = start(t, []cron.Job{job("replaced", 0, tc.ttl)})
			check("Add", rt.Add(job("added", tc.spread, tc.ttl)))
			check("Replace", rt.Replace(job("replaced", tc.spread, tc.ttl)))
		})
	}
}

// infoUp is a handler of records that takes Info and above, as a
// service's logger ordinarily does.
type infoUp struct{ *records }

func (infoUp) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelInfo }
func (h infoUp) WithAttrs([]slog.Attr) slog.Handler         { return h }
func (h infoUp) WithGroup(string) slog.Handler              { return h }

// TestLeaseLogKeysAtDebug: at Info, a leased run's records name it as every
// replica does, by job, slot and attempt, in one short line; the record's
// and the lease's keys come at Debug only.
func TestLeaseLogKeysAtDebug(t *testing.T) {
	db := lock.NewDB(redistest.Start(t).Client(t))
	report := &leasedJob{testJob: testJob{name: "report", every: interval.AtLeast(time.Hour)}, lease: cron.LeaseConfig{DB: db}}
	var logs records
	rt, err := cron.Start([]cron.Job{report}, cron.WithLogger(slog.New(infoUp{&logs})), cron.WithReplica("a"))
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Shutdown(t.Context()); err != nil { // after the startup run
		t.Fatal(err)
	}
	for _, msg := range []string{"cron job started", "cron job finished"} {
		got := logs.find(msg)
		if len(got) != 1 {
			t.Fatalf("%d records %q, want 1", len(got), msg)
		}
		r := got[0]
		if attr(r, "attempt").String() != "1" || attr(r, "slot").String() == "<nil>" || attr(r, "tick").String() != "1" {
			t.Errorf("%q with attempt=%v slot=%v tick=%v, want attempt=1, the slot and tick=1", msg, attr(r, "attempt"), attr(r, "slot"), attr(r, "tick"))
		}
		for _, key := range []string{"record", "lease"} {
			if v := attr(r, key); v.Kind() != slog.KindAny || v.Any() != nil {
				t.Errorf("%q at Info has %s=%v, want the keys at Debug only", msg, key, v)
			}
		}
	}
}
