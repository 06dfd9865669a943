package e2e

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/wakuwaku-go/wakuwaku/cron"
	"github.com/wakuwaku-go/wakuwaku/cron/statuspage"
	"github.com/wakuwaku-go/wakuwaku/internal/redistest"
	"github.com/wakuwaku-go/wakuwaku/interval"
	"github.com/wakuwaku-go/wakuwaku/lock"
)

// timelineScreenshot is where -update-docs copies the timeline's
// screenshot.
const timelineScreenshot = "../docs/statuspage-timeline.png"

// busyService starts three replicas of four leased jobs that run every
// second or two, so that their records gather a history within seconds:
// one that succeeds, taking longer each time; one that always fails, and
// whose slots use up their three attempts; one with a run deadline that
// every other run outlasts; and one whose runs are spread over each slot.
// It returns an Admin once every job has at least want runs in its
// history.
func busyService(t *testing.T, srv *redistest.Server, want int) cron.Admin {
	t.Helper()
	second, twoSeconds := interval.MustCron("@every 1s"), interval.MustCron("@every 2s")
	for _, replica := range []string{"replica-1", "replica-2", "replica-3"} {
		db := lock.NewDb(srv.Client(t))
		lease := func(l cron.LeaseConfig) cron.FuncOption {
			l.Db = db
			return cron.WithLease(l)
		}
		jobs := []cron.Job{
			cron.Func("hourly-report", second, func(ctx context.Context, tk cron.Tick) error {
				return sleep(ctx, time.Duration(50+tk.Slot.Start.Second()%5*60)*time.Millisecond)
			}, lease(cron.LeaseConfig{})),
			cron.Func("invoice-sweep", twoSeconds, func(ctx context.Context, _ cron.Tick) error {
				if err := sleep(ctx, 60*time.Millisecond); err != nil {
					return err
				}
				return errors.New("invoice 4711: payment provider timed out")
			}, lease(cron.LeaseConfig{Attempts: 3, Backoff: 150 * time.Millisecond})),
			cron.Func("search-index", second, func(ctx context.Context, tk cron.Tick) error {
				d := 120 * time.Millisecond
				if tk.Slot.Start.Second()%2 == 0 {
					d = time.Second // past the deadline
				}
				return sleep(ctx, d)
			}, lease(cron.LeaseConfig{}), cron.WithRunDeadline(400*time.Millisecond)),
			cron.Func("nightly-export", interval.MustCron("@every 2s").WithSpread(1500*time.Millisecond), func(ctx context.Context, _ cron.Tick) error {
				return sleep(ctx, 80*time.Millisecond)
			}, lease(cron.LeaseConfig{})),
		}
		rt, err := cron.Start(jobs, cron.WithReplica(replica))
		if err != nil {
			t.Fatalf("cron.Start(%s) = %v", replica, err)
		}
		t.Cleanup(func() { _ = rt.Shutdown(context.Background()) })
	}
	admin := cron.NewAdmin(lock.NewDb(srv.Client(t)))
	deadline := time.Now().Add(60 * time.Second)
	for _, job := range []string{"hourly-report", "invoice-sweep", "search-index", "nightly-export"} {
		for {
			st, err := admin.Status(t.Context(), job)
			if err == nil && len(st.History) >= want && (job != "invoice-sweep" || st.SlotState == "failed") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: its history isn't ready within 60s: %d runs, %v", job, len(st.History), err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return admin
}

// TestTimelineInBrowser loads the status page over the records of three
// replicas whose jobs ran a dozen times, in headless Chromium, and checks
// each job's timeline: a bar per recent run, coloured by outcome, the
// schedule, the last success, and the failed slot's used-up attempts. It
// keeps a screenshot as an artifact (and, with -update-docs, in docs/).
func TestTimelineInBrowser(t *testing.T) {
	ctx := browser(t) // first: it fails fast without Chromium
	admin := busyService(t, redistest.Start(t), 8)
	srv := httptest.NewServer(statuspage.New(admin, statuspage.WithActions(), statuspage.WithRefresh(0)))
	t.Cleanup(srv.Close)

	res := within(t, ctx, "load the page", chromedp.NavigateResponse(srv.URL))
	if res.Status != http.StatusOK {
		t.Fatalf("GET %s = %d, want 200", srv.URL, res.Status)
	}
	for _, tc := range []struct {
		job    string
		colors []string // fills the timeline must show
		text   []string
	}{
		{"hourly-report", []string{"#3aa365"}, []string{"every 1s", "last success", "late"}},
		{"invoice-sweep", []string{"#d64537"}, []string{"every 2s", "attempts used up (3)", "no success recorded"}},
		{"search-index", []string{"#3aa365", "#e08a00"}, []string{"every 1s", "last success"}},
		{"nightly-export", []string{"#3aa365"}, []string{"every 2s, spread 1.5s", "last success"}},
	} {
		sel := `tr[data-job="` + tc.job + `"]`
		row := within(t, ctx, "read the row of "+tc.job, chromedp.Text(chromedp.CSS(sel)))
		for _, want := range tc.text {
			if !strings.Contains(row, want) {
				t.Errorf("row of %s = %q, want it to show %q", tc.job, row, want)
			}
		}
		svg := within(t, ctx, "read the timeline of "+tc.job, chromedp.OuterHTML(chromedp.CSS(sel+` svg.timeline`)))
		if n := strings.Count(svg, "<rect"); n < 8 {
			t.Errorf("the timeline of %s has %d bars, want at least 8:\n%s", tc.job, n, svg)
		}
		for _, c := range tc.colors {
			if !strings.Contains(svg, `fill="`+c+`"`) {
				t.Errorf("the timeline of %s has no bar of %s:\n%s", tc.job, c, svg)
			}
		}
		// The browser drew it: it has a box of the timeline's size.
		box := within(t, ctx, "measure the timeline of "+tc.job, chromedp.Evaluate[[]float64](
			`(() => { const r = document.querySelector('`+sel+` svg.timeline').getBoundingClientRect(); return [r.width, r.height]; })()`))
		if len(box) != 2 || box[0] != 240 || box[1] != 18 {
			t.Errorf("the timeline of %s is drawn %v px, want 240x18", tc.job, box)
		}
	}
	png := shot(t, ctx, "timeline.png")
	if *updateDocs {
		if err := os.WriteFile(timelineScreenshot, png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("copied the screenshot to %s", timelineScreenshot)
	}
}
