package cron

import (
	"cmp"
	"context"
	"reflect"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wakuwaku-go/wakuwaku/internal/redisscript"
)

// A tick of many leased jobs comes due on every replica at one instant,
// and each replica owns a share of the slots: it looks at the others'
// (E13) one grace period later, all at once. A look is a command of its
// own, and a round trip costs both sides far more than the command: so
// the looks that come due together on one client go in one pipeline.

// lookGather is how long the first look of a batch waits for the looks
// due with it to join, before it sends them all.
const lookGather = time.Millisecond

// lookBatcher gathers looks by client.
type lookBatcher struct {
	gather  time.Duration // lookGather if 0
	mu      sync.Mutex
	pending map[redisscript.Client]*lookBatch
}

// lookBatch is the looks gathered on one client, and closes sent once
// their pipeline's replies came back (or its error).
type lookBatch struct {
	cmds []redis.Cmder
	sent chan struct{}
}

// process sends cmd on c with the other looks due with it, and returns
// its error. A client whose type can't be a map key (no client of
// go-redis's) sends its looks one by one.
func (b *lookBatcher) process(ctx context.Context, c redisscript.Client, cmd redis.Cmder) error {
	if b == nil || !reflect.TypeOf(c).Comparable() {
		return redisscript.Process(ctx, c, cmd)
	}
	b.mu.Lock()
	bt := b.pending[c]
	first := bt == nil
	if first {
		if b.pending == nil {
			b.pending = make(map[redisscript.Client]*lookBatch)
		}
		bt = &lookBatch{sent: make(chan struct{})}
		b.pending[c] = bt
	}
	bt.cmds = append(bt.cmds, cmd)
	b.mu.Unlock()
	if !first {
		select {
		case <-bt.sent:
			return cmd.Err()
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
	// The first look sends the batch, whoever's looks joined it: not
	// under its own context, which may end before the others' do.
	time.Sleep(cmp.Or(b.gather, lookGather))
	b.mu.Lock()
	delete(b.pending, c)
	b.mu.Unlock()
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), beatTimeout)
	_ = pipelined(sctx, c, bt.cmds) // each command holds its own error
	cancel()
	close(bt.sent)
	return cmd.Err()
}
