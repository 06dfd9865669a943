package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/wakuwaku-go/wakuwaku/cron"
	"github.com/wakuwaku-go/wakuwaku/internal/redistest"
	"github.com/wakuwaku-go/wakuwaku/interval"
	"github.com/wakuwaku-go/wakuwaku/lock"
)

// report is a leased hourly job for the tool to find.
type report struct {
	db  lock.DB
	ran chan struct{}
}

func (r *report) Name() string                { return "hourly-report" }
func (r *report) Interval() interval.Interval { return interval.AtLeast(time.Hour) }
func (r *report) Lease() cron.LeaseConfig     { return cron.LeaseConfig{DB: r.db} }
func (r *report) Process(context.Context, cron.Tick) error {
	r.ran <- struct{}{}
	return nil
}

// wakuwaku runs the tool against srv and returns its status and output.
func wakuwaku(t *testing.T, srv *redistest.Server, args ...string) (int, string, string) {
	t.Helper()
	var out, errs strings.Builder
	code := run(t.Context(), append([]string{"-redis", "redis://" + srv.Addr()}, args...), &out, &errs)
	return code, out.String(), errs.String()
}

// startReport starts n replicas of the report job over srv and waits for
// its startup run.
func startReport(t *testing.T, srv *redistest.Server, n int) chan struct{} {
	t.Helper()
	ran := make(chan struct{}, 10)
	for i := range n {
		rt, err := cron.Start([]cron.Job{&report{db: lock.NewDB(srv.Client(t)), ran: ran}}, cron.WithReplica(fmt.Sprintf("replica-%d", i+1)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { rt.Shutdown(context.Background()) })
	}
	<-ran
	return ran
}

func TestStatusPauseResumeRun(t *testing.T) {
	srv := redistest.Start(t)
	ran := startReport(t, srv, 3)
	// The run's end is recorded right after Process returns.
	deadline := time.Now().Add(10 * time.Second)
	var out string
	for {
		var code int
		code, out, _ = wakuwaku(t, srv, "status")
		if code == 0 && strings.Contains(out, " ok ") || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	table, reps, _ := strings.Cut(strings.TrimSpace(out), "\n\n")
	lines := strings.Split(table, "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "JOB") || !strings.HasPrefix(lines[1], "hourly-report") ||
		!strings.Contains(lines[1], "replica-") || !strings.Contains(lines[1], " ok ") || !strings.Contains(lines[1], "(in ") {
		t.Errorf("status:\n%s\nwant a header and hourly-report's row: a replica, ok, next due in about an hour", out)
	}
	// Then the live replicas, from the registry: the three runtimes.
	if lines := strings.Split(reps, "\n"); len(lines) != 5 || lines[0] != "3 replicas live:" || !strings.HasPrefix(lines[1], "REPLICA") ||
		!strings.HasPrefix(lines[2], "replica-1 ") || !strings.HasPrefix(lines[4], "replica-3 ") {
		t.Errorf("status:\n%s\nwant the three replicas live after the jobs", out)
	}

	for _, step := range []struct {
		args []string
		want string
	}{
		{[]string{"resume", "hourly-report"}, "hourly-report: not paused, nothing to resume\n"},
		{[]string{"pause", "hourly-report"}, "hourly-report: paused\n"},
		{[]string{"pause", "hourly-report"}, "hourly-report: already paused, since "},
		{[]string{"resume", "hourly-report"}, "hourly-report: resumed\n"},
		{[]string{"run", "hourly-report"}, "hourly-report: asked to run now\n"},
	} {
		if code, out, errs := wakuwaku(t, srv, step.args...); code != 0 || !strings.HasPrefix(out, step.want) {
			t.Errorf("wakuwaku %v = %d, %q, %q; want 0, %q", step.args, code, out, errs, step.want)
		}
	}
	select {
	case <-ran:
	case <-time.After(10 * time.Second):
		t.Fatal("no run within 10s of wakuwaku run")
	}

	code, out, _ := wakuwaku(t, srv, "status", "-json", "hourly-report")
	var st cron.JobStatus
	if err := json.Unmarshal([]byte(out), &st); code != 0 || err != nil || st.Job != "hourly-report" || st.Paused {
		t.Errorf("status -json hourly-report = %d, %q (%v); want the job's record, not paused", code, out, err)
	}
}

func TestLocksAndRelease(t *testing.T) {
	srv := redistest.Start(t)
	ctx := t.Context()
	db := lock.NewDB(srv.Client(t))
	invoices := lock.New[int]("invoice", time.Minute)
	if tok, err := invoices.TryLock(ctx, db, 42); err != nil || tok == nil {
		t.Fatal(tok, err)
	}
	catalog := lock.NewRW[string]("catalog", 30*time.Second)
	for range 2 {
		if tok, err := catalog.TryRead(ctx, db, "books"); err != nil || tok == nil {
			t.Fatal(tok, err)
		}
	}
	if tok, err := catalog.TryWrite(ctx, db, "maps"); err != nil || tok == nil {
		t.Fatal(tok, err)
	}
	code, out, errs := wakuwaku(t, srv, "locks")
	if code != 0 {
		t.Fatalf("locks = %d, %q", code, errs)
	}
	for _, want := range [][]string{{"Lock", "invoice", "42"}, {"RwLock", "catalog", "books", "-", "2,", "longest"}, {"RwLock", "catalog", "maps"}} {
		if rows(out, want...) != 1 {
			t.Errorf("locks:\n%s\nwant a row %q", out, want)
		}
	}
	if !strings.Contains(out, "(writer)") {
		t.Errorf("locks:\n%s\nwant the writer of maps", out)
	}
	if _, out, _ := wakuwaku(t, srv, "locks", "-namespace", "invoice"); strings.Contains(out, "catalog") || !strings.Contains(out, "invoice") {
		t.Errorf("locks -namespace invoice:\n%s\nwant the invoice lock only", out)
	}

}

func TestBadInput(t *testing.T) {
	srv := redistest.Start(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := l.Addr().String()
	l.Close()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"status", "no-such-job"}, "no record of the job"},
		{[]string{"pause", "no-such-job"}, "no record of the job"},
		{[]string{"release", "-force", "some:other:key"}, "not a lock's key"},
		{[]string{"release", "-force", "@@wakuwaku-entity:Lock:x:y"}, "the lock y in namespace x is not held"},
	} {
		code, _, errs := wakuwaku(t, srv, tc.args...)
		if code != 1 || !strings.Contains(errs, tc.want) || strings.Count(errs, "\n") != 1 {
			t.Errorf("wakuwaku %v = %d, %q; want 1 and one line with %q", tc.args, code, errs, tc.want)
		}
	}
	var out, errs strings.Builder
	if code := run(t.Context(), []string{"-redis", "redis://" + down, "-timeout", "3s", "status"}, &out, &errs); code != 1 || strings.Count(errs.String(), "\n") != 1 || !strings.Contains(errs.String(), "connection refused") {
		t.Errorf("status with Redis down = %d, %q; want 1 and one line saying the connection was refused", code, errs.String())
	}
	for _, bad := range [][]string{{"-redis", "http://x"}, {"-redis", "127.0.0.1:port"}, {"-cluster", "http://x"}} {
		errs.Reset()
		if code := run(t.Context(), append(bad, "status"), &out, &errs); code != 2 || strings.Count(errs.String(), "\n") != 2 ||
			!strings.Contains(errs.String(), bad[0]+" ") || !strings.Contains(errs.String(), "want host:port or a redis:// or rediss:// URL") {
			t.Errorf("wakuwaku %v status = %d, %q; want 2 and a usage error that says what the flag wants", bad, code, errs.String())
		}
	}
}

// TestAddrAndJSONErrors: -redis takes host:port, the form of
// redis.Options.Addr, as well as a URL; under -json an error is a JSON
// object on standard output, with status 1.
func TestAddrAndJSONErrors(t *testing.T) {
	srv := redistest.Start(t)
	var out, errs strings.Builder
	if code := run(t.Context(), []string{"-redis", srv.Addr(), "status"}, &out, &errs); code != 0 || !strings.Contains(out.String(), "no job records") {
		t.Errorf("wakuwaku -redis %s status = %d, %q, %q; want 0 and no job records", srv.Addr(), code, out.String(), errs.String())
	}
	code, stdout, stderr := wakuwaku(t, srv, "status", "-json", "nosuch")
	var e struct{ Error string }
	if err := json.Unmarshal([]byte(stdout), &e); code != 1 || err != nil || !strings.Contains(e.Error, "no record of the job") || stderr != "" {
		t.Errorf("status -json nosuch = %d, %q, %q; want 1 and {\"error\": \"… no record of the job …\"} on stdout alone", code, stdout, stderr)
	}
}

// TestCluster lists the locks and the job records of a three-master Redis
// Cluster, found on every master.
func TestCluster(t *testing.T) {
	cl := redistest.StartCluster(t, 3)
	addrs := cl.Addrs()
	url := "redis://" + addrs[0] + "?addr=" + strings.Join(addrs[1:], "&addr=")
	db := lock.NewDB(cl.Client(t))
	invoices := lock.New[int]("invoice", time.Minute)
	for n := range 20 { // on every master, surely
		if tok, err := invoices.TryLock(t.Context(), db, n); err != nil || tok == nil {
			t.Fatal(tok, err)
		}
	}
	ran := make(chan struct{}, 1)
	rt, err := cron.Start([]cron.Job{&report{db: db, ran: ran}}, cron.WithReplica("replica-1"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Shutdown(context.Background()) })
	<-ran

	var out, errs strings.Builder
	if code := run(t.Context(), []string{"-cluster", url, "locks", "-namespace", "invoice"}, &out, &errs); code != 0 {
		t.Fatalf("locks on the cluster = %d, %q", code, errs.String())
	}
	if n := rows(out.String(), "Lock", "invoice"); n != 20 {
		t.Errorf("locks on the cluster found %d invoice locks, want 20:\n%s", n, out.String())
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		out.Reset()
		code := run(t.Context(), []string{"-cluster", url, "status"}, &out, &errs)
		if code == 0 && strings.Contains(out.String(), "hourly-report") && strings.Contains(out.String(), " ok ") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("status on the cluster = %d, %q, %q; want hourly-report's run", code, out.String(), errs.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// rows counts the lines of a table whose first fields are fields.
func rows(table string, fields ...string) int {
	n := 0
	for _, line := range strings.Split(table, "\n") {
		f := strings.Fields(line)
		if len(f) >= len(fields) && slices.Equal(f[:len(fields)], fields) {
			n++
		}
	}
	return n
}
