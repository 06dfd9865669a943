package statuspage

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wakuwaku-go/wakuwaku/cron"
)

// TestRows checks how rows shows the parts of a record that the tests on
// a real Redis don't reach: an expired run lease, a run request, a retry's
// attempt, a failure older than the last run, an outcome of a later
// version.
func TestRows(t *testing.T) {
	now := time.Date(2026, 12, 3, 19, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name string
		st   cron.JobStatus
		want row
	}{
		{"no record of a run", cron.JobStatus{Job: "j"},
			row{Job: "j", LastSlot: "-", Replica: "-", Duration: "-", Outcome: "none ended yet", NextDue: "-"}},
		{"retried, failed before, run requested", cron.JobStatus{
			Job:          "j",
			Last:         &cron.RunRecord{Slot: "s", Replica: "r2", Trigger: cron.TriggerRetry, Attempt: 2, Started: now.Add(-time.Minute), Duration: 1500 * time.Microsecond, Outcome: "ok"},
			LastFailure:  &cron.RunRecord{Replica: "r1", Started: now.Add(-2 * time.Minute), Outcome: "lost"},
			RunRequested: true, RequestedAt: now.Add(-3 * time.Second),
			NextDue: now.Add(90 * time.Second), SeenAt: now, SeenBy: "r3",
		}, row{Job: "j", Seen: "seen just now by r3", LastSlot: "s", Replica: "r2", Duration: "2ms",
			Outcome: "ok", OutcomeClass: "ok", How: "retry, attempt 2", Failure: "last failure 2m0s ago on r1: lost",
			NextDue: "19:01:30Z (in 1m30s)", Requested: "run requested 3s ago"}},
		{"run lease expired, paused yesterday", cron.JobStatus{
			Job:     "j",
			Last:    &cron.RunRecord{Slot: "s", Replica: "r1", Started: now.Add(-time.Hour), Outcome: "vanished"},
			Running: &cron.RunRecord{Replica: "r1", Started: now.Add(-90 * time.Second), Deadline: now.Add(-time.Second)},
			Paused:  true, PausedAt: now.Add(-24 * time.Hour), PausedBy: "admin h/1",
		}, row{Job: "j", LastSlot: "s", Replica: "r1", Duration: "0s", Outcome: "vanished", OutcomeClass: "other",
			Running: "on r1 since 18:58:30Z (1m30s)", RunningLabel: "lease expired", RunningClass: "warn",
			Paused: true, PausedText: "since 2026-12-02 19:00:00Z by admin h/1", NextDue: "-"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := rows([]cron.JobStatus{tc.st}, now); len(got) != 1 || got[0] != tc.want {
				t.Errorf("rows(%+v) =\n%+v, want\n%+v", tc.st, got, tc.want)
			}
		})
	}
}

// TestRenderEscapes renders a job whose name and error hold markup: the
// page shows them as text.
func TestRenderEscapes(t *testing.T) {
	name := `<script>alert("x")</script>&`
	st := cron.JobStatus{Job: name, Last: &cron.RunRecord{Outcome: "error", Error: "<img src=x onerror=alert(1)>"}, LastFailure: &cron.RunRecord{Outcome: "error", Error: "<img src=x onerror=alert(1)>"}}
	p := &page{Actions: true, Token: "T", Jobs: rows([]cron.JobStatus{st}, time.Now())}
	var b strings.Builder
	if err := pageTemplate.Execute(&b, p); err != nil {
		t.Fatal(err)
	}
	html := b.String()
	for _, bad := range []string{"<script>", "<img"} {
		if strings.Contains(html, bad) {
			t.Errorf("the page holds %q unescaped:\n%s", bad, html)
		}
	}
	for _, want := range []string{
		`<tr data-job="&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;&amp;">`,
		`href="?job=%3cscript%3ealert%28%22x%22%29%3c%2fscript%3e%26"`,
		`&lt;img src=x onerror=alert(1)&gt;`,
	} {
		if !strings.Contains(html, want) {
			t.Errorf("the page lacks %s:\n%s", want, html)
		}
	}
}

