package statuspage

import (
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
			Last:    &cron.RunRecord{Slot: "s", Replica: "r1", Started: now.Add(-time.Hour), Outcome: "timeout"},
			Running: &cron.RunRecord{Replica: "r1", Started: now.Add(-90 * time.Second), Deadline: now.Add(-time.Second)},
			Paused:  true, PausedAt: now.Add(-24 * time.Hour), PausedBy: "admin h/1",
		}, row{Job: "j", LastSlot: "s", Replica: "r1", Duration: "0s", Outcome: "timeout", OutcomeClass: "other",
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
