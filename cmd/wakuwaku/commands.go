package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/redis/go-redis/v9"

	"github.com/wakuwaku-go/wakuwaku/cron"
)

func (t *tool) status(ctx context.Context, admin cron.Admin, rest []string, asJSON bool) error {
	var err error
	var jobs []cron.JobStatus
	switch len(rest) {
	case 0:
		if jobs, err = admin.Jobs(ctx); err != nil {
			return err
		}
	case 1:
		st, err := admin.Status(ctx, rest[0])
		if err != nil {
			return err
		}
		jobs = []cron.JobStatus{st}
	}
	if asJSON {
		enc := json.NewEncoder(t.out)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false) // the records' text as it is: <, > and & too
		if len(rest) == 1 {
			return enc.Encode(jobs[0])
		}
		if jobs == nil {
			jobs = []cron.JobStatus{}
		}
		return enc.Encode(jobs)
	}
	if len(jobs) == 0 {
		fmt.Fprintln(t.out, "no job records: no leased job runs against this Redis")
		return nil
	}
	now := time.Now()
	w := tabwriter.NewWriter(t.out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "JOB\tLAST SLOT\tREPLICA\tOUTCOME\tDURATION\tRUNNING\tPAUSED\tNEXT DUE\tLAST FAILURE")
	for _, j := range jobs {
		slot, replica, outcome, took := "-", "-", "-", "-"
		if l := j.Last; l != nil {
			// Every string from the record goes through printable: a
			// replica's name may hold a terminal's escape sequence or a tab.
			slot, replica, outcome, took = slotText(l.Slot), printable(l.Replica), printable(l.Outcome), l.Duration.Round(time.Millisecond).String()
			switch {
			case j.SlotState == "failed" && j.Slot == l.Slot:
				// The slot used up its attempts: no replica tries it again.
				outcome += fmt.Sprintf(" (failed, %s)", plural(j.Attempts, "attempt"))
			case l.Trigger != cron.TriggerSchedule || l.Attempt > 1:
				outcome += fmt.Sprintf(" (%s, attempt %d)", l.Trigger, l.Attempt)
			}
		}
		running := "-"
		if r := j.Running; r != nil {
			running = fmt.Sprintf("on %s since %s", printable(r.Replica), clock(r.Started))
			if r.Deadline.Before(now) {
				running += ", lease expired"
			}
		}
		paused := "no"
		if j.Paused {
			paused = "since " + clock(j.PausedAt)
		}
		next := "-"
		if !j.NextDue.IsZero() {
			next = fmt.Sprintf("%s (%s)", clock(j.NextDue), relative(j.NextDue.Sub(now)))
		}
		if j.RunRequested {
			next += ", run requested"
		}
		failure := "-"
		if f := j.LastFailure; f != nil {
			text := f.Error
			if text == "" {
				text = f.Outcome // a lost run has no error text
			}
			failure = clock(f.Started) + " " + cut(text, failureWidth)
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", printable(j.Job), slot, replica, outcome, took, running, paused, next, failure)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if len(rest) == 1 {
		return printHistory(t.out, jobs[0])
	}
	return printReplicas(ctx, t, admin)
}

