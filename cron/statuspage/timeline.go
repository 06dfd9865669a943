package statuspage

import (
	"fmt"
	"html"
	"html/template"
	"strconv"
	"strings"
	"time"

	"github.com/wakuwaku-go/wakuwaku/cron"
)

// The timeline of a job's recent runs is an SVG drawn here, inline in the
// page, so that the page stays one document without script or image
// requests: the runs from the oldest on the left to the newest on the
// right, each a gap as long as the run started late, then a bar as long
// as it took, coloured by its outcome. Lengths are to scale within one
// timeline, but for a minimum that keeps every run and every late start
// visible.
const (
	timelineWidth  = 240 // px
	timelineHeight = 18
	minBar         = 3 // px: a run that took no time
	minGap         = 2 // px between runs, beside a late start's gap
)

// outcomeColors are the bars' colours, by outcome; the legend's swatches
// in style.css use the same.
var outcomeColors = map[string]string{
	"ok":      "#3aa365",
	"error":   "#d64537",
	"panic":   "#8e1b12",
	"timeout": "#e08a00",
	"lost":    "#9aa4b1",
	"running": "#3d74e0",
}

// otherColor is the colour of an outcome this package does not know.
const otherColor = "#6b4fbb"

// timeline draws the runs of history (newest first, as the record keeps
// them) and the run in progress, if any, as of now; "" if there is no
// history.
func timeline(history []cron.RunRecord, running *cron.RunRecord, now time.Time) template.HTML {
	if len(history) == 0 {
		return ""
	}
	type run struct {
		lag, took time.Duration
		color     string
		title     string
	}
	runs := make([]run, 0, len(history)+1)
	for i := len(history) - 1; i >= 0; i-- {
		r := history[i]
		color, ok := outcomeColors[r.Outcome]
		if !ok {
			color = otherColor
		}
		runs = append(runs, run{lag: lag(r), took: max(r.Duration, 0), color: color, title: runTitle(r, r.Outcome)})
	}
	if running != nil {
		runs = append(runs, run{lag: lag(*running), took: max(now.Sub(running.Started), 0),
			color: outcomeColors["running"], title: runTitle(*running, "running")})
	}
	var total time.Duration
	for _, r := range runs {
		total += r.lag + r.took
	}
	free := float64(timelineWidth - len(runs)*(minBar+minGap))
	scale := 0.0
	if total > 0 && free > 0 {
		scale = free / float64(total)
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="timeline" width="%d" height="%d" viewBox="0 0 %d %d" role="img" aria-label="the last %d runs">`,
		timelineWidth, timelineHeight, timelineWidth, timelineHeight, len(runs))
	x := 0.0
	mid := timelineHeight / 2
	for _, r := range runs {
		gap := float64(minGap) + scale*float64(r.lag)
		if r.lag > 0 && gap >= float64(minGap)+1 {
			// The late start: a thin line where the run should have run.
			fmt.Fprintf(&b, `<line x1="%s" y1="%d" x2="%s" y2="%d" stroke="#c5ccd8" stroke-width="2"/>`,
				px(x+1), mid, px(x+gap-1), mid)
		}
		x += gap
		w := float64(minBar) + scale*float64(r.took)
		fmt.Fprintf(&b, `<rect x="%s" y="2" width="%s" height="%d" rx="1.5" fill="%s"><title>%s</title></rect>`,
			px(x), px(w), timelineHeight-4, r.color, html.EscapeString(r.title))
		x += w
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

// lag is how late r started after it was due, if its replica said when.
func lag(r cron.RunRecord) time.Duration {
	if r.Scheduled.IsZero() {
		return 0
	}
	return max(r.Started.Sub(r.Scheduled), 0)
}

// runTitle describes a run for its bar's tooltip.
func runTitle(r cron.RunRecord, outcome string) string {
	s := fmt.Sprintf("%s on %s: %s", r.Started.UTC().Format("2006-01-02 15:04:05Z"), r.Replica, outcome)
	if r.Duration > 0 {
		s += ", " + r.Duration.Round(time.Millisecond).String()
	}
	if !r.Scheduled.IsZero() {
		s += ", started " + lag(r).Round(time.Millisecond).String() + " late"
	}
	if r.Trigger != cron.TriggerSchedule || r.Attempt > 1 {
		s += fmt.Sprintf(" (%s, attempt %d)", r.Trigger, r.Attempt)
	}
	if r.Error != "" {
		s += "\n" + r.Error
	}
	return s
}

// px formats a coordinate with one decimal.
func px(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }

// scheduleText shows a job's schedule as the record states it: a Cron
// spec as itself, in words where a descriptor has some; a duration
// policy in its own words.
func scheduleText(s string) string {
	spec, ok := strings.CutPrefix(s, `cron "`)
	if !ok {
		return s
	}
	end := strings.Index(spec, `"`)
	if end < 0 {
		return s
	}
	text, rest := spec[:end], spec[end+1:]
	words := map[string]string{
		"@yearly": "yearly", "@annually": "yearly", "@monthly": "monthly", "@weekly": "weekly",
		"@daily": "daily", "@midnight": "daily", "@hourly": "hourly",
	}
	if w, ok := words[text]; ok {
		text = w
	} else if d, ok := strings.CutPrefix(text, "@every "); ok {
		text = "every " + d
	}
	return text + rest
}
