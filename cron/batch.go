package cron

import (
	"context"
	"reflect"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wakuwaku-go/wakuwaku/internal/redisscript"
)

// A tick of many leased jobs comes due on every replica at one instant:
// the slots' owners claim theirs, the other replicas look at the rest
// (E13) a grace period later, all at once, and each run's completion
// follows. A command alone costs both sides a round trip, far more than
// the command itself; so the record's commands that come together on one
// client go in one pipeline.

// batchClient sends its callers' commands in batches, one pipeline each:
// a command that finds no batch on the wire goes at once, alone; those
// that come while one is on the wire go together in the next, as soon as
// it is back. So a lone command waits for nothing, and commands that come
// faster than one round trip share one. It serves the record's scripts of
// a Db that waits for no replicas, and its looks; a WAIT must follow its
// script on the same connection, which a batch does not promise.
type batchClient struct {
	c redisscript.Client

	mu   sync.Mutex
	busy bool   // a batch is on the wire
	next *batch // the commands waiting for the next
}

// batch is commands sent in one pipeline; sent is closed once each has
// its reply or its error. It is sent under the latest deadline of its
// callers' contexts, or none if one of them has none: the go-redis
// client's own timeouts still bound it.
type batch struct {
	cmds     []redis.Cmder
	deadline time.Time
	open     bool // a caller's context has no deadline
	sent     chan struct{}
}

// Process sends cmd in the next batch and returns its error once the batch
// is back. It does not return when ctx ends: the command is the batch's
// until then, as a command a client has sent is its connection's.
func (b *batchClient) Process(ctx context.Context, cmd redis.Cmder) error {
	b.mu.Lock()
	bt := b.next
	if bt == nil {
		bt = &batch{sent: make(chan struct{})}
		b.next = bt
	}
	bt.cmds = append(bt.cmds, cmd)
	if d, ok := ctx.Deadline(); !ok {
		bt.open = true
	} else if d.After(bt.deadline) {
		bt.deadline = d
	}
	if !b.busy {
		b.busy, b.next = true, nil
		go b.send(context.WithoutCancel(ctx), bt)
	}
	b.mu.Unlock()
	<-bt.sent
	return cmd.Err()
}

// send sends bt, then each batch that gathered meanwhile, until none did.
// Not under a caller's context, which may end before the others': the
// batch is theirs too.
func (b *batchClient) send(base context.Context, bt *batch) {
	for bt != nil {
		ctx, cancel := base, context.CancelFunc(func() {})
		if !bt.open {
			ctx, cancel = context.WithDeadline(base, bt.deadline)
		}
		if len(bt.cmds) == 1 {
			_ = redisscript.Process(ctx, b.c, bt.cmds[0])
		} else {
			_ = pipelined(ctx, b.c, bt.cmds) // each command holds its own error
		}
		cancel()
		close(bt.sent)
		b.mu.Lock()
		bt, b.next = b.next, nil
		if bt == nil {
			b.busy = false
		}
		b.mu.Unlock()
	}
}

// batchFor returns the client for s's claims, completions and looks: the
// runtime's batchClient of s's client, one per client, if s's Db waits for
// no replicas and its client's type can key a map; else the client itself.
func (r *Runtime) batchFor(s *jobState) redisscript.Client {
	if s.repl.N > 0 || !reflect.TypeOf(s.c).Comparable() {
		return s.c
	}
	r.batchMu.Lock()
	defer r.batchMu.Unlock()
	b := r.batches[s.c]
	if b == nil {
		if r.batches == nil {
			r.batches = make(map[any]*batchClient)
		}
		b = &batchClient{c: s.c}
		r.batches[s.c] = b
	}
	return b
}
