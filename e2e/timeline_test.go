package e2e

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
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

// The screenshots -update-docs copies to docs/, at a laptop's width and a
// phone's.
const (
	laptopScreenshot = "../docs/statuspage-1280.png"
	phoneScreenshot  = "../docs/statuspage-390.png"
)

// busyService starts three replicas of five leased jobs that run every
// second or two, so that their records gather a history within seconds:
// one that succeeds, taking longer each time; one that always fails, and
// whose slots use up their three attempts; one that fails its first
// attempt and succeeds on its retry; one with a run deadline that every
// other run outlasts; and one whose runs are spread over each slot. It
// returns an Admin once every job has at least want runs in its history.
func busyService(t *testing.T, srv *redistest.Server, want int) cron.Admin {
	t.Helper()
	second, twoSeconds := interval.MustCron("@every 1s"), interval.MustCron("@every 2s")
	for _, replica := range []string{"replica-1", "replica-2", "replica-3"} {
		db := lock.NewDB(srv.Client(t))
		lease := func(l cron.LeaseConfig) cron.FuncOption {
			l.DB = db
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
			cron.Func("ledger-sync", twoSeconds, func(ctx context.Context, tk cron.Tick) error {
				if err := sleep(ctx, 100*time.Millisecond); err != nil {
					return err
				}
				if tk.Attempt == 1 {
					return errors.New("ledger: connection reset by peer")
				}
				return nil
			}, lease(cron.LeaseConfig{Attempts: 2, Backoff: 200 * time.Millisecond})),
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
	admin := cron.NewAdmin(lock.NewDB(srv.Client(t)))
	waitHistory(t, admin, want, "hourly-report", "invoice-sweep", "ledger-sync", "search-index", "nightly-export")
	return admin
}

// waitHistory waits until each job has at least want runs in its history,
// and invoice-sweep's slot used up its attempts.
func waitHistory(t *testing.T, admin cron.Admin, want int, jobs ...string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for _, job := range jobs {
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
}

// pauseAfterFailedSlot pauses job once a slot of it used up its attempts,
// so that the page shows that slot's state whenever it is loaded: left
// running, the job spends part of each slot retrying (a row that reads
// "retry, attempt 2", which a page loaded then rightly shows). It pauses
// between a failed slot and the next one's tick, and tries again should
// the next slot have been claimed first.
func pauseAfterFailedSlot(t *testing.T, admin cron.Admin, job string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		st, err := admin.Status(t.Context(), job)
		if err != nil {
			t.Fatal(err)
		}
		if st.SlotState != "failed" || time.Until(st.NextDue) < 300*time.Millisecond {
			time.Sleep(20 * time.Millisecond)
			continue
		}
		if err := admin.Pause(t.Context(), job); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Until(st.NextDue) + 300*time.Millisecond) // past the next tick, which the pause skips
		after, err := admin.Status(t.Context(), job)
		if err != nil {
			t.Fatal(err)
		}
		if after.Slot == st.Slot && after.SlotState == "failed" {
			return
		}
		if err := admin.Resume(t.Context(), job); err != nil { // the next slot was claimed first
			t.Fatal(err)
		}
	}
	t.Fatalf("%s: no slot used up its attempts and stayed the last for 30s", job)
}

// TestBusyPageInBrowser loads the status page over the records of three
// replicas whose jobs ran a dozen times, in headless Chromium at a
// laptop's width (1280x800), a phone's (390x844) and, as the narrowest
// window that gets the table, a small laptop's (1024x768). At each it checks
// that the page has no horizontal scroll and that each job's Pause (or
// Resume) and Run now buttons and its next due time are in the viewport,
// where a click would reach them. At the laptops' widths it checks every
// column's heading too, and that each job's timeline plots time: its
// slots' marks are as far apart as the slots' times, a run's bar as wide
// as the run took on the same scale, the attempts of a slot grouped under
// it with their outcomes, the slots the job was paused for marked
// skipped (the record's history has them), and the details readable
// without hovering. It keeps screenshots as artifacts (and, with
// -update-docs, those at 1280 and 390 px in docs/).
func TestBusyPageInBrowser(t *testing.T) {
	ctx := browser(t) // first: it fails fast without Chromium
	admin := busyService(t, redistest.Start(t), 8)
	pauseAfterFailedSlot(t, admin, "invoice-sweep")
	// Slots skipped on purpose: hourly-report paused for three of its slots,
	// which the record's history holds as skipped (paused).
	if err := admin.Pause(t.Context(), "hourly-report"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3500 * time.Millisecond)
	if err := admin.Resume(t.Context(), "hourly-report"); err != nil {
		t.Fatal(err)
	}
	before, err := admin.Status(t.Context(), "hourly-report")
	if err != nil {
		t.Fatal(err)
	}
	for {
		st, err := admin.Status(t.Context(), "hourly-report")
		if err != nil {
			t.Fatal(err)
		}
		if len(st.History) > 0 && len(before.History) > 0 && st.History[0].Slot > before.History[0].Slot &&
			st.History[0].Started.Sub(before.History[0].Started) > 2*time.Second {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	// And one paused now, to show its Resume button and its pause.
	if err := admin.Pause(t.Context(), "nightly-export"); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(statuspage.New(admin, statuspage.WithActions(), statuspage.WithRefresh(0)))
	t.Cleanup(srv.Close)

	for _, tc := range []struct {
		name          string
		width, height int64
		laptop        bool
		docs          string
	}{
		{"laptop 1280x800", 1280, 800, true, laptopScreenshot},
		{"phone 390x844", 390, 844, false, phoneScreenshot},
		{"small laptop 1024x768", 1024, 768, true, ""}, // the narrowest table
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := chromedp.Do(ctx, chromedp.EmulateViewport(tc.width, tc.height)); err != nil {
				t.Fatalf("e2e: set the viewport to %dx%d: %v", tc.width, tc.height, err)
			}
			res := within(t, ctx, "load the page", chromedp.NavigateResponse(srv.URL))
			if res.Status != http.StatusOK {
				t.Fatalf("GET %s = %d, want 200", srv.URL, res.Status)
			}
			checkInView(t, ctx, tc.laptop)
			checkRows(t, ctx)
			png := shot(t, ctx, fmt.Sprintf("busy-%d.png", tc.width))
			if *updateDocs && tc.docs != "" {
				if err := os.WriteFile(tc.docs, png, 0o644); err != nil {
					t.Fatal(err)
				}
				t.Logf("copied the screenshot to %s", tc.docs)
			}
			if tc.laptop {
				checkTimelines(t, ctx, admin) // last: it opens a job's details
			}
		})
	}
}

// inView is the script that checks what must be in view: it answers the
// page's and the viewport's widths and a line for each element that is
// not in the viewport once the page is scrolled down to it (never
// sideways), or that something else covers.
const inView = `(columns => {
	const problems = [];
	const check = (what, el) => {
		if (!el) { problems.push(what + ": missing"); return; }
		window.scrollTo(0, 0);
		window.scrollTo(0, el.getBoundingClientRect().top - innerHeight / 2);
		const r = el.getBoundingClientRect();
		const hit = document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2);
		if (r.width > 0 && r.height > 0 && r.left >= 0 && r.right <= innerWidth && r.top >= 0 && r.bottom <= innerHeight && hit && el.contains(hit)) return;
		problems.push(what + ": at x " + Math.round(r.left) + " to " + Math.round(r.right) + ", y " + Math.round(r.top) + " to " + Math.round(r.bottom) +
			" in a viewport of " + innerWidth + "x" + innerHeight + (hit ? ", its centre shows " + hit.tagName.toLowerCase() + (hit.className ? "." + hit.className : "") : ", its centre is off the page"));
	};
	if (columns) for (const th of document.querySelectorAll("main > * thead th, main thead th")) check("the column " + JSON.stringify(th.textContent), th);
	for (const tr of document.querySelectorAll("tr[data-job]")) {
		const job = tr.dataset.job;
		check(job + "'s Pause or Resume button", tr.querySelector('button[value="pause"], button[value="resume"]'));
		check(job + "'s Run now button", tr.querySelector('button[value="run"]'));
		check(job + "'s next due time", tr.querySelector("td.next"));
	}
	window.scrollTo(0, 0);
	return {width: innerWidth, scrollWidth: document.scrollingElement.scrollWidth, problems};
})`

// checkInView checks that the page has no horizontal scroll and that
// each job's buttons and next due time are in view; with columns, every
// column's heading too.
func checkInView(t *testing.T, ctx context.Context, columns bool) {
	t.Helper()
	type answer struct {
		Width, ScrollWidth float64
		Problems           []string
	}
	got := within(t, ctx, "measure the page", chromedp.Evaluate[answer](fmt.Sprintf("%s(%v)", inView, columns)))
	if got.ScrollWidth > got.Width {
		t.Errorf("the page is %v px wide in a viewport of %v: it scrolls sideways", got.ScrollWidth, got.Width)
	}
	for _, p := range got.Problems {
		t.Errorf("not in view: %s", p)
	}
}

// checkRows checks what each job's row says in words.
func checkRows(t *testing.T, ctx context.Context) {
	t.Helper()
	for _, tc := range []struct {
		job  string
		text []string
	}{
		{"hourly-report", []string{"every 1s", "last success", "late", "skipped"}},
		{"invoice-sweep", []string{"every 2s", "attempts used up (3)", "no success recorded", "failed"}},
		{"ledger-sync", []string{"every 2s", "ok on retry"}},
		{"search-index", []string{"every 1s", "last success", "timeout"}},
		{"nightly-export", []string{"every 2s, spread 1.5s", "last success", "paused", "Resume"}},
	} {
		row := within(t, ctx, "read the row of "+tc.job, chromedp.Text(chromedp.CSS(`tr[data-job="`+tc.job+`"]`)))
		for _, want := range tc.text {
			if !strings.Contains(row, want) {
				t.Errorf("row of %s = %q, want it to show %q", tc.job, row, want)
			}
		}
	}
}

// slotMark is a slot of a timeline as the browser drew it.
type slotMark struct {
	Slot, Outcome string
	X             float64 // the centre of its mark
	Runs          []runBar
}

// runBar is an attempt's bar.
type runBar struct {
	Outcome     string
	Left, Width float64
}

// checkTimelines checks each job's timeline as the browser drew it
// against the job's history.
func checkTimelines(t *testing.T, ctx context.Context, admin cron.Admin) {
	t.Helper()
	read := func(job string) []slotMark {
		return within(t, ctx, "measure the timeline of "+job, chromedp.Evaluate[[]slotMark](`[...document.querySelectorAll('tr[data-job="`+job+`"] svg.timeline g[data-slot]')].map(g => {
			const m = g.querySelector(".mark").getBoundingClientRect();
			return {slot: g.dataset.slot, outcome: g.dataset.outcome, x: m.left + m.width / 2,
				runs: [...g.querySelectorAll("rect.run")].map(r => { const b = r.getBoundingClientRect(); return {outcome: r.dataset.outcome, left: b.left, width: b.width}; })};
		})`))
	}

	// hourly-report: the slots are a second apart, and so are their marks;
	// a run's bar is as wide as it took on the same scale; the slots it
	// was paused for are marked skipped.
	marks := read("hourly-report")
	if len(marks) < 8 {
		t.Fatalf("the timeline of hourly-report has %d slots, want at least 8: %+v", len(marks), marks)
	}
	pxPerSec := pxPerSecond(t, marks)
	st, err := admin.Status(t.Context(), "hourly-report")
	if err != nil {
		t.Fatal(err)
	}
	compared := 0
	for _, h := range st.History {
		i := slices.IndexFunc(marks, func(m slotMark) bool { return m.Slot == h.Slot })
		if i < 0 || len(marks[i].Runs) != 1 || h.Duration < 100*time.Millisecond {
			continue // newer than the page, or drawn at the minimum width
		}
		want := h.Duration.Seconds() * pxPerSec
		if got := marks[i].Runs[0].Width; math.Abs(got-want) > 1.5 {
			t.Errorf("hourly-report's run of %s took %v: its bar is %.1f px wide, want %.1f (%.1f px a second, as the slots' marks)", h.Slot, h.Duration, got, want, pxPerSec)
		}
		compared++
	}
	if compared < 3 {
		t.Errorf("hourly-report: %d runs of the history found on the page, want at least 3: %+v", compared, marks)
	}
	if !slices.ContainsFunc(marks, func(m slotMark) bool { return m.Outcome == "skipped" && len(m.Runs) == 0 }) {
		t.Errorf("hourly-report's timeline marks no skipped slot, though it was paused for three: %+v", marks)
	}

	// invoice-sweep: a slot's three attempts, grouped under it, after it.
	marks = read("invoice-sweep")
	if !slices.ContainsFunc(marks, func(m slotMark) bool {
		return m.Outcome == "failed" && len(m.Runs) == 3 && m.Runs[0].Outcome == "error" && m.Runs[2].Outcome == "error" &&
			m.Runs[0].Left >= m.X-1 && m.Runs[0].Left < m.Runs[1].Left && m.Runs[1].Left < m.Runs[2].Left
	}) {
		t.Errorf("invoice-sweep's timeline has no failed slot with its three attempts in order after its mark: %+v", marks)
	}
	// ledger-sync: the retry beside its first attempt, the slot ok.
	marks = read("ledger-sync")
	if !slices.ContainsFunc(marks, func(m slotMark) bool {
		return m.Outcome == "ok" && len(m.Runs) == 2 && m.Runs[0].Outcome == "error" && m.Runs[1].Outcome == "ok"
	}) {
		t.Errorf("ledger-sync's timeline has no ok slot of an error then an ok attempt: %+v", marks)
	}
	// search-index: runs that time out beside runs that succeed.
	marks = read("search-index")
	outcomes := map[string]bool{}
	for _, m := range marks {
		for _, r := range m.Runs {
			outcomes[r.Outcome] = true
		}
	}
	if !outcomes["ok"] || !outcomes["timeout"] {
		t.Errorf("search-index's timeline has runs %v, want ok and timeout: %+v", outcomes, marks)
	}

	// The details, without hovering: open them, read the attempts.
	within(t, ctx, "open invoice-sweep's details", chromedp.Click(chromedp.CSS(`tr[data-job="invoice-sweep"] details summary`)))
	details := within(t, ctx, "read invoice-sweep's details", chromedp.Text(chromedp.CSS(`tr[data-job="invoice-sweep"] details`)))
	for _, want := range []string{"failed", "attempt 3", "error", "replica-", "ms", "invoice 4711: payment provider timed out"} {
		if !strings.Contains(details, want) {
			t.Errorf("invoice-sweep's details = %q, want them to show %q", details, want)
		}
	}
}

// pxPerSecond returns the scale of a timeline whose marks are for slots
// named by their RFC 3339 times: how far apart the marks of two slots a
// second apart are. It fails the test unless the marks are as far apart
// as their slots' times on one scale.
func pxPerSecond(t *testing.T, marks []slotMark) float64 {
	t.Helper()
	type point struct {
		at time.Time
		x  float64
	}
	var ps []point
	for _, m := range marks {
		at, err := time.Parse(time.RFC3339, m.Slot)
		if err != nil {
			t.Fatalf("the timeline has a slot %q, want an RFC 3339 time: %v", m.Slot, err)
		}
		ps = append(ps, point{at, m.X})
	}
	slices.SortFunc(ps, func(a, b point) int { return a.at.Compare(b.at) })
	first, last := ps[0], ps[len(ps)-1]
	scale := (last.x - first.x) / last.at.Sub(first.at).Seconds()
	if scale < 5 {
		t.Fatalf("the timeline's slots %v to %v are drawn %.1f px apart, want them spread over its width", first.at, last.at, last.x-first.x)
	}
	for _, p := range ps {
		if want := first.x + p.at.Sub(first.at).Seconds()*scale; math.Abs(p.x-want) > 1 {
			t.Errorf("the mark of the slot %v is at %.1f px, want %.1f: its time on the scale of the first and last slots", p.at, p.x, want)
		}
	}
	return scale
}