// TestRowHistory checks the parts of a row that come from a job's
// schedule and history: the schedule in words, a failed slot's used-up
// attempts, the last success, the newest scheduled run's lag, and the
// timeline: a group per slot, the retries in their slot's group, the run
// in progress in its own, marks and bars placed by time, a bar's width its
// run's duration on the axis's scale, and the slots in words.
func TestRowHistory(t *testing.T) {
	now := time.Date(2026, 12, 3, 19, 0, 0, 0, time.UTC)
	at := func(min int) time.Time { return now.Add(time.Duration(min) * time.Minute) }
	st := cron.JobStatus{
		Job: "sync", Schedule: `cron "@hourly", spread 10m0s`, SlotState: "failed", Attempts: 3,
		LastSuccess: at(-50),
		History: []cron.RunRecord{ // newest first
			{Slot: "2026-12-03T18:00:00Z", Replica: "r1", Trigger: cron.TriggerRetry, Attempt: 2, Scheduled: at(-50), Started: at(-45), Duration: time.Minute, Outcome: "timeout", Error: "cron: run deadline exceeded (1m0s)"},
			{Slot: "2026-12-03T18:00:00Z", Replica: "r2", Attempt: 1, Scheduled: at(-50), Started: at(-50), Duration: 4 * time.Minute, Outcome: "error", Error: "<b>boom</b>"},
			{Slot: "2026-12-03T16:00:00Z", Replica: "r1", Attempt: 1, Scheduled: at(-180), Started: at(-180), Duration: 0, Outcome: "ok"},
		},
		Running: &cron.RunRecord{Slot: "2026-12-03T19:00:00Z", Replica: "r3", Started: at(-1)},
	}
	r := rows([]cron.JobStatus{st}, now)[0]
	for got, want := range map[string]string{
		r.Schedule:    "hourly, spread 10m0s",
		r.UsedUp:      "attempts used up (3)",
		r.LastSuccess: "last success 50m0s ago",
		r.Lag:         "started 0s late", // the newest run of the schedule's, not the retry's
	} {
		if got != want {
			t.Errorf("row shows %q, want %q", got, want)
		}
	}
	tl := r.Timeline
	if tl == nil {
		t.Fatal("a job with history has no timeline")
	}
	svg := string(tl.SVG)
	groups := regexp.MustCompile(`(?s)<g data-slot="([^"]+)" data-outcome="([a-z]+)">(.*?)</g>`).FindAllStringSubmatch(svg, -1)
	var got []string
	for _, g := range groups {
		var runs []string
		for _, m := range regexp.MustCompile(`<rect class="run" data-outcome="([a-z]+)"`).FindAllStringSubmatch(g[3], -1) {
			runs = append(runs, m[1])
		}
		got = append(got, g[1]+" "+g[2]+" "+strings.Join(runs, ","))
	}
	want := []string{
		"2026-12-03T16:00:00Z ok ok",
		"2026-12-03T17:00:00Z missed ",
		"2026-12-03T18:00:00Z failed error,timeout",
		"2026-12-03T19:00:00Z running running",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("the timeline's slots are\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// The axis runs from 16:00 (the first slot) to 19:00 (now): 180
	// minutes over the units between the margins.
	perMin := (timelineWidth - 2*timelineMargin) / 180
	xOf := func(min float64) float64 { return timelineMargin + perMin*min }
	attr := func(re, in string) []float64 {
		var out []float64
		for _, m := range regexp.MustCompile(re).FindAllStringSubmatch(in, -1) {
			v, _ := strconv.ParseFloat(m[1], 64)
			out = append(out, v)
		}
		return out
	}
	near := func(what string, got, want float64) {
		t.Helper()
		if got < want-0.15 || got > want+0.15 {
			t.Errorf("%s at %.1f, want %.1f", what, got, want)
		}
	}
	marks := attr(`<rect class="mark" x="([0-9.]+)"`, svg)
	if len(marks) != 4 {
		t.Fatalf("the timeline has %d marks, want 4:\n%s", len(marks), svg)
	}
	for i, min := range []float64{0, 60, 120, 180} {
		near(fmt.Sprintf("mark %d", i), marks[i]+markWidth/2, xOf(min))
	}
	xs := attr(`<rect class="run" data-outcome="[a-z]+" x="([0-9.]+)"`, svg)
	ws := attr(`<rect class="run" data-outcome="[a-z]+" x="[0-9.]+" y="4" width="([0-9.]+)"`, svg)
	if len(xs) != 4 || len(ws) != 4 {
		t.Fatalf("the timeline has bars at %v, %v wide; want 4:\n%s", xs, ws, svg)
	}
	// ok took 0 (the minimum), error 4m at 18:10, timeout 1m at 18:15,
	// the run in progress 1m so far.
	for i, b := range []struct{ start, took float64 }{{0, 0}, {130, 4}, {135, 1}, {179, 1}} {
		near(fmt.Sprintf("bar %d", i), xs[i], xOf(b.start))
		near(fmt.Sprintf("bar %d's width", i), ws[i], max(minBar, perMin*b.took))
	}
	if strings.Contains(svg, "<b>") || !strings.Contains(svg, "&lt;b&gt;boom&lt;/b&gt;") {
		t.Errorf("the timeline's titles hold markup unescaped:\n%s", svg)
	}
	if want := "4 slots: 1 ok, 1 failed (timeout), 1 missed, 1 running"; tl.Summary != want {
		t.Errorf("the timeline's summary = %q, want %q", tl.Summary, want)
	}
	if len(tl.Slots) != 4 || tl.Slots[1].Result != "failed (timeout)" || len(tl.Slots[1].Attempts) != 2 ||
		tl.Slots[1].Attempts[1] != (attemptLine{Text: "attempt 2 (retry) on r1 at 18:15:00Z: timeout, 1m0s, started 5m0s late", Error: "cron: run deadline exceeded (1m0s)"}) {
		t.Errorf("the timeline's slots in words, newest first = %+v", tl.Slots)
	}
	if none := rows([]cron.JobStatus{{Job: "new"}}, now)[0]; none.Timeline != nil || none.LastSuccess != "" {
		t.Errorf("a job without history shows a timeline %+v, %q", none.Timeline, none.LastSuccess)
	}
}

// TestTimelineSlots checks which slots a timeline marks missed or skipped:
// missed ones only for a Cron schedule, between the history's first and
// last slots, and none when the page can't name the history's slots as the
// replicas did; a history entry whose outcome is "skipped" as a skipped
// slot without a bar.
func TestTimelineSlots(t *testing.T) {
	now := time.Date(2026, 12, 3, 19, 0, 0, 0, time.UTC)
	run := func(slot string, min int, outcome string) cron.RunRecord {
		return cron.RunRecord{Slot: slot, Replica: "r1", Attempt: 1, Started: now.Add(time.Duration(min) * time.Minute), Duration: time.Second, Outcome: outcome}
	}
	requested := func(r cron.RunRecord) cron.RunRecord {
		r.Trigger = cron.TriggerRequest
		return r
	}
	for _, tc := range []struct {
		name     string
		schedule string
		history  []cron.RunRecord // newest first
		want     string           // the slots' states, oldest first
	}{
		{"every 10m, two missed", `cron "*/10 * * * *"`, []cron.RunRecord{
			run("2026-12-03T18:30:00Z", -30, "ok"), run("2026-12-03T18:00:00Z", -60, "ok"),
		}, "ok missed missed ok"},
		{"none missed after the last", `cron "*/10 * * * *"`, []cron.RunRecord{
			run("2026-12-03T18:00:00Z", -60, "ok"),
		}, "ok"},
		{"a skipped entry", `cron "*/10 * * * *", spread 1m0s`, []cron.RunRecord{
			run("2026-12-03T18:20:00Z", -40, "ok"), run("2026-12-03T18:10:00Z", -50, "skipped"), run("2026-12-03T18:00:00Z", -60, "error"),
		}, "failed skipped ok"},
		{"a duration policy has no slots to miss", "at least 10m0s", []cron.RunRecord{
			run(strconv.FormatInt(now.Add(-30*time.Minute).UnixMilli(), 10), -30, "ok"), run(strconv.FormatInt(now.Add(-60*time.Minute).UnixMilli(), 10), -60, "ok"),
		}, "ok ok"},
		{"a slot the spec doesn't have: no guess", `cron "0 * * * *"`, []cron.RunRecord{
			run("2026-12-03T18:30:00Z", -30, "ok"), run("2026-12-03T18:15:00Z", -45, "ok"), run("2026-12-03T16:00:00Z", -180, "ok"),
		}, "ok ok ok"},
		{"a requested run is not an attempt", `cron "0 * * * *"`, []cron.RunRecord{
			requested(run("2026-12-03T18:00:00Z", -40, "ok")), run("2026-12-03T18:00:00Z", -60, "error"),
			requested(run("2026-12-03T17:00:00Z", -100, "error")),
		}, "failed failed"},
		{"a zone's slots", `cron "CRON_TZ=Asia/Tokyo 0 */1 * * *"`, []cron.RunRecord{
			run("2026-12-04T03:00:00[Asia/Tokyo]", -60, "ok"), run("2026-12-04T01:00:00[Asia/Tokyo]", -180, "ok"),
		}, "ok missed ok"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tl := timeline(tc.history, nil, tc.schedule, now)
			var got []string
			for _, m := range regexp.MustCompile(`<g data-slot="[^"]+" data-outcome="([a-z]+)">`).FindAllStringSubmatch(string(tl.SVG), -1) {
				got = append(got, m[1])
			}
			if strings.Join(got, " ") != tc.want {
				t.Errorf("timeline(%s) marks %v, want %s:\n%s", tc.schedule, got, tc.want, tl.SVG)
			}
			if tc.name == "a skipped entry" && strings.Count(string(tl.SVG), `class="run"`) != 2 {
				t.Errorf("timeline with a skipped entry draws %d bars, want 2 (no bar for the skip):\n%s", strings.Count(string(tl.SVG), `class="run"`), tl.SVG)
			}
		})
	}
}

// TestTimelineReasons checks that the timeline says why a slot was skipped
// and why a failed attempt closed its slot, as the history's entries say.
func TestTimelineReasons(t *testing.T) {
	now := time.Date(2026, 12, 3, 19, 0, 0, 0, time.UTC)
	history := []cron.RunRecord{
		{Slot: "2026-12-03T18:10:00Z", Replica: "r2", Started: now.Add(-50 * time.Minute), Outcome: "skipped", Reason: "paused"},
		{Slot: "2026-12-03T18:00:00Z", Replica: "r1", Attempt: 1, Started: now.Add(-60 * time.Minute), Duration: time.Minute,
			Outcome: "error", Error: "boom", Reason: "claim window over"},
	}
	tl := timeline(history, nil, `cron "*/10 * * * *"`, now)
	var results, lines []string
	for _, s := range tl.Slots {
		results = append(results, s.Result)
		for _, a := range s.Attempts {
			lines = append(lines, a.Text+" / "+a.Error)
		}
	}
	for _, want := range []string{"skipped (paused)", "failed (error, claim window over)"} {
		if !slices.Contains(results, want) || !strings.Contains(string(tl.SVG), want) {
			t.Errorf("timeline's slots say %q, its marks:\n%s\nwant %q in both", results, tl.SVG, want)
		}
	}
	for _, want := range []string{"skipped on r2 at 18:10:00Z / paused", "error (claim window over), 1m0s"} {
		if !strings.Contains(strings.Join(lines, "\n"), want) {
			t.Errorf("timeline's lines:\n%s\nwant %q", strings.Join(lines, "\n"), want)
		}
	}
}
