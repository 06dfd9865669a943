package statuspage

import (
	"bytes"
	"crypto/sha256"
	_ "embed"
	"encoding/base64"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/wakuwaku-go/wakuwaku/cron"
)

var (
	//go:embed page.html
	pageHTML string
	//go:embed style.css
	styleCSS string

	pageTemplate = template.Must(template.New("page").Parse(pageHTML))

	// contentPolicy lets the page load nothing but its own style sheet,
	// post its forms only to itself, and be framed by no one.
	contentPolicy = fmt.Sprintf("default-src 'none'; style-src 'sha256-%s'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
		base64.StdEncoding.EncodeToString(func() []byte { s := sha256.Sum256([]byte(styleCSS)); return s[:] }()))
)

// page is what the template shows.
type page struct {
	Style        template.CSS
	Refresh      string // the meta refresh's content; "" for none
	RefreshEvery string // "5s"; "" for none
	Now          time.Time
	NowText      string
	JSON         string // the JSON endpoint, relative to the page
	Actions      bool
	Token        string // the visitor's token, with Actions
	One          string // the one job shown, if narrowed to one
	Done         string // what a form just did
	Jobs         []row
	Replicas     []replicaRow // the live replicas, on the page of every job
	Error        string       // instead of the jobs
	Status       string       // the HTTP status, with Error
	Unavailable  bool         // Error is Redis's: the page recovers by itself
}

// replicaRow is a live replica, as the page shows it.
type replicaRow struct {
	Name, Group, Until string
}

func replicaRows(reps []cron.ReplicaStatus, now time.Time) []replicaRow {
	out := make([]replicaRow, 0, len(reps))
	for _, r := range reps {
		out = append(out, replicaRow{Name: r.Name, Group: r.Group, Until: relative(r.LiveUntil, now)})
	}
	return out
}

// newPage returns the page's frame for r: everything but its content.
func (h *Handler) newPage(w http.ResponseWriter, r *http.Request) *page {
	now := time.Now()
	p := &page{
		Style:   template.CSS(styleCSS),
		Now:     now,
		NowText: clock(now, now),
		JSON:    "?" + paramFormat + "=json",
		Actions: h.actions,
	}
	one := r.URL.Query().Get(paramJob)
	back := "?" // the page, without what a redirect added
	if one != "" {
		back += url.Values{paramJob: {one}}.Encode()
		p.JSON += "&" + url.Values{paramJob: {one}}.Encode()
	}
	if h.refresh > 0 {
		secs := int64((h.refresh + time.Second - 1) / time.Second)
		p.Refresh = strconv.FormatInt(secs, 10) + "; url=" + back
		p.RefreshEvery = (time.Duration(secs) * time.Second).String()
	}
	if h.actions {
		p.Token = token(w, r)
	}
	return p
}

// render writes p with status code.
func (h *Handler) render(w http.ResponseWriter, code int, p *page) {
	var b bytes.Buffer
	if err := pageTemplate.Execute(&b, p); err != nil {
		// A bug of this package's: the template and its data disagree.
		http.Error(w, "statuspage: rendering the page: "+err.Error(), http.StatusInternalServerError)
		return
	}
	hd := w.Header()
	hd.Set("Content-Type", "text/html; charset=utf-8")
	hd.Set("Content-Security-Policy", contentPolicy)
	hd.Set("X-Frame-Options", "DENY")
	hd.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	_, _ = w.Write(b.Bytes())
}

// row is one job's line of the table.
type row struct {
	Job, Seen                           string
	LastSlot, Replica, Duration         string
	Outcome, OutcomeClass, How          string
	Failure                             string
	Running, RunningLabel, RunningClass string
	Paused                              bool
	PausedText                          string
	NextDue, Requested                  string

	// The job's schedule, a failed slot's used-up attempts, and its recent
	// slots: their timeline, its last success and its last run's lag.
	Schedule, UsedUp string
	Timeline         *timelineView // nil without history
	LastSuccess, Lag string
}

