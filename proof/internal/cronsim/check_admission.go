package cronsim

import (
	"strconv"
	"strings"
	"time"

	"github.com/wakuwaku-go/wakuwaku/cron"
)

// admissionWindow is how long before a skip for a failed admission the
// claim may have been sent: a read timeout of go-redis's, and a margin.
const admissionWindow = 10 * time.Second

// admissions checks I4's skips for a failed admission (the claim or look
// got an error, or a reply it could not read): none while Redis was well
// for the replica, its process running and its replies coming back, and
// its scripts cached (SCRIPT FLUSH, a restart or a failover empties the
// cache, and the runtime then sends each script's source, which must work
// as well, so a flush excuses nothing either). A command that timed out
// is excused: miniredis answers each command of a pipeline before it
// reads the next, over a connection without a buffer (net.Pipe), so a
// pipeline longer than what it reads at once (a batch of scripts' source
// after a flush) waits out the client's write timeout; a real server
// reads on while its replies queue.
func (c *checker) admissions(j *Job) {
	for _, l := range c.h.Logs {
		if l.Job != j.Name || l.Reason != cron.ReasonAdmissionFailed {
			continue
		}
		i, err := strconv.Atoi(strings.TrimPrefix(l.Replica, "replica-"))
		if err != nil || i < 0 || i >= Replicas {
			continue
		}
		from := l.At.Add(-admissionWindow)
		if strings.Contains(l.Err, "i/o timeout") || !c.healthy(from, l.At) || c.frozenDuring(i, from, l.At) || !c.liveThrough(i, from, l.At) || c.repliesLost(from, l.At) {
			continue
		}
		c.add("I4", "admission", j.Name, l.At, "replica %d skipped the tick scheduled at %s as %q, though Redis was well for %v before",
			i, stamp(l.Scheduled), l.Reason, admissionWindow)
	}
}

// repliesLost reports whether LoseReplies held at some time in [a, b].
func (c *checker) repliesLost(a, b time.Time) bool {
	for _, e := range c.sc.Events {
		if at := c.start.Add(e.At); e.Kind == LoseReplies && (span{at, at.Add(e.D)}).meets(a, b) {
			return true
		}
	}
	return false
}
