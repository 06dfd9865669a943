package e2e

import (
	"context"
	"errors"
	"flag"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/wakuwaku-go/wakuwaku/cron"
	"github.com/wakuwaku-go/wakuwaku/cron/statuspage"
	"github.com/wakuwaku-go/wakuwaku/internal/redistest"
	"github.com/wakuwaku-go/wakuwaku/interval"
	"github.com/wakuwaku-go/wakuwaku/lock"
)

var updateDocs = flag.Bool("update-docs", false, "copy the status page's screenshots at 1280 and 390 px to ../docs/statuspage-1280.png and ../docs/statuspage-390.png")

// chromium returns the browser to drive: $CHROMIUM, else chromium or
// chromium-browser on PATH. It fails the test without one.
func chromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("e2e: no Chromium to drive: this browser test needs Debian's chromium on PATH " +
		"(apt-get install chromium; scripts/test installs it), or CHROMIUM=/path/to/chrome. It does not skip.")
	return ""
}

// browser starts headless Chromium for the test and returns a context of
// one of its tabs, a laptop's window of 1280x800; the test's cleanup stops
// it.
func browser(t *testing.T) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium(t)),
		chromedp.WindowSize(1280, 800),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("hide-scrollbars", true),
	)
	if os.Geteuid() == 0 {
		opts = append(opts, chromedp.NoSandbox) // Chromium refuses root with its sandbox
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	if err := chromedp.Do(ctx); err != nil { // starts the browser, bound to ctx
		t.Fatalf("e2e: starting Chromium (%s): %v", chromium(t), err)
	}
	return ctx
}

// within runs steps with a deadline, which ends them but not the browser.
func within[T any](t *testing.T, ctx context.Context, what string, a chromedp.Action[T]) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		t.Fatalf("e2e: %s: %v", what, err)
	}
	return v
}