// rows shows jobs as of now.
func rows(jobs []cron.JobStatus, now time.Time) []row {
	out := make([]row, 0, len(jobs))
	for _, j := range jobs {
		r := row{Job: j.Job, LastSlot: "-", Replica: "-", Duration: "-", Outcome: "none ended yet", NextDue: "-"}
		if !j.SeenAt.IsZero() {
			r.Seen = "seen " + ago(j.SeenAt, now)
			if j.SeenBy != "" {
				r.Seen += " by " + j.SeenBy
			}
		}
		if l := j.Last; l != nil {
			r.LastSlot, r.Replica, r.Outcome = l.Slot, l.Replica, l.Outcome
			r.Duration = l.Duration.Round(time.Millisecond).String()
			r.OutcomeClass = outcomeClass(l.Outcome)
			if l.Trigger != cron.TriggerSchedule || l.Attempt > 1 {
				r.How = fmt.Sprintf("%s, attempt %d", l.Trigger, l.Attempt)
			}
		}
		if f := j.LastFailure; f != nil && (j.Last == nil || f.Started != j.Last.Started) {
			// The last failure, when it is not the last run itself.
			r.Failure = fmt.Sprintf("last failure %s on %s: %s", ago(f.Started, now), f.Replica, failure(*f))
		} else if f != nil && f.Error != "" {
			r.Failure = f.Error
		}
		if run := j.Running; run != nil {
			r.RunningLabel, r.RunningClass = "running", "running"
			r.Running = fmt.Sprintf("on %s since %s (%s)", run.Replica, clock(run.Started, now), since(run.Started, now))
			if !run.Deadline.IsZero() && run.Deadline.Before(now) {
				r.RunningLabel, r.RunningClass = "lease expired", "warn"
			}
		}
		if j.Paused {
			r.Paused = true
			r.PausedText = "since " + clock(j.PausedAt, now)
			if j.PausedBy != "" {
				r.PausedText += " by " + j.PausedBy
			}
		}
		if !j.NextDue.IsZero() {
			r.NextDue = clock(j.NextDue, now) + " (" + relative(j.NextDue, now) + ")"
		}
		if j.RunRequested {
			r.Requested = "run requested " + ago(j.RequestedAt, now)
		}
		history(&r, j, now)
		out = append(out, r)
	}
	return out
}

// history fills r's parts that come from j's schedule and history.
func history(r *row, j cron.JobStatus, now time.Time) {
	r.Schedule = scheduleText(j.Schedule)
	if j.SlotState == "failed" {
		r.UsedUp = fmt.Sprintf("attempts used up (%d)", j.Attempts)
	}
	r.Timeline = timeline(j.History, j.Running, j.Schedule, now)
	if !j.LastSuccess.IsZero() {
		r.LastSuccess = "last success " + ago(j.LastSuccess, now)
	} else if len(j.History) > 0 {
		r.LastSuccess = "no success recorded"
	}
	// The lag of the newest run of the schedule: a retry or a request
	// starts late by design.
	for _, h := range j.History {
		if h.Trigger == cron.TriggerSchedule && !h.Scheduled.IsZero() {
			r.Lag = "started " + lag(h).Round(time.Millisecond).String() + " late"
			break
		}
	}
}

// outcomeClass is the colour of an outcome's pill: grey for one this
// package does not know.
func outcomeClass(o string) string {
	switch o {
	case "ok":
		return "ok"
	case "error", "panic", "timeout":
		return "bad"
	case "lost":
		return "warn"
	}
	return "other"
}

// failure says how a failed run ended: its error, or its outcome.
func failure(f cron.RunRecord) string {
	if f.Error != "" {
		return f.Error
	}
	return f.Outcome
}

// doneText says what a form did, after its redirect; "" for an action it
// can't have been.
func doneText(action, job string) string {
	switch action {
	case "pause":
		return "Paused " + job + " on every replica."
	case "resume":
		return "Resumed " + job + ": it runs again from its next slot."
	case "run":
		return "Asked for a run of " + job + " now: one replica runs it within about a second."
	}
	return ""
}

// clock shows a time of day in UTC, with the date unless it is now's.
func clock(t, now time.Time) string {
	t, now = t.UTC(), now.UTC()
	if t.YearDay() == now.YearDay() && t.Year() == now.Year() {
		return t.Format("15:04:05Z")
	}
	return t.Format("2006-01-02 15:04:05Z")
}

// relative says how far t is from now: "in 12m3s", "5s ago", "now".
func relative(t, now time.Time) string {
	d := t.Sub(now).Round(time.Second)
	switch {
	case d == 0:
		return "now"
	case d < 0:
		return strings.TrimPrefix(d.String(), "-") + " ago"
	}
	return "in " + d.String()
}

// ago says how long ago t was: "5s ago", "just now".
func ago(t, now time.Time) string {
	if d := now.Sub(t).Round(time.Second); d > 0 {
		return d.String() + " ago"
	}
	return "just now"
}

// since says how long ago t was, to the tenth of a second under a minute.
func since(t, now time.Time) string {
	d := now.Sub(t)
	if d < time.Minute {
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}
