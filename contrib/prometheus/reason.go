package prometheus

import "github.com/wakuwaku-go/wakuwaku/cron"

// reasonLabels are the values of the reason label, by the runtime's
// reason: short words, as a label value is, where the reasons are the
// sentences the runtime logs.
var reasonLabels = map[string]string{
	cron.ReasonLeaseHeld:       "lease_held",
	cron.ReasonRunning:         "running",
	cron.ReasonPaused:          "paused",
	cron.ReasonRetryWait:       "retry_wait",
	cron.ReasonAttemptsUsedUp:  "attempts_used_up",
	cron.ReasonTooLate:         "too_late",
	cron.ReasonStillRunning:    "still_running",
	cron.ReasonTooManyRuns:     "too_many_runs",
	cron.ReasonAdmissionFailed: "admission_failed",
	cron.ReasonNotAdmitted:     "not_admitted",
	cron.ReasonNotReplicated:   "not_replicated",
	// A slot that another replica's tick recorded skipped: that replica
	// counts the skip, with its own reason, and every other one counts
	// its tick here, so that the skips summed over the replicas are the
	// slots skipped.
	cron.ReasonSkippedElsewhere: "skipped_elsewhere",
}

// reasonOther is the reason label of every other reason: an Admission's
// own, or one the runtime added after this adapter. It keeps the label's
// values a small, fixed set whatever an Admission says.
const reasonOther = "other"

// reasonLabel returns the reason label of a skip's reason.
func reasonLabel(reason string) string {
	if l, ok := reasonLabels[reason]; ok {
		return l
	}
	return reasonOther
}

// elsewhere reports whether a tick that did not run found its slot in
// another replica's hands: the slot ran or runs there (lease_held,
// running), or waits for a retry that any replica may take (retry_wait).
// Such a tick is counted apart from the skips, so that a skip means a
// slot this replica knows was not run, what an alert should watch.
func elsewhere(reason string) bool {
	switch reason {
	case cron.ReasonLeaseHeld, cron.ReasonRunning, cron.ReasonRetryWait, cron.ReasonSkippedElsewhere:
		return true
	}
	return false
}
