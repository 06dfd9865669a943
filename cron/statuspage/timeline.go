package statuspage

import (
	"cmp"
	"fmt"
	"html"
	"html/template"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/wakuwaku-go/wakuwaku/cron"
	"github.com/wakuwaku-go/wakuwaku/interval"
)

// The timeline of a job's recent slots is an SVG drawn here, inline in the
// page, so that the page stays one document without script or image
// requests. It plots time: from the earliest slot of the job's history on
// the left to now on the right, on one scale. Each slot has a mark on the
// axis where it began, coloured by how it went; its attempts are bars on
// a line from that mark, each from when it started for as long as it took
// (or, running, until now), coloured by its outcome. A slot that its Cron
// schedule had between the history's slots, but of which the history has
// no run, is marked missed; an entry whose outcome is "skipped" is marked
// skipped, with its reason. Below the SVG the page says the same in words (timelineView),
// so nothing needs a hover.
//
// The SVG stretches to its cell's width (preserveAspectRatio none), so it
// holds only rectangles and lines, whose strokes don't scale.
const (
	timelineWidth  = 600.0 // the viewBox's units across
	timelineHeight = 34    // px, the viewBox's units down
	timelineMargin = 4.0   // units left and right, for the first and last marks
	minBar         = 3.0   // units: a run that took no time
	markWidth      = 3.0   // units
	// maxMissed is how many slots the page looks for between the
	// history's first and last: a paused job of a frequent schedule
	// could have missed more than a timeline could show.
	maxMissed = 1000
)

// The slot states, as a mark's data-outcome and class: a slot in which an
// attempt succeeded, one whose attempts all failed, one being run, one the
// history has no run of, and one the history says was skipped.
const (
	slotOK      = "ok"
	slotFailed  = "failed"
	slotRunning = "running"
	slotMissed  = "missed"
	slotSkipped = "skipped"
)

// outcomeColors are the colours of the attempts' bars, by outcome, and of
// the slots' marks, by state; the legend's swatches in style.css use the
// same.
var outcomeColors = map[string]string{
	"ok":        "#3aa365",
	"error":     "#d64537",
	"panic":     "#8e1b12",
	"timeout":   "#e08a00",
	"lost":      "#9aa4b1",
	"running":   "#3d74e0",
	slotFailed:  "#d64537",
	slotMissed:  "#b3261e",
	slotSkipped: "#7d8796",
}

// otherColor is the colour of an outcome this package does not know.
const otherColor = "#6b4fbb"

// color is the colour of an outcome or a slot state.
func color(o string) string {
	if c, ok := outcomeColors[o]; ok {
		return c
	}
	return otherColor
}

// timelineView is a job's timeline: the SVG, its axis's ends, and the same
// in words.
type timelineView struct {
	SVG      template.HTML
	From, To string // the axis's ends
	Summary  string // "12 slots: 10 ok, 1 failed (error), 1 missed"
	Slots    []slotView
}

// slotView is one slot in words, for the details below the timeline.
type slotView struct {
	Slot     string // its key, or when it began
	Result   string // "ok", "ok on retry", "failed (timeout)", "missed", ...
	Class    string // the pill's class
	Attempts []attemptLine
}

// attemptLine is an attempt, or a skip, in words.
type attemptLine struct {
	Text, Error string
}

// slot is one slot of a job's timeline, as the history tells it.
type slot struct {
	key      string
	start    time.Time
	state    string
	result   string
	attempts []attempt
	skips    []attempt // the history's entries that say it was skipped
}

// attempt is a run of a slot; running is the run in progress.
type attempt struct {
	cron.RunRecord
	running bool
}

