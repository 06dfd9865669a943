package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wakuwaku-go/wakuwaku/cron"
	"github.com/wakuwaku-go/wakuwaku/internal/redistest"
	"github.com/wakuwaku-go/wakuwaku/interval"
	"github.com/wakuwaku-go/wakuwaku/lock"
)

// The ACL rules are those of docs/operating.md, read from it: the page is
// the one place that lists them, and these tests run the library, the
// runtime, Admin and the tool as users with them.
const (
	operatingDoc = "../../docs/operating.md"
	aclSection   = "## Redis ACL and TLS"
	aclPassword  = "correct horse battery staple"
)

// aclRules returns the rules of the page's ACL SETUSER lines by user, with
// the test's password for SECRET: each user's first line is its rule, the
// second what a Redis Cluster adds to it, and the third what every server
// but Redis 7.0 adds (CLIENT SETINFO).
func aclRules(t *testing.T) map[string][][]string {
	t.Helper()
	b, err := os.ReadFile(operatingDoc)
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n"+aclSection+"\n")
	if !ok {
		t.Fatalf("%s has no section %q", operatingDoc, aclSection)
	}
	if i := strings.Index(section, "\n## "); i >= 0 {
		section = section[:i]
	}
	rules := map[string][][]string{}
	for line := range strings.Lines(section) {
		f := strings.Fields(line)
		if len(f) < 4 || f[0] != "ACL" || f[1] != "SETUSER" {
			continue
		}
		rule := slices.Clone(f[3:])
		for i, w := range rule {
			if w == ">SECRET" {
				rule[i] = ">" + aclPassword
			}
		}
		rules[f[2]] = append(rules[f[2]], rule)
	}
	for _, user := range []string{"wakuwaku-service", "wakuwaku-cli-read", "wakuwaku-cli"} {
		if len(rules[user]) != 3 {
			t.Fatalf("%s, %s: %d ACL SETUSER lines for %s, want its rule, what a Redis Cluster adds and what CLIENT SETINFO needs", operatingDoc, aclSection, len(rules[user]), user)
		}
	}
	return rules
}

// serverRules returns the page's rules of each user as it tells an
// operator to write them for the server admin talks to: its rule and, on a
// Cluster, what a Cluster adds, each with what every server but Redis 7.0
// adds (CLIENT SETINFO), and on Redis 6.2 without +pexpiretime, with ~
// for %R~ and with +client|maint_notifications.
func serverRules(t *testing.T, admin redis.UniversalClient, cluster bool) map[string][][]string {
	t.Helper()
	major, minor := serverVersion(t, admin)
	rules := map[string][][]string{}
	for user, lines := range aclRules(t) {
		kept := lines[:1]
		if cluster {
			kept = lines[:2]
		}
		for _, rule := range kept {
			var words []string
			for _, w := range rule {
				if major < 7 {
					if w == "+pexpiretime" {
						continue
					}
					w = strings.Replace(w, "%R~", "~", 1)
				}
				words = append(words, w)
			}
			if major != 7 || minor >= 2 {
				words = append(words, lines[2]...)
			}
			if major < 7 {
				words = append(words, "+client|maint_notifications")
			}
			rules[user] = append(rules[user], words)
		}
	}
	return rules
}

// serverVersion returns the major and minor of the redis_version that
// the server admin talks to gives in INFO (Valkey 8 gives 7.2.4 there).
func serverVersion(t *testing.T, admin redis.UniversalClient) (major, minor int) {
	t.Helper()
	info, err := admin.Info(t.Context(), "server").Result()
	if err != nil {
		t.Fatalf("INFO server: %v", err)
	}
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok {
			if _, err := fmt.Sscanf(v, "%d.%d", &major, &minor); err != nil {
				t.Fatalf("INFO server: redis_version %q: %v", v, err)
			}
			return major, minor
		}
	}
	t.Fatalf("INFO server gives no redis_version:\n%s", info)
	return 0, 0
}

