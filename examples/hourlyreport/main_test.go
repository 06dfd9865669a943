package main

import (
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/wakuwaku-go/wakuwaku/cron"
	"github.com/wakuwaku-go/wakuwaku/internal/redistest"
)

// TestRun runs the demo briefly, both ways, and checks that every interval
// was run by exactly one replica while the others skipped it.
func TestRun(t *testing.T) {
	for _, tc := range []struct {
		name string
		seed bool
		who  string
	}{
		{"runtime takes the lease", false, "the runtime takes it (cron.Leased)"},
		{"job takes the lease", true, "the job takes it (-seed)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var out strings.Builder
			// A job that takes the lease itself, as the Rust crate's do,
			// has 1/12 of the interval of margin against a late Redis:
			// an interval long enough for a busy machine's scheduling.
			cfg := config{hour: 900 * time.Millisecond, duration: 4500 * time.Millisecond, replicas: 3, seed: tc.seed}
			if err := run(&out, cfg); err != nil {
				t.Fatalf("run = %v", err)
			}
			lines := strings.Split(strings.TrimSpace(out.String()), "\n")
			if want := "an interval of 900ms, a lease of 825ms: " + tc.who + "; a replica starts every 300ms"; lines[0] != want {
				t.Errorf("first line = %q, want %q", lines[0], want)
			}
			line := regexp.MustCompile(`^interval (\d+) at +[\d.]+s: report by (replica-\d)((; |, )replica-\d skipped at [+-]\d+\.\d\ds)*$`)
			intervals := 0
			for _, l := range lines {
				if !strings.HasPrefix(l, "interval ") {
					continue
				}
				m := line.FindStringSubmatch(l)
				if m == nil {
					t.Errorf("%q: does not read as an interval line", l)
					continue
				}
				intervals++
				if strings.Contains(l, m[2]+" skipped") {
					t.Errorf("%q: the replica that ran the report also skipped it", l)
				}
			}
			if intervals < 3 {
				t.Errorf("%d interval lines in 5 intervals; output:\n%s", intervals, out.String())
			}
			for _, r := range []string{"replica-1", "replica-2", "replica-3"} {
				if n := strings.Count(out.String(), "\n"+r+" started\n"); n != 1 {
					t.Errorf("%q started %d times, want once; output:\n%s", r, n, out.String())
				}
			}
			if !strings.HasSuffix(strings.TrimSpace(out.String()), "all replicas stopped") {
				t.Errorf("output does not end with the shutdown:\n%s", out.String())
			}
		})
	}
}

// TestRunAnnouncesWhatStarts runs the demo for less time than the replicas'
// offsets: it must announce only the replica it started, and print its
// durations rounded.
func TestRunAnnouncesWhatStarts(t *testing.T) {
	t.Parallel()
	var out strings.Builder
	cfg := config{hour: 10 * time.Second, duration: 300 * time.Millisecond, replicas: 3}
	if err := run(&out, cfg); err != nil {
		t.Fatalf("run = %v", err)
	}
	want := []string{
		"an interval of 10s, a lease of 9.17s: the runtime takes it (cron.Leased); a replica starts every 3.33s",
		"replica-1 started",
		"interval 1 at   0.00s: report by replica-1",
		"shutting down 1 replica: waiting for runs in progress (Ctrl-C again to exit at once)",
		"the job's record in Redis: last run by replica-1, outcome ok",
		"all replicas stopped",
	}
	if got := strings.Split(strings.TrimSpace(out.String()), "\n"); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("output:\n%s\nwant:\n%s", out.String(), strings.Join(want, "\n"))
	}
}

func TestParseFlags(t *testing.T) {
	cfg, err := parseFlags(nil)
	if err != nil {
		t.Fatalf("parseFlags() = %v", err)
	}
	if cfg.seed || cfg.redisURL != "" || cfg.hour != 2*time.Second || cfg.replicas != 3 {
		t.Errorf("parseFlags() = %+v, want the runtime's lease on an embedded Redis, 3 replicas, an hour of 2s", cfg)
	}
	if cfg, err := parseFlags([]string{"-seed"}); err != nil || !cfg.seed {
		t.Errorf("parseFlags(-seed) = %+v, %v, want seed", cfg, err)
	}
}

func TestRunRefusesBadFlags(t *testing.T) {
	var out strings.Builder
	if err := run(&out, config{hour: 0, duration: time.Second, replicas: 3}); err == nil {
		t.Error("run with -hour 0 = nil error, want an error")
	}
	if err := run(&out, config{hour: time.Second, duration: time.Second, redisURL: "not a url", replicas: 3}); err == nil {
		t.Error("run with a bad -redis = nil error, want an error")
	}
}