// timeline draws the slots of history (newest first, as the record keeps
// them) and of the run in progress, if any, as of now, for a job of the
// given schedule (JobStatus.Schedule); nil if there is no history.
func timeline(history []cron.RunRecord, running *cron.RunRecord, schedule string, now time.Time) *timelineView {
	if len(history) == 0 {
		return nil
	}
	slots := slotsOf(history, running)
	slots = append(slots, missed(slots, schedule)...)
	slices.SortStableFunc(slots, func(a, b *slot) int { return a.start.Compare(b.start) })

	from, to := slots[0].start, now
	for _, s := range slots {
		for _, a := range s.attempts {
			from = minTime(from, a.Started)
			to = maxTime(to, a.Started.Add(a.took(now)))
		}
	}
	scale := 0.0 // units per nanosecond
	if span := to.Sub(from); span > 0 {
		scale = (timelineWidth - 2*timelineMargin) / float64(span)
	}
	x := func(t time.Time) float64 { return timelineMargin + scale*float64(t.Sub(from)) }

	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="timeline" viewBox="0 0 %s %d" preserveAspectRatio="none" role="img" aria-label="%d slots from %s to %s">`,
		px(timelineWidth), timelineHeight, len(slots), clock(from, now), clock(to, now))
	// The axis.
	fmt.Fprintf(&b, `<line class="axis" x1="0" y1="24" x2="%s" y2="24" stroke="#c5ccd8" stroke-width="1" vector-effect="non-scaling-stroke"/>`, px(timelineWidth))
	for i, s := range slots {
		sx := x(s.start)
		fmt.Fprintf(&b, `<g data-slot="%s" data-outcome="%s">`, html.EscapeString(s.key), s.state)
		switch s.state {
		case slotMissed, slotSkipped:
			// The stretch until the next slot, or a mark's width: a band
			// where a run should have been.
			end := sx + markWidth
			if i+1 < len(slots) {
				end = max(end, x(slots[i+1].start)-1)
			}
			fmt.Fprintf(&b, `<rect class="band" x="%s" y="3" width="%s" height="18" fill="%s" fill-opacity=".16"/>`,
				px(sx), px(end-sx), color(s.state))
		}
		if len(s.attempts) > 0 {
			// The line that groups the slot's attempts, from its mark to
			// the end of its last attempt: the gap before the first bar is
			// how late it started.
			last := s.attempts[len(s.attempts)-1]
			fmt.Fprintf(&b, `<line x1="%s" y1="12" x2="%s" y2="12" stroke="#c5ccd8" stroke-width="2" vector-effect="non-scaling-stroke"/>`,
				px(sx), px(x(last.Started.Add(last.took(now)))))
		}
		for _, a := range s.attempts {
			outcome := a.Outcome
			if a.running {
				outcome = "running"
			}
			fmt.Fprintf(&b, `<rect class="run" data-outcome="%s" x="%s" y="4" width="%s" height="16" rx="1" fill="%s"><title>%s</title></rect>`,
				html.EscapeString(outcome), px(x(a.Started)), px(max(minBar, scale*float64(a.took(now)))), color(outcome),
				html.EscapeString(strings.TrimSpace(a.describe(now)+"\n"+a.Error)))
		}
		fmt.Fprintf(&b, `<rect class="mark" x="%s" y="22" width="%s" height="12" fill="%s"><title>%s</title></rect></g>`,
			px(sx-markWidth/2), px(markWidth), color(s.state), html.EscapeString(s.key+": "+s.result))
	}
	b.WriteString(`</svg>`)

	v := &timelineView{SVG: template.HTML(b.String()), From: clock(from, now), To: "now"}
	if to.After(now) {
		v.To = clock(to, now)
	}
	v.Summary = summary(slots)
	for i := len(slots) - 1; i >= 0; i-- { // newest first, as the history
		v.Slots = append(v.Slots, slots[i].view(now))
	}
	return v
}

// slotsOf groups history and running by slot, each slot's attempts in the
// order they started.
func slotsOf(history []cron.RunRecord, running *cron.RunRecord) []*slot {
	byKey := map[string]*slot{}
	var slots []*slot
	add := func(a attempt) {
		s := byKey[a.Slot]
		if s == nil {
			s = &slot{key: a.Slot}
			byKey[a.Slot] = s
			slots = append(slots, s)
		}
		s.attempts = append(s.attempts, a)
	}
	for _, r := range history {
		add(attempt{RunRecord: r})
	}
	if running != nil {
		add(attempt{RunRecord: *running, running: true})
	}
	for _, s := range slots {
		slices.SortStableFunc(s.attempts, func(a, b attempt) int {
			return cmp.Or(a.Started.Compare(b.Started), cmp.Compare(a.Attempt, b.Attempt))
		})
		s.start = slotStart(s.key, s.attempts)
		s.state, s.result = judge(s.attempts)
		// A skipped entry is a mark, not a run.
		for _, a := range s.attempts {
			if a.Outcome == slotSkipped && !a.running {
				s.skips = append(s.skips, a)
			}
		}
		s.attempts = slices.DeleteFunc(s.attempts, func(a attempt) bool { return a.Outcome == slotSkipped && !a.running })
	}
	return slots
}

// judge says how a slot of attempts went: its state, and its result in
// words. A run-now request's run is filed under its slot but is none of
// its attempts: the slot is judged by its attempts alone, and by its
// requested runs only if it has no attempt.
func judge(attempts []attempt) (state, result string) {
	scheduled := slices.DeleteFunc(slices.Clone(attempts), func(a attempt) bool { return a.Trigger == cron.TriggerRequest })
	if len(scheduled) == 0 && len(attempts) > 0 {
		state, result = judgeAttempts(attempts)
		return state, "run on request: " + result
	}
	return judgeAttempts(scheduled)
}

// judgeAttempts is judge for a slot's attempts, in the order they began.
func judgeAttempts(attempts []attempt) (state, result string) {
	var failed []string
	ran, why := 0, ""
	for i, a := range attempts {
		switch {
		case a.running:
			return slotRunning, "running"
		case a.Outcome == "ok" && i == 0:
			return slotOK, "ok"
		case a.Outcome == "ok":
			return slotOK, "ok on retry"
		case a.Outcome == slotSkipped:
			why = cmp.Or(why, a.Reason)
			continue
		}
		ran++
		failed = append(failed, a.Outcome)
		why = a.Reason // a completion's: claim window over
	}
	switch {
	case ran == 0 && why != "":
		return slotSkipped, "skipped (" + why + ")"
	case ran == 0:
		return slotSkipped, "skipped"
	case why != "":
		return slotFailed, "failed (" + failed[len(failed)-1] + ", " + why + ")"
	}
	return slotFailed, "failed (" + failed[len(failed)-1] + ")"
}

// slotStart returns when the slot named key began: a Cron slot's key is
// its time; a duration policy's is the Unix millisecond it opened. For a
// key of neither form, the earliest time its attempts were due or began.
func slotStart(key string, attempts []attempt) time.Time {
	if t, ok := parseSlot(key); ok {
		return t
	}
	if ms, err := strconv.ParseInt(key, 10, 64); err == nil {
		return time.UnixMilli(ms)
	}
	t := attempts[0].Started
	for _, a := range attempts {
		if !a.Scheduled.IsZero() {
			t = minTime(t, a.Scheduled)
		}
	}
	return t
}

// parseSlot reads a Cron slot's key ([interval.Slot.Key]): an RFC 3339
// time, or a wall time followed by its zone's name in brackets.
func parseSlot(key string) (time.Time, bool) {
	if t, err := time.Parse(time.RFC3339Nano, key); err == nil {
		return t, true
	}
	wall, zone, ok := strings.Cut(strings.TrimSuffix(key, "]"), "[")
	if !ok || !strings.HasSuffix(key, "]") {
		return time.Time{}, false
	}
	loc, err := time.LoadLocation(zone)
	if err != nil {
		return time.Time{}, false
	}
	t, err := time.ParseInLocation("2006-01-02T15:04:05.999999999", wall, loc)
	return t, err == nil
}

// missed returns the slots of a Cron schedule, between the first and last
// of slots, that slots lack: slots nobody ran, or whose runs the history
// doesn't show. It returns none for a schedule that is not a Cron spec, and
// when the spec's slots, as the page computes them, don't name every slot
// of the history in that stretch (a spec read in a zone the page doesn't
// have): better no marks than wrong ones.
func missed(slots []*slot, schedule string) []*slot {
	spec, ok := cronSpec(schedule)
	if !ok {
		return nil
	}
	iv, err := interval.Cron(spec)
	if err != nil {
		return nil
	}
	var first, last *slot
	have := map[string]bool{}
	for _, s := range slots {
		if _, ok := parseSlot(s.key); !ok {
			return nil
		}
		have[s.key] = true
		if first == nil || s.start.Before(first.start) {
			first = s
		}
		if last == nil || s.start.After(last.start) {
			last = s
		}
	}
	loc := time.UTC
	if _, zone, ok := strings.Cut(first.key, "["); ok {
		loc, _ = time.LoadLocation(strings.TrimSuffix(zone, "]"))
	}
	var out []*slot
	seen := 0
	at := first.start.In(loc)
	for {
		next, ok := iv.NextSlot(at)
		if !ok || !next.Start.Before(last.start) {
			break
		}
		if len(out) == maxMissed {
			return nil
		}
		key, _ := next.Key()
		if have[key] {
			seen++
		} else {
			out = append(out, &slot{key: key, start: next.Start, state: slotMissed, result: "missed"})
		}
		at = next.Start
	}
	// Every slot of the history between the first and the last is one of
	// the spec's, or the page reads the spec otherwise than the replicas.
	between := 0
	for _, s := range slots {
		if s.start.After(first.start) && s.start.Before(last.start) {
			between++
		}
	}
	if seen != between {
		return nil
	}
	return out
}

// cronSpec returns the spec of a Cron schedule as JobStatus.Schedule
// states it (`cron "0 * * * *"`, maybe followed by ", spread 10m0s").
func cronSpec(schedule string) (string, bool) {
	rest, ok := strings.CutPrefix(schedule, "cron ")
	if !ok {
		return "", false
	}
	end := strings.LastIndex(rest, `"`)
	if end <= 0 {
		return "", false
	}
	spec, err := strconv.Unquote(rest[:end+1])
	return spec, err == nil
}