// ruleCommands returns the commands rules grant one by one (+get).
func ruleCommands(rules ...[]string) []string {
	var cmds []string
	for _, w := range slices.Concat(rules...) {
		if c, ok := strings.CutPrefix(w, "+"); ok && !strings.HasPrefix(c, "@") {
			cmds = append(cmds, strings.ToLower(c))
		}
	}
	return cmds
}

// scriptCommands returns the commands that the Lua scripts of the given
// directories' Go files may call, on whatever path: a user who runs the
// scripts needs each, though a test runs only some paths.
func scriptCommands(t *testing.T, dirs ...string) map[string]bool {
	t.Helper()
	call := regexp.MustCompile(`redis\.p?call\(\s*'([A-Za-z|]+)'`)
	cmds := map[string]bool{}
	for _, dir := range dirs {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil || len(files) == 0 {
			t.Fatalf("no Go files in %s: %v", dir, err)
		}
		for _, name := range files {
			if strings.HasSuffix(name, "_test.go") {
				continue
			}
			b, err := os.ReadFile(name)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range call.FindAllStringSubmatch(string(b), -1) {
				cmds[strings.ToLower(m[1])] = true
			}
		}
	}
	return cmds
}

// userOptions returns options of a client of srv that logs in as user.
func userOptions(srv *redistest.Server, user string) *redis.Options {
	opts := srv.Options()
	opts.Username, opts.Password = user, aclPassword
	return opts
}

// userClient returns a client of srv that logs in as user, closed at
// cleanup.
func userClient(t *testing.T, srv *redistest.Server, user string) *redis.Client {
	t.Helper()
	c := redis.NewClient(userOptions(srv, user))
	t.Cleanup(func() { c.Close() })
	return c
}

// userURL is the tool's -redis URL for user.
func userURL(srv *redistest.Server, user string) string {
	return "redis://" + user + ":" + strings.ReplaceAll(aclPassword, " ", "%20") + "@" + srv.Addr()
}

// resetStats zeroes the server's command statistics, as the default user.
func resetStats(t *testing.T, admin *redis.Client) {
	t.Helper()
	if err := admin.ConfigResetStat(t.Context()).Err(); err != nil {
		t.Fatal(err)
	}
}

// serverStats returns what the servers ran since resetStats, summed.
func serverStats(t *testing.T, admins ...*redis.Client) map[string]redistest.CommandStat {
	t.Helper()
	sum := map[string]redistest.CommandStat{}
	for _, a := range admins {
		stats, err := redistest.CommandStats(t.Context(), a)
		if err != nil {
			t.Fatal(err)
		}
		for cmd, s := range stats {
			p := sum[cmd]
			p.Calls += s.Calls
			p.Rejected += s.Rejected
			sum[cmd] = p
		}
	}
	return sum
}

// checkStats checks what the servers ran since resetStats for a user with
// rules: no command refused (a command the rules lack), and every command
// they grant was sent, or may be sent where the test does not go (unsent:
// a script's other paths, a cluster's redirections).
func checkStats(t *testing.T, stats map[string]redistest.CommandStat, user string, rules [][]string, unsent map[string]bool) {
	t.Helper()
	for cmd, s := range stats {
		if s.Rejected > 0 {
			t.Errorf("%s: the server refused %s %d times: the rule of %s in %s lacks it", user, cmd, s.Rejected, user, operatingDoc)
		}
	}
	for _, cmd := range ruleCommands(rules...) {
		calls := stats[cmd].Calls
		if parent, _, sub := strings.Cut(cmd, "|"); sub && calls == 0 {
			calls = stats[parent].Calls // Redis 6.2 counts a subcommand under its command
		}
		if calls == 0 && !unsent[cmd] {
			t.Errorf("%s: the rule grants %s, which nothing sent: take it out of %s, or exercise it here", user, cmd, operatingDoc)
		}
	}
}

// records is an slog handler that keeps what it is given.
type records struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (r *records) Enabled(context.Context, slog.Level) bool { return true }
func (r *records) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.recs = append(r.recs, rec.Clone())
	return nil
}
func (r *records) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *records) WithGroup(string) slog.Handler      { return r }