// printReplicas lists the live replicas after the jobs' table, by group.
func printReplicas(ctx context.Context, t *tool, admin cron.Admin) error {
	reps, err := admin.Replicas(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(t.out, "\n%s live:\n", plural(len(reps), "replica"))
	w := tabwriter.NewWriter(t.out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "REPLICA\tGROUP\tLIVE UNTIL")
	for _, r := range reps {
		fmt.Fprintf(w, "%s\t%s\t%s (%s)\n", printable(r.Name), printable(r.Group), clock(r.LiveUntil), relative(time.Until(r.LiveUntil)))
	}
	return w.Flush()
}

// failureWidth is how many characters of the last failure's error the
// table shows; status -json has all the record keeps.
const failureWidth = 60

// cut keeps s to one line of at most n characters, the last of them an
// ellipsis if it was longer. Control characters, which would break the
// table, show as spaces.
func cut(s string, n int) string {
	s = strings.Join(strings.FieldsFunc(s, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }), " ")
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// plural says "1 attempt", "3 attempts".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}

// clock shows a time of day in UTC, with the date if it is not today's.
func clock(t time.Time) string {
	t = t.UTC()
	if y, m, d := t.Date(); y == time.Now().UTC().Year() && m == time.Now().UTC().Month() && d == time.Now().UTC().Day() {
		return t.Format("15:04:05Z")
	}
	return t.Format("2006-01-02 15:04:05Z")
}

// relative shows how far d is from now: "in 12m3s", "5s ago".
func relative(d time.Duration) string {
	d = d.Round(time.Second)
	if d < 0 {
		return (-d).String() + " ago"
	}
	return "in " + d.String()
}

// printable quotes a name that holds bytes a terminal would not show.
func printable(s string) string {
	for _, r := range s {
		if r < ' ' || r == utf8.RuneError || r == 0x7f {
			return strconv.Quote(s)
		}
	}
	return s
}

// heldLock is one lock held now.
type heldLock struct {
	kind, namespace, name string
	ttl                   time.Duration // the Lock's, or the RWLock writer's; 0 if none
	readers               int
	longestRead           time.Duration
}

func (t *tool) locks(ctx context.Context, ns string) error {
	var mu sync.Mutex
	found := make(map[string]*heldLock)
	scan := func(ctx context.Context, node redis.Cmdable) error {
		now, err := node.Time(ctx).Result()
		if err != nil {
			return err
		}
		iter := node.Scan(ctx, 0, entityPrefix+"*", 1000).Iterator()
		for iter.Next(ctx) {
			if err := t.inspect(ctx, node, iter.Val(), now, ns, &mu, found); err != nil {
				return err
			}
		}
		return iter.Err()
	}
	var err error
	if cl, ok := t.rdb.(*redis.ClusterClient); ok {
		err = cl.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error { return scan(ctx, m) })
	} else {
		err = scan(ctx, t.rdb)
	}
	if err != nil {
		return fmt.Errorf("listing the locks: %w", err)
	}
	held := make([]*heldLock, 0, len(found))
	for _, l := range found {
		if l.ttl > 0 || l.readers > 0 {
			held = append(held, l)
		}
	}
	slices.SortFunc(held, func(a, b *heldLock) int {
		return strings.Compare(a.kind+"\x00"+a.namespace+"\x00"+a.name, b.kind+"\x00"+b.namespace+"\x00"+b.name)
	})
	if len(held) == 0 {
		fmt.Fprintln(t.out, "no locks held")
		return nil
	}
	w := tabwriter.NewWriter(t.out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "KIND\tNAMESPACE\tNAME\tTTL\tREADERS")
	for _, l := range held {
		ttl, readers := "-", "-"
		if l.ttl > 0 {
			ttl = l.ttl.Round(time.Millisecond).String()
		}
		if l.kind == "RwLock" {
			if l.ttl > 0 {
				ttl += " (writer)"
			}
			if l.readers > 0 {
				readers = fmt.Sprintf("%d, longest %v", l.readers, l.longestRead.Round(time.Millisecond))
			} else {
				readers = "0"
			}
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", l.kind, l.namespace, printable(l.name), ttl, readers)
	}
	return w.Flush()
}

// inspect adds what key holds to found, unless it is outside namespace
// ns (if set) or no lock's key.
func (t *tool) inspect(ctx context.Context, node redis.Cmdable, key string, now time.Time, ns string, mu *sync.Mutex, found map[string]*heldLock) error {
	k, err := parseLockKey(key)
	if err != nil {
		return nil // not a lock: a fencing counter, say
	}
	l := heldLock{kind: k.kind, namespace: k.namespace, name: k.name}
	reader := k.role == roleReaders
	if ns != "" && l.namespace != ns {
		return nil
	}
	id := k.kind + "\x00" + l.namespace + "\x00" + l.name
	if reader {
		ms := now.UnixMilli()
		live, err := node.ZRangeByScoreWithScores(ctx, key, &redis.ZRangeBy{Min: strconv.FormatInt(ms, 10), Max: "+inf"}).Result()
		if err != nil {
			return err
		}
		l.readers = len(live)
		if n := len(live); n > 0 {
			l.longestRead = time.Duration(int64(live[n-1].Score)-ms) * time.Millisecond
		}
	} else {
		ttl, err := node.PTTL(ctx, key).Result()
		if err != nil {
			return err
		}
		if ttl > 0 {
			l.ttl = ttl
		}
	}
	mu.Lock()
	defer mu.Unlock()
	prev := found[id]
	if prev == nil {
		found[id] = &l
		return nil
	}
	if reader {
		prev.readers, prev.longestRead = l.readers, l.longestRead
	} else {
		prev.ttl = l.ttl
	}
	return nil
}