// TestUnreachableRedis runs the command as a child process against a port
// that nothing listens on: it must exit soon, with a non-zero status and one
// line that says why, and none of go-redis's own log lines.
func TestUnreachableRedis(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()

	cmd := exec.Command(os.Args[0], "-test.run=^$", "-args", "-redis", "redis://"+addr, "-duration", "3s", "-replicas", "1")
	cmd.Env = append(os.Environ(), childEnv+"=1")
	cmd.SysProcAttr = redistest.ChildProcAttr()
	cmd.WaitDelay = time.Second
	var out syncBuilder
	cmd.Stdout, cmd.Stderr = &out, &out
	began := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	timer := time.AfterFunc(15*time.Second, func() { _ = cmd.Process.Kill() })
	defer timer.Stop()
	err = cmd.Wait()
	took := time.Since(began)

	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() <= 0 {
		t.Errorf("the command exited with %v after %v, want a non-zero status", err, took)
	}
	if took > 10*time.Second {
		t.Errorf("the command took %v to give up, want it to fail fast", took)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 1 || !strings.Contains(lines[0], addr) || !strings.Contains(lines[0], "connection refused") || strings.Contains(lines[0], "pool") {
		t.Errorf("output:\n%s\nwant one line that names %s and the refused connection, without go-redis's pool lines", out.String(), addr)
	}
}

// TestAdmin runs the demo with -admin on a free port and reads the status
// page while the replicas run: the report's row, and its JSON. A port
// that can't be listened on fails run before any replica starts.
func TestAdmin(t *testing.T) {
	t.Parallel()
	var out syncBuilder
	cfg := config{hour: 300 * time.Millisecond, duration: 2 * time.Second, replicas: 3, admin: "127.0.0.1:0"}
	done := make(chan error, 1)
	go func() { done <- run(&out, cfg) }()

	at := regexp.MustCompile(`(?m)^the jobs' status page: (http://127\.0\.0\.1:\d+/)$`)
	var url string
	for deadline := time.Now().Add(10 * time.Second); url == ""; {
		if m := at.FindStringSubmatch(out.String()); m != nil {
			url = m[1]
		} else if time.Now().After(deadline) {
			t.Fatalf("no status page announced within 10s; output:\n%s", out.String())
		} else {
			time.Sleep(10 * time.Millisecond)
		}
	}
	fetch := func(query string) (int, string) {
		t.Helper()
		res, err := http.Get(url + query)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		body, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(body)
	}
	get := func(query string) string {
		t.Helper()
		code, body := fetch(query)
		if code != http.StatusOK {
			t.Fatalf("GET %s%s = %d; body:\n%s", url, query, code, body)
		}
		return body
	}
	var st cron.JobStatus
	for deadline := time.Now().Add(10 * time.Second); st.Last == nil; {
		// The page is announced before the replicas start: until one of
		// them has registered the job, the page answers 404 for it.
		code, body := fetch("?format=json&job=hourly-report")
		switch {
		case code == http.StatusNotFound && time.Now().Before(deadline):
		case code != http.StatusOK:
			t.Fatalf("GET ?format=json&job=hourly-report = %d; body:\n%s", code, body)
		default:
			if err := json.Unmarshal([]byte(body), &st); err != nil {
				t.Fatal(err)
			}
		}
		if st.Last == nil && time.Now().After(deadline) {
			t.Fatalf("no run of hourly-report recorded within 10s: %+v", st)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !strings.HasPrefix(st.Last.Replica, "replica-") || st.Last.Outcome != "ok" {
		t.Errorf("hourly-report's last run = %+v, want one of replica-N, ok", st.Last)
	}
	if page := get(""); !strings.Contains(page, `<tr data-job="hourly-report">`) || !strings.Contains(page, `value="pause">Pause</button>`) {
		t.Errorf("the status page lacks the report's row with its Pause button:\n%s", page)
	}
	if err := <-done; err != nil {
		t.Fatalf("run = %v; output:\n%s", err, out.String())
	}
	if _, err := http.Get(url); err == nil {
		t.Errorf("the status page still answers after run returned")
	}

	t.Run("bad address", func(t *testing.T) {
		var out strings.Builder
		err := run(&out, config{hour: time.Second, duration: time.Second, replicas: 3, admin: "127.0.0.1:99999"})
		if err == nil || !strings.HasPrefix(err.Error(), "-admin: ") || strings.Contains(out.String(), "started") {
			t.Errorf("run with -admin 127.0.0.1:99999 = %v, output %q; want an -admin error before any replica starts", err, out.String())
		}
	})
}