// summary says in words what slots are: "12 slots: 9 ok, 1 ok on retry,
// 1 failed (error), 1 missed".
func summary(slots []*slot) string {
	counts := map[string]int{}
	var order []string
	for _, s := range slots {
		if counts[s.result] == 0 {
			order = append(order, s.result)
		}
		counts[s.result]++
	}
	rank := func(r string) int {
		for i, p := range []string{"ok", "ok on retry", "failed", "missed", "skipped", "running"} {
			if strings.HasPrefix(r, p) {
				return i
			}
		}
		return 6
	}
	slices.SortStableFunc(order, func(a, b string) int { return cmp.Compare(rank(a), rank(b)) })
	parts := make([]string, 0, len(order))
	for _, r := range order {
		parts = append(parts, fmt.Sprintf("%d %s", counts[r], r))
	}
	n := "slots"
	if len(slots) == 1 {
		n = "slot"
	}
	return fmt.Sprintf("%d %s: %s", len(slots), n, strings.Join(parts, ", "))
}

// view is s in words.
func (s *slot) view(now time.Time) slotView {
	v := slotView{Slot: s.key, Result: s.result, Class: slotClass(s.state)}
	if s.state == slotMissed {
		v.Attempts = append(v.Attempts, attemptLine{Text: "no run of it in the history"})
	}
	for _, a := range s.skips {
		v.Attempts = append(v.Attempts, attemptLine{Text: "skipped on " + a.Replica + " at " + clock(a.Started, now), Error: cmp.Or(a.Reason, a.Error)})
	}
	for _, a := range s.attempts {
		v.Attempts = append(v.Attempts, attemptLine{Text: a.describe(now), Error: a.Error})
	}
	return v
}

