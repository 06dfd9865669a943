package cron

import (
	"reflect"

	"github.com/wakuwaku-go/wakuwaku/cron/internal/record"
	"github.com/wakuwaku-go/wakuwaku/internal/cronhook"
	"github.com/wakuwaku-go/wakuwaku/internal/redisscript"
)

// batchFor returns the clients for s's claims and looks, and for its
// completions: the runtime's record.Batcher of s's client, one per client,
// if s's DB waits for no replicas and its client can key a map; else the
// client itself.
func (l *leasedJobs) batchFor(s *jobState) (redisscript.Client, redisscript.Client) {
	if s.Repl.N > 0 || !reflect.ValueOf(s.C).Comparable() {
		return s.C, s.C
	}
	l.batchMu.Lock()
	defer l.batchMu.Unlock()
	b := l.batches[s.C]
	if b == nil {
		if l.batches == nil {
			l.batches = make(map[any]*record.Batcher)
		}
		size := 0
		if cronhook.BatchSize != nil {
			size = cronhook.BatchSize(s.C)
		}
		b = record.NewBatcher(s.C, size)
		l.batches[s.C] = b
	}
	return b, b.Later()
}
