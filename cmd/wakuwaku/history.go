package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/wakuwaku-go/wakuwaku/cron"
)

// printHistory prints what status shows of one job below its row: its
// schedule, its last success, a failed slot's used-up attempts, and its
// recent runs, newest first, each with when it started, on which
// replica, why, how late, how long, how it ended and its error's first
// line.
func printHistory(out io.Writer, st cron.JobStatus) error {
	now := time.Now()
	fmt.Fprintln(out)
	if st.Schedule != "" {
		fmt.Fprintf(out, "schedule:      %s\n", printable(st.Schedule))
	}
	success := "none recorded"
	if !st.LastSuccess.IsZero() {
		ago := "just now"
		if d := now.Sub(st.LastSuccess).Round(time.Second); d > 0 {
			ago = d.String() + " ago"
		}
		success = fmt.Sprintf("%s (%s)", clock(st.LastSuccess), ago)
	}
	fmt.Fprintf(out, "last success:  %s\n", success)
	if st.SlotState == "failed" {
		why := "attempts used up"
		for _, r := range st.History {
			if r.Slot == st.Slot && r.Reason != "" {
				why = printable(r.Reason) // a completion closed it: claim window over
				break
			}
		}
		fmt.Fprintf(out, "slot %s:  failed, %s (%d)\n", slotText(st.Slot), why, st.Attempts)
	}
	if len(st.History) == 0 {
		fmt.Fprintln(out, "no runs recorded")
		return nil
	}
	fmt.Fprintf(out, "\nlast %d runs, newest first:\n", len(st.History))
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "SLOT\tSTARTED\tREPLICA\tTRIGGER\tATTEMPT\tLAG\tDURATION\tOUTCOME\tERROR")
	for _, r := range st.History {
		lag := "-"
		if !r.Scheduled.IsZero() {
			lag = max(r.Started.Sub(r.Scheduled), 0).Round(time.Millisecond).String()
		}
		took := "-"
		if !r.Finished.IsZero() {
			took = r.Duration.Round(time.Millisecond).String()
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", slotText(r.Slot), dated(r.Started), printable(r.Replica), r.Trigger,
			r.Attempt, lag, took, outcomeText(r), firstLine(r.Error, 60))
	}
	return w.Flush()
}

// outcomeText shows how a history's entry ended, with its reason if it
// has one: "skipped (paused)", "error (claim window over)".
func outcomeText(r cron.RunRecord) string {
	if r.Reason == "" {
		return r.Outcome
	}
	return r.Outcome + " (" + printable(r.Reason) + ")"
}

// firstLine returns s's first line, cut to n runes, or "-" for none.
func firstLine(s string, n int) string {
	s, _, _ = strings.Cut(s, "\n")
	if s == "" {
		return "-"
	}
	if r := []rune(s); len(r) > n {
		s = string(r[:n-1]) + "…"
	}
	return printable(s)
}

// dated shows a time with its date, in UTC: a history spans days.
func dated(t time.Time) string {
	return t.UTC().Format("2006-01-02 15:04:05Z")
}

// slotText shows a run's slot, "-" if the record has none.
func slotText(slot string) string {
	if slot == "" {
		return "-"
	}
	return printable(slot)
}