// slotClass is the colour of a slot state's pill.
func slotClass(state string) string {
	switch state {
	case slotOK:
		return "ok"
	case slotFailed, slotMissed:
		return "bad"
	case slotRunning:
		return "running"
	}
	return "other"
}

// took is how long a ran: its Duration, as its entry says (a lost run's
// too), or, running, until now.
func (a attempt) took(now time.Time) time.Duration {
	if a.running {
		return max(now.Sub(a.Started), 0)
	}
	return max(a.Duration, 0)
}

// describe says what a did, in a line: "attempt 2 (retry) on replica-2 at
// 14:00:01Z: ok, 101ms, started 201ms late".
func (a attempt) describe(now time.Time) string {
	s := fmt.Sprintf("attempt %d", max(a.Attempt, 1))
	if a.Trigger != cron.TriggerSchedule {
		s += " (" + a.Trigger.String() + ")"
	}
	s += " on " + a.Replica + " at " + clock(a.Started, now) + ": "
	if a.running {
		return s + "running for " + since(a.Started, now)
	}
	s += a.Outcome
	if a.Reason != "" {
		s += " (" + a.Reason + ")"
	}
	s += ", " + a.Duration.Round(time.Millisecond).String()
	if !a.Scheduled.IsZero() {
		s += ", started " + lag(a.RunRecord).Round(time.Millisecond).String() + " late"
	}
	return s
}

// lag is how late r started after it was due, if its replica said when.
func lag(r cron.RunRecord) time.Duration {
	if r.Scheduled.IsZero() {
		return 0
	}
	return max(r.Started.Sub(r.Scheduled), 0)
}

// px formats a coordinate with one decimal.
func px(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

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
