package statuspage

import (
	"regexp"
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
// attempts, the last success, the newest scheduled run's lag, and a timeline with a
// bar per run, the run in progress included, coloured by outcome, whose
// widths follow the runs' durations and lags.
func TestRowHistory(t *testing.T) {
	now := time.Date(2026, 12, 3, 19, 0, 0, 0, time.UTC)
	at := func(min int) time.Time { return now.Add(time.Duration(min) * time.Minute) }
	st := cron.JobStatus{
		Job: "sync", Schedule: `cron "@hourly", spread 10m0s`, SlotState: "failed", Attempts: 3,
		LastSuccess: at(-50),
		History: []cron.RunRecord{ // newest first
			{Replica: "r1", Trigger: cron.TriggerRetry, Attempt: 3, Scheduled: at(-10), Started: at(-10).Add(2 * time.Second), Duration: time.Minute, Outcome: "timeout", Error: "cron: run deadline exceeded (1m0s)"},
			{Replica: "r2", Attempt: 1, Scheduled: at(-30), Started: at(-30), Duration: 4 * time.Minute, Outcome: "error", Error: "<b>boom</b>"},
			{Replica: "r1", Attempt: 1, Scheduled: at(-60), Started: at(-60), Duration: 0, Outcome: "ok"},
		},
		Running: &cron.RunRecord{Replica: "r3", Started: at(-1)},
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
	svg := string(r.Timeline)
	colors := regexp.MustCompile(`fill="(#[0-9a-f]+)"`).FindAllStringSubmatch(svg, -1)
	var got []string
	for _, c := range colors {
		got = append(got, c[1])
	}
	want := []string{outcomeColors["ok"], outcomeColors["error"], outcomeColors["timeout"], outcomeColors["running"]}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("the timeline's bars are %v, want %v: oldest first, the run in progress last", got, want)
	}
	widths := regexp.MustCompile(`width="([0-9.]+)" height="14"`).FindAllStringSubmatch(svg, -1)
	if len(widths) != 4 {
		t.Fatalf("the timeline has %d bars:\n%s", len(widths), svg)
	}
	w := func(i int) float64 { v, _ := strconv.ParseFloat(widths[i][1], 64); return v }
	// ok took 0 (the minimum), error 4m, timeout 1m, running 1m so far.
	if w(0) != minBar || w(1) <= w(2) || w(2) != w(3) {
		t.Errorf("bar widths %v, %v, %v, %v: want the minimum, then 4m wider than 1m, and 1m twice", w(0), w(1), w(2), w(3))
	}
	if !strings.Contains(svg, "<line") {
		t.Errorf("the timeline has no gap for the retry's late start:\n%s", svg)
	}
	if strings.Contains(svg, "<b>") || !strings.Contains(svg, "&lt;b&gt;boom&lt;/b&gt;") {
		t.Errorf("the timeline's titles hold markup unescaped:\n%s", svg)
	}
	if end := regexp.MustCompile(`x="([0-9.]+)" y="2" width="([0-9.]+)"`).FindAllStringSubmatch(svg, -1); len(end) == 4 {
		x, _ := strconv.ParseFloat(end[3][1], 64)
		wd, _ := strconv.ParseFloat(end[3][2], 64)
		if x+wd > timelineWidth+0.1 {
			t.Errorf("the last bar ends at %v, past the timeline's %d px", x+wd, timelineWidth)
		}
	}
	if none := rows([]cron.JobStatus{{Job: "new"}}, now)[0]; none.Timeline != "" || none.LastSuccess != "" {
		t.Errorf("a job without history shows a timeline %q, %q", none.Timeline, none.LastSuccess)
	}
}