// find returns the records at level or above whose message or attributes
// contain all of words, as text.
func (r *records) find(level slog.Level, words ...string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var found []string
	for _, rec := range r.recs {
		if rec.Level < level {
			continue
		}
		text := rec.Message
		rec.Attrs(func(a slog.Attr) bool {
			text += " " + a.String()
			return true
		})
		if !slices.ContainsFunc(words, func(w string) bool { return !strings.Contains(text, w) }) {
			found = append(found, text)
		}
	}
	return found
}

// runs is what the test's leased jobs did.
type runs struct {
	ch    chan cron.Tick
	flaky atomic.Int32 // flaky's runs
}

// jobs returns the test's two leased jobs over db: report, which succeeds,
// and flaky, whose first run fails and whose slot has two attempts.
func (r *runs) jobs(db lock.DB) []cron.Job {
	return []cron.Job{
		cron.Func("report", interval.AtLeast(time.Hour), func(_ context.Context, t cron.Tick) error {
			r.ch <- t
			return nil
		}, cron.WithLease(cron.LeaseConfig{DB: db})),
		cron.Func("flaky", interval.AtLeast(time.Hour), func(_ context.Context, t cron.Tick) error {
			r.ch <- t
			if r.flaky.Add(1) == 1 {
				return errors.New("first run fails")
			}
			return nil
		}, cron.WithLease(cron.LeaseConfig{DB: db, Attempts: 2, Backoff: 10 * time.Millisecond})),
	}
}

// wait waits for a run of job that satisfies ok.
func (r *runs) wait(t *testing.T, job, what string, ok func(cron.Tick) bool) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case tick := <-r.ch:
			if tick.Job == job && ok(tick) {
				return
			}
		case <-timeout:
			t.Fatalf("no %s of %s within 10s", what, job)
		}
	}
}

// startRuntime starts a runtime of jobs as replica, logging to log, shut
// down at cleanup.
func startRuntime(t *testing.T, jobs []cron.Job, replica string, log *records, o cron.Observer) *cron.Runtime {
	t.Helper()
	rt, err := cron.Start(jobs, cron.WithReplica(replica), cron.WithLogger(slog.New(log)), cron.WithObserver(o))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Shutdown(context.Background()) })
	return rt
}