// service starts what a service of three replicas would run: each replica
// has the same three leased jobs, "hourly-report" (succeeds),
// "invoice-sweep" (fails) and "search-index" (runs until the test ends).
// It returns an Admin once the records show the two runs ended and the
// third in progress.
func service(t *testing.T, srv *redistest.Server) cron.Admin {
	t.Helper()
	release := make(chan struct{})
	var once sync.Once
	hour := interval.AtLeast(time.Hour)
	for _, replica := range []string{"replica-1", "replica-2", "replica-3"} {
		db := lock.NewDB(srv.Client(t))
		leased := cron.WithLease(cron.LeaseConfig{DB: db})
		jobs := []cron.Job{
			cron.Func("hourly-report", hour, func(ctx context.Context, _ cron.Tick) error {
				return sleep(ctx, 150*time.Millisecond)
			}, leased),
			cron.Func("invoice-sweep", hour, func(ctx context.Context, _ cron.Tick) error {
				if err := sleep(ctx, 40*time.Millisecond); err != nil {
					return err
				}
				return errors.New("invoice 4711: payment provider timed out")
			}, leased),
			cron.Func("search-index", hour, func(ctx context.Context, _ cron.Tick) error {
				select {
				case <-release:
					return nil
				case <-ctx.Done():
					return context.Cause(ctx)
				}
			}, leased),
		}
		rt, err := cron.Start(jobs, cron.WithReplica(replica))
		if err != nil {
			t.Fatalf("cron.Start(%s) = %v", replica, err)
		}
		t.Cleanup(func() { _ = rt.Shutdown(context.Background()) })
	}
	t.Cleanup(func() { once.Do(func() { close(release) }) }) // before the shutdowns
	admin := cron.NewAdmin(lock.NewDB(srv.Client(t)))
	for job, ok := range map[string]func(cron.JobStatus) bool{
		"hourly-report": func(st cron.JobStatus) bool { return st.Last != nil },
		"invoice-sweep": func(st cron.JobStatus) bool { return st.Last != nil },
		"search-index":  func(st cron.JobStatus) bool { return st.Running != nil },
	} {
		deadline := time.Now().Add(10 * time.Second)
		for {
			st, err := admin.Status(t.Context(), job)
			if err == nil && ok(st) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: its record isn't ready within 10s: %+v, %v", job, st, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return admin
}

func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-time.After(d):
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// TestStatusPageInBrowser loads the status page, mounted under a prefix,
// in headless Chromium over the records of three replicas; reads the
// table; clicks Pause on a job's row; and checks that the page that comes
// back shows the job paused, that the job's record says so, and that the
// page then reloads itself; then, with Redis killed, that the page says
// so with 503. It keeps screenshots as artifacts.
func TestStatusPageInBrowser(t *testing.T) {
	ctx := browser(t) // first: it fails fast without Chromium
	redisServer := redistest.Start(t)
	admin := service(t, redisServer)
	mux := http.NewServeMux()
	mux.Handle("/admin/cron/", http.StripPrefix("/admin/cron", statuspage.New(admin, statuspage.WithActions())))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	page := srv.URL + "/admin/cron/"

	res := within(t, ctx, "load the page", chromedp.NavigateResponse(page))
	if res.Status != http.StatusOK {
		t.Fatalf("GET %s = %d, want 200", page, res.Status)
	}
	for _, tc := range []struct {
		job  string
		want []string
	}{
		{"hourly-report", []string{"ok", "replica-", "Pause", "Run now"}},
		{"invoice-sweep", []string{"error", "invoice 4711: payment provider timed out"}},
		{"search-index", []string{"running", "since"}},
	} {
		row := within(t, ctx, "read the row of "+tc.job, chromedp.Text(chromedp.CSS(`tr[data-job="`+tc.job+`"]`)))
		for _, want := range tc.want {
			if !strings.Contains(row, want) {
				t.Errorf("row of %s = %q, want it to show %q", tc.job, row, want)
			}
		}
	}
	// Below the jobs, the live replicas from the registry.
	reps := within(t, ctx, "read the live replicas", chromedp.Text(chromedp.CSS(`section.replicas`)))
	if !strings.Contains(reps, "Live replicas") || !strings.Contains(reps, "replica-") || !strings.Contains(reps, "in ") {
		t.Errorf("the live replicas = %q, want the service's replica, live for a while more", reps)
	}
	shot(t, ctx, "before-pause.png")

	res, err := chromedp.RunResponse(ctx, chromedp.Click(chromedp.CSS(`tr[data-job="hourly-report"] button[value="pause"]`)))
	if err != nil {
		t.Fatalf("e2e: click Pause: %v", err)
	}
	if res.Status != http.StatusOK {
		t.Fatalf("the page after Pause came with %d, want 200", res.Status)
	}
	if loc, want := within(t, ctx, "read the location", chromedp.Location()), page+"?done=pause&on=hourly-report&sig="; !strings.HasPrefix(loc, want) {
		t.Errorf("after Pause the browser is at %s, want %s and the notice's signature", loc, want)
	}
	row := within(t, ctx, "read the row after Pause", chromedp.Text(chromedp.CSS(`tr[data-job="hourly-report"]`)))
	for _, want := range []string{"paused", "Resume"} {
		if !strings.Contains(row, want) {
			t.Errorf("row of hourly-report after Pause = %q, want it to show %q", row, want)
		}
	}
	notice := within(t, ctx, "read the notice", chromedp.Text(chromedp.CSS(`.notice.done`)))
	if want := "Paused hourly-report on every replica."; notice != want {
		t.Errorf("the notice after Pause = %q, want %q", notice, want)
	}
	if st, err := admin.Status(t.Context(), "hourly-report"); err != nil || !st.Paused {
		t.Errorf("Admin.Status(hourly-report) = paused %v, %v; want paused", st.Paused, err)
	}
	shot(t, ctx, "after-pause.png")

	// The page reloads itself (a meta refresh, every 5 s), back to its own
	// URL without the notice, and still shows the pause.
	within(t, ctx, "wait for the reload", chromedp.WaitNotPresent(chromedp.CSS(`.notice.done`)))
	if loc := within(t, ctx, "read the location", chromedp.Location()); loc != page+"?" && loc != page {
		t.Errorf("after the reload the browser is at %s, want %s", loc, page)
	}
	row = within(t, ctx, "read the row after the reload", chromedp.Text(chromedp.CSS(`tr[data-job="hourly-report"]`)))
	if !strings.Contains(row, "paused") {
		t.Errorf("row of hourly-report after the reload = %q, want it to show paused", row)
	}

	// With Redis gone, the page says so, with 503.
	redisServer.Kill(t)
	res = within(t, ctx, "load the page without Redis", chromedp.NavigateResponse(page))
	if res.Status != http.StatusServiceUnavailable {
		t.Errorf("GET %s without Redis = %d, want 503", page, res.Status)
	}
	alert := within(t, ctx, "read the error", chromedp.Text(chromedp.CSS(`.notice.error`)))
	for _, want := range []string{"503 Service Unavailable", "cron: listing the job records", "once Redis answers"} {
		if !strings.Contains(alert, want) {
			t.Errorf("the page without Redis says %q, want %q", alert, want)
		}
	}
	shot(t, ctx, "redis-down.png")
}

// shot takes a screenshot of the page, keeps it as the test's artifact
// name, and returns it.
func shot(t *testing.T, ctx context.Context, name string) []byte {
	t.Helper()
	png := within(t, ctx, "take a screenshot", chromedp.FullScreenshot(100))
	path := filepath.Join(t.ArtifactDir(), name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
	return png
}