// TestACLService runs the library as the service's user of the page's
// rule, on a real redis-server: every kind of lock operation, two
// replicas of leased jobs (a retry, a run-now request heard over Pub/Sub,
// a lease held), and Admin. Nothing is refused, and the rule grants
// nothing that nothing sends.
func TestACLService(t *testing.T) {
	srv := redistest.Start(t)
	admin := srv.Client(t)
	rule := serverRules(t, admin, false)["wakuwaku-service"][0]
	srv.SetUser(t, "wakuwaku-service", rule...)
	scripted := scriptCommands(t, "../../lock", "../../cron")
	granted := ruleCommands(aclRules(t)["wakuwaku-service"][0])
	for cmd := range scripted {
		if !slices.Contains(granted, cmd) {
			t.Errorf("a script of the library calls %s, which the rule of wakuwaku-service in %s lacks", cmd, operatingDoc)
		}
	}
	resetStats(t, admin)
	ctx := t.Context()
	c := userClient(t, srv, "wakuwaku-service")
	db := lock.NewDB(c)
	if err := db.Ping(ctx); err != nil {
		t.Fatalf("Ping = %v", err)
	}

	// Locks, each operation once, one of them after the server lost its
	// scripts.
	invoices := lock.New[int]("invoice", time.Minute)
	tok, err := invoices.TryLock(ctx, db, 1)
	if err != nil || tok == nil {
		t.Fatalf("TryLock = %v, %v", tok, err)
	}
	if busy, err := invoices.TryLock(ctx, db, 1); busy != nil || err != nil {
		t.Errorf("TryLock of a held lock = %v, %v; want busy", busy, err)
	}
	if left, held, err := invoices.Held(ctx, db.ReadOnly(), 1); !held || left <= 0 || err != nil {
		t.Errorf("Held = %v, %v, %v", left, held, err)
	}
	if ok, err := tok.Extend(ctx); !ok || err != nil {
		t.Errorf("Extend = %v, %v", ok, err)
	}
	if err := admin.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if ok, err := tok.Release(ctx); !ok || err != nil {
		t.Errorf("Release after SCRIPT FLUSH = %v, %v", ok, err)
	}
	fenced, n, err := invoices.Fenced().TryLock(ctx, db, 2)
	if err != nil || fenced == nil || n == 0 {
		t.Errorf("FencedLock.TryLock = %v, %d, %v", fenced, n, err)
	}
	many, err := invoices.TryLockMany(ctx, db, []int{3, 4})
	if err != nil || len(many) != 2 || many[0] == nil || many[1] == nil {
		t.Fatalf("TryLockMany = %v, %v", many, err)
	}
	if ok, err := lock.ExtendMany(ctx, many); err != nil || !ok[0] || !ok[1] {
		t.Errorf("ExtendMany = %v, %v", ok, err)
	}
	if ok, err := lock.ReleaseMany(ctx, many); err != nil || !ok[0] || !ok[1] {
		t.Errorf("ReleaseMany = %v, %v", ok, err)
	}
	catalog := lock.NewRW[string]("catalog", time.Minute)
	rd, err := catalog.TryRead(ctx, db, "books")
	if err != nil || rd == nil {
		t.Fatalf("TryRead = %v, %v", rd, err)
	}
	if ok, err := rd.Extend(ctx); !ok || err != nil {
		t.Errorf("ReadToken.Extend = %v, %v", ok, err)
	}
	if w, err := catalog.TryWrite(ctx, db, "books"); w != nil || err != nil {
		t.Errorf("TryWrite while read = %v, %v; want busy", w, err)
	}
	if st, err := catalog.Inspect(ctx, db.ReadOnly(), "books"); err != nil || st.Readers != 1 {
		t.Errorf("Inspect = %+v, %v", st, err)
	}
	if ok, err := rd.Release(ctx); !ok || err != nil {
		t.Errorf("ReadToken.Release = %v, %v", ok, err)
	}
	w, err := catalog.TryWrite(ctx, db, "books")
	if err != nil || w == nil {
		t.Fatalf("TryWrite = %v, %v", w, err)
	}
	if ok, err := w.Release(ctx); !ok || err != nil {
		t.Errorf("writer's Release = %v, %v", ok, err)
	}
	// WithReplicas sends WAIT; this server has no replica to wait for.
	waiting := lock.NewDB(c, lock.WithReplicas(1, time.Millisecond))
	if tok, err := invoices.TryLock(ctx, waiting, 5); tok != nil || err == nil || strings.Contains(err.Error(), "NOPERM") {
		t.Errorf("TryLock waiting for a replica = %v, %v; want the wait's error, not a refusal", tok, err)
	}

	// Two replicas of the leased jobs, and Admin.
	var log records
	r := &runs{ch: make(chan cron.Tick, 100)}
	startRuntime(t, r.jobs(db), "replica-1", &log, cron.Observer{})
	r.wait(t, "report", "startup run", func(cron.Tick) bool { return true })
	r.wait(t, "flaky", "retry", func(t cron.Tick) bool { return t.Trigger == cron.TriggerRetry })
	// The retry has started; until its end is recorded, a second replica's
	// tick finds the run in progress rather than the lease held.
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, err := cron.NewAdmin(db).Status(ctx, "flaky")
		if err == nil && st.Running == nil && st.Last != nil && st.Last.Attempt == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("flaky's retry not recorded within 10s: %+v, %v", st, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	skipped := make(chan string, 10)
	startRuntime(t, r.jobs(lock.NewDB(userClient(t, srv, "wakuwaku-service"))), "replica-2", &log, cron.Observer{
		RunSkipped: func(t cron.Tick, reason string, _ error) { skipped <- t.Job + ": " + reason },
	})
	select {
	case s := <-skipped:
		if !strings.HasSuffix(s, cron.ReasonLeaseHeld) {
			t.Errorf("replica-2 skipped %s, want the lease held", s)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("replica-2 skipped nothing within 10s")
	}
	a := cron.NewAdmin(db)
	if jobs, err := a.Jobs(ctx); err != nil || len(jobs) != 2 {
		t.Errorf("Admin.Jobs = %v, %v; want two jobs", jobs, err)
	}
	for _, op := range []func(context.Context, string) error{a.Pause, a.Resume} {
		if err := op(ctx, "report"); err != nil {
			t.Errorf("Admin: %v", err)
		}
	}
	if st, err := a.Status(ctx, "report"); err != nil || st.Paused {
		t.Errorf("Admin.Status = %+v, %v; want report not paused", st, err)
	}
	if err := a.RunNow(ctx, "report"); err != nil {
		t.Fatalf("Admin.RunNow = %v", err)
	}
	r.wait(t, "report", "requested run", func(t cron.Tick) bool { return t.Trigger == cron.TriggerRequest })

	checkStats(t, serverStats(t, admin), "wakuwaku-service", [][]string{rule}, scripted)
	for _, rec := range log.find(slog.LevelWarn) {
		if !strings.HasPrefix(rec, "cron job failed job=flaky") {
			t.Errorf("a runtime logged as wakuwaku-service: %s", rec)
		}
	}
}

// TestACLWithoutTheRule runs the library, the runtime, Admin and the tool
// as users that lack the page's rule: each says so with the server's
// NOPERM, where a caller or an operator sees it, instead of skipping
// silently.
func TestACLWithoutTheRule(t *testing.T) {
	srv := redistest.Start(t)
	ctx := t.Context()
	// Every command, but on other keys and channels.
	srv.SetUser(t, "outsider", "on", ">"+aclPassword, "resetkeys", "resetchannels", "~app:*", "&app", "+@all")
	// The service's rule without the run-now channel.
	var deaf []string
	for _, w := range serverRules(t, srv.Client(t), false)["wakuwaku-service"][0] {
		if !strings.HasPrefix(w, "&") {
			deaf = append(deaf, w)
		}
	}
	srv.SetUser(t, "deaf", deaf...)
	outsider := lock.NewDB(userClient(t, srv, "outsider"))
	nopermErr := func(what string, err error) {
		t.Helper()
		if err == nil || !strings.Contains(err.Error(), "NOPERM") {
			t.Errorf("%s as outsider = %v, want a NOPERM error", what, err)
		}
	}

	t.Run("locks", func(t *testing.T) {
		tok, err := lock.New[int]("invoice", time.Minute).TryLock(ctx, outsider, 1)
		if tok != nil {
			t.Errorf("TryLock as outsider = a token")
		}
		nopermErr("TryLock", err)
		_, _, err = lock.New[int]("invoice", time.Minute).Held(ctx, outsider.ReadOnly(), 1)
		nopermErr("Held", err)
		rd, err := lock.NewRW[string]("catalog", time.Minute).TryRead(ctx, outsider, "books")
		if rd != nil {
			t.Errorf("TryRead as outsider = a token")
		}
		nopermErr("TryRead", err)
	})
	t.Run("leased job", func(t *testing.T) {
		var log records
		skips := make(chan error, 10)
		r := &runs{ch: make(chan cron.Tick, 10)}
		startRuntime(t, r.jobs(outsider)[:1], "replica-1", &log, cron.Observer{
			RunSkipped: func(_ cron.Tick, reason string, err error) {
				if reason == cron.ReasonAdmissionFailed {
					skips <- err
				}
			},
		})
		select {
		case err := <-skips:
			nopermErr("the leased job's claim", err)
		case <-time.After(10 * time.Second):
			t.Fatal("the startup run was not skipped with ReasonAdmissionFailed within 10s")
		}
		if recs := log.find(slog.LevelError, "admission failed", "NOPERM"); len(recs) == 0 {
			t.Errorf("no error record of the failed admission with NOPERM; records: %v", log.find(slog.LevelDebug))
		}
		// The replica registry's beat is refused too, with a warning.
		deadline := time.Now().Add(3 * time.Second)
		for len(log.find(slog.LevelWarn, "could not beat")) == 0 && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if recs := log.find(slog.LevelWarn, "could not beat in its replica registry", "NOPERM"); len(recs) != 1 {
			t.Errorf("%d warnings of the refused beat with NOPERM, want 1; records: %v", len(recs), log.find(slog.LevelDebug))
		}
	})
	t.Run("admin", func(t *testing.T) {
		_, err := cron.NewAdmin(outsider).Status(ctx, "report")
		if errors.Is(err, cron.ErrUnknownJob) {
			t.Errorf("Admin.Status as outsider = %v: a refusal taken for a job without a record", err)
		}
		nopermErr("Admin.Status", err)
		nopermErr("Admin.Pause", cron.NewAdmin(outsider).Pause(ctx, "report"))
	})
	t.Run("tool", func(t *testing.T) {
		// A record and a lock, which the outsider's SCAN lists and its
		// reads are refused.
		startReport(t, srv, 1)
		if tok, err := lock.New[int]("invoice", time.Minute).TryLock(ctx, lock.NewDB(srv.Client(t)), 1); tok == nil || err != nil {
			t.Fatal(tok, err)
		}
		for _, args := range [][]string{{"status"}, {"locks"}, {"pause", "report"}} {
			code, out, errs := wk(t, append([]string{"-redis", userURL(srv, "outsider")}, args...)...)
			if code != 1 || out != "" || !strings.Contains(errs, "NOPERM") || strings.Count(errs, "\n") != 1 {
				t.Errorf("wakuwaku %v as outsider = %d, %q, %q; want 1 and one line with NOPERM", args, code, out, errs)
			}
		}
	})
	t.Run("run-now channel", func(t *testing.T) {
		var log records
		r := &runs{ch: make(chan cron.Tick, 10)}
		startRuntime(t, r.jobs(lock.NewDB(userClient(t, srv, "deaf")))[:1], "replica-1", &log, cron.Observer{})
		r.wait(t, "report", "startup run", func(cron.Tick) bool { return true })
		deadline := time.Now().Add(10 * time.Second)
		for len(log.find(slog.LevelWarn, "run-now", "NOPERM")) == 0 {
			if time.Now().After(deadline) {
				t.Fatalf("no warning within 10s that run-now requests can't be heard; records: %v", log.find(slog.LevelDebug))
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
}

// TestACLTool runs the tool as the page's two users of it: the read-only
// one lists the jobs and the locks and is refused the rest, with NOPERM in
// one line; the other does everything. Nothing else is refused, and
// neither rule grants a command the tool does not send.
func TestACLTool(t *testing.T) {
	srv := redistest.Start(t)
	admin := srv.Client(t)
	rules := serverRules(t, admin, false)
	for _, user := range []string{"wakuwaku-cli-read", "wakuwaku-cli"} {
		srv.SetUser(t, user, rules[user][0]...)
	}
	ctx := t.Context()
	// A job's record, and locks of each kind, made as the default user; the
	// runtime is stopped, so that only the tool sends commands.
	ran := make(chan struct{}, 10)
	db := lock.NewDB(admin)
	rt, err := cron.Start([]cron.Job{&report{db: db, ran: ran}}, cron.WithReplica("replica-1"))
	if err != nil {
		t.Fatal(err)
	}
	<-ran
	a := cron.NewAdmin(db)
	deadline := time.Now().Add(10 * time.Second)
	for st, err := a.Status(ctx, "hourly-report"); err != nil || st.Last == nil; st, err = a.Status(ctx, "hourly-report") {
		if time.Now().After(deadline) {
			t.Fatalf("the run's end not recorded within 10s: %+v, %v", st, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := rt.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	invoices := lock.New[int]("invoice", time.Minute)
	catalog := lock.NewRW[string]("catalog", time.Minute)
	if tok, err := invoices.TryLock(ctx, db, 42); tok == nil || err != nil {
		t.Fatal(tok, err)
	}
	if tok, err := catalog.TryWrite(ctx, db, "maps"); tok == nil || err != nil {
		t.Fatal(tok, err)
	}
	if tok, err := catalog.TryRead(ctx, db, "books"); tok == nil || err != nil {
		t.Fatal(tok, err)
	}
	writer, _ := catalog.Keys("maps")
	_, readers := catalog.Keys("books")
	as := func(user string, args ...string) (int, string, string) {
		t.Helper()
		return wk(t, append([]string{"-redis", userURL(srv, user)}, args...)...)
	}

	resetStats(t, admin)
	for _, args := range [][]string{{"status"}, {"status", "-json", "hourly-report"}, {"locks"}, {"locks", "-namespace", "invoice"}} {
		if code, out, errs := as("wakuwaku-cli-read", args...); code != 0 || out == "" {
			t.Errorf("wakuwaku %v as wakuwaku-cli-read = %d, %q, %q; want 0", args, code, out, errs)
		}
	}
	checkStats(t, serverStats(t, admin), "wakuwaku-cli-read", rules["wakuwaku-cli-read"][:1], nil)
	for _, args := range [][]string{{"pause", "hourly-report"}, {"run", "hourly-report"}, {"release", "-force", invoices.Key(42)}} {
		if code, out, errs := as("wakuwaku-cli-read", args...); code != 1 || out != "" || !strings.Contains(errs, "NOPERM") || strings.Count(errs, "\n") != 1 {
			t.Errorf("wakuwaku %v as wakuwaku-cli-read = %d, %q, %q; want 1 and one line with NOPERM", args, code, out, errs)
		}
	}
	if n, err := admin.Exists(ctx, invoices.Key(42)).Result(); n != 1 || err != nil {
		t.Errorf("the lock refused to wakuwaku-cli-read is gone: %d, %v", n, err)
	}
	// A database other than 0 needs +select, which the page says to add.
	if code, _, errs := wk(t, "-redis", userURL(srv, "wakuwaku-cli-read")+"/2", "status"); code != 1 || !strings.Contains(errs, "NOPERM") || !strings.Contains(errs, "select") {
		t.Errorf("wakuwaku status on database 2 as wakuwaku-cli-read = %d, %q; want 1 and NOPERM for select", code, errs)
	}

	resetStats(t, admin)
	for i, step := range []struct {
		args []string
		code int
		want string // in stdout, or stderr if code is not 0
	}{
		{[]string{"status"}, 0, "hourly-report"},
		{[]string{"locks"}, 0, "invoice"},
		{[]string{"pause", "hourly-report"}, 0, "hourly-report: paused"},
		{[]string{"resume", "hourly-report"}, 0, "hourly-report: resumed"},
		{[]string{"run", "hourly-report"}, 0, "hourly-report: asked to run now"},
		{[]string{"release", invoices.Key(42)}, 0, "not released without -force"},
		{[]string{"release", "-force", invoices.Key(42)}, 0, "released the lock 42 in namespace invoice"},
		{[]string{"release", "-force", writer}, 0, "released the write lock of maps"},
		{[]string{"release", "-force", readers}, 0, "removed the reader of books"},
	} {
		if i == 3 { // the scripts lost: EVAL
			if err := admin.ScriptFlush(ctx).Err(); err != nil {
				t.Fatal(err)
			}
		}
		code, out, errs := as("wakuwaku-cli", step.args...)
		got := out
		if step.code != 0 {
			got = errs
		}
		if code != step.code || !strings.Contains(got, step.want) {
			t.Errorf("wakuwaku %v as wakuwaku-cli = %d, %q, %q; want %d and %q", step.args, code, out, errs, step.code, step.want)
		}
	}
	checkStats(t, serverStats(t, admin), "wakuwaku-cli", rules["wakuwaku-cli"][:1], nil)
}

// TestACLCluster runs the library and the tool on a three-master Redis
// Cluster as the page's users, with what the page adds to their rules on a
// Cluster: nothing is refused on any node.
func TestACLCluster(t *testing.T) {
	cl := redistest.StartCluster(t, 3)
	var admins []*redis.Client
	for _, n := range cl.Nodes() {
		admins = append(admins, n.Client(t))
	}
	rules := serverRules(t, admins[0], true)
	for user, lines := range rules {
		for _, rule := range lines {
			cl.SetUser(t, user, rule...)
		}
	}
	reset := func() {
		t.Helper()
		for _, a := range admins {
			resetStats(t, a)
		}
	}
	// Redirections to a slot on the move are not exercised here.
	unsent := map[string]bool{"asking": true}
	ctx := t.Context()
	addrs := cl.Addrs()
	urlOf := func(user string) string {
		return "redis://" + user + ":" + strings.ReplaceAll(aclPassword, " ", "%20") + "@" + addrs[0] + "?addr=" + strings.Join(addrs[1:], "&addr=")
	}

	reset()
	opts := cl.Options()
	opts.Username, opts.Password = "wakuwaku-service", aclPassword
	c := redis.NewClusterClient(opts)
	t.Cleanup(func() { c.Close() })
	db := lock.NewDB(c)
	invoices := lock.New[int]("invoice", time.Minute)
	for n := range 20 { // on every master
		tok, err := invoices.TryLock(ctx, db, n)
		if tok == nil || err != nil {
			t.Fatalf("TryLock(%d) on the cluster = %v, %v", n, tok, err)
		}
		if n%2 == 0 {
			if ok, err := tok.Release(ctx); !ok || err != nil {
				t.Errorf("Release(%d) = %v, %v", n, ok, err)
			}
		}
	}
	var log records
	r := &runs{ch: make(chan cron.Tick, 10)}
	rt := startRuntime(t, r.jobs(db)[:1], "replica-1", &log, cron.Observer{})
	r.wait(t, "report", "startup run", func(cron.Tick) bool { return true })
	a := cron.NewAdmin(db)
	if jobs, err := a.Jobs(ctx); err != nil || len(jobs) != 1 {
		t.Errorf("Admin.Jobs on the cluster = %v, %v", jobs, err)
	}
	if err := a.RunNow(ctx, "report"); err != nil {
		t.Fatal(err)
	}
	r.wait(t, "report", "requested run", func(t cron.Tick) bool { return t.Trigger == cron.TriggerRequest })
	if err := rt.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	checkStats(t, serverStats(t, admins...), "wakuwaku-service", rules["wakuwaku-service"][1:], unsent)
	if bad := log.find(slog.LevelWarn); len(bad) > 0 {
		t.Errorf("the runtime logged as wakuwaku-service on the cluster:\n%s", strings.Join(bad, "\n"))
	}

	reset()
	for _, args := range [][]string{{"status"}, {"locks", "-namespace", "invoice"}} {
		if code, out, errs := wk(t, append([]string{"-cluster", urlOf("wakuwaku-cli-read")}, args...)...); code != 0 || out == "" {
			t.Errorf("wakuwaku %v as wakuwaku-cli-read on the cluster = %d, %q, %q", args, code, out, errs)
		}
	}
	checkStats(t, serverStats(t, admins...), "wakuwaku-cli-read", rules["wakuwaku-cli-read"][1:], unsent)

	reset()
	for _, args := range [][]string{{"pause", "report"}, {"resume", "report"}, {"run", "report"}, {"release", "-force", invoices.Key(1)}} {
		if code, out, errs := wk(t, append([]string{"-cluster", urlOf("wakuwaku-cli")}, args...)...); code != 0 || out == "" {
			t.Errorf("wakuwaku %v as wakuwaku-cli on the cluster = %d, %q, %q", args, code, out, errs)
		}
	}
	checkStats(t, serverStats(t, admins...), "wakuwaku-cli", rules["wakuwaku-cli"][1:], unsent)
}
