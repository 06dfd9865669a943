package record

import (
	"cmp"
	"context"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wakuwaku-go/wakuwaku/internal/cronhook"
	"github.com/wakuwaku-go/wakuwaku/internal/redisscript"
)

// A tick of many leased jobs comes due on every replica at one instant:
// the slots' owners claim theirs, the other replicas look at the rest
// (E13) a grace period later, all at once, and each run's completion
// follows. A command alone costs both sides a round trip, far more than
// the command itself; so the record's commands that come together on one
// client go in one pipeline.

// Batcher sends its callers' commands in batches, one pipeline each,
// with up to wire batches on the wire at once and at most size commands in
// each. A command that finds fewer than wire batches on the wire goes at
// once, alone; those that come while wire are out wait, in batches of up to
// size, for the first to come back. So a lone command waits for nothing,
// commands that come faster than round trips share them, and a burst of
// thousands is answered batch by batch as Redis gets through it, not all
// at the end. It serves the record's scripts of a DB that waits for no
// replicas, and its looks; a WAIT must follow its script on the same
// connection, which a batch does not promise.
type Batcher struct {
	c          redisscript.Client
	wire, size int // 0: batchWire, batchSize

	mu  sync.Mutex
	out int // batches on the wire
	// The batches to send next, in order, the claims' and looks' before
	// the completions' (later); only the last of each may have room.
	waiting, later []*batch
}

// laterClient sends through its Batcher after the claims and looks
// waiting then, up to wire batches of them: a completion's reply starts no
// run, and each completion sent before a claim would delay that run by its
// time on Redis.
type laterClient struct{ b *Batcher }

func (l laterClient) Process(ctx context.Context, cmd redis.Cmder) error {
	return l.b.process(ctx, cmd, true)
}

// batchWire and batchSize are a Batcher's default bounds: a few
// pipelines on the wire keep the client's encoding and decoding going
// while Redis runs the scripts of another, and a batch of 256 claims takes
// Redis a few milliseconds.
const (
	batchWire = 4
	batchSize = 256
)

// batch is commands sent in one pipeline; sent is closed once each has
// its reply or its error. It is sent under the latest deadline of its
// callers' contexts, or none if one of them has none: the go-redis
// client's own timeouts still bound it.
type batch struct {
	cmds     []redis.Cmder
	deadline time.Time
	open     bool // a caller's context has no deadline
	sent     chan struct{}
	passed   int // for a batch of completions, the batches of claims and looks sent before it while it waited
}

func (bt *batch) add(ctx context.Context, cmd redis.Cmder) {
	bt.cmds = append(bt.cmds, cmd)
	if d, ok := ctx.Deadline(); !ok {
		bt.open = true
	} else if d.After(bt.deadline) {
		bt.deadline = d
	}
}

// Process sends cmd in a batch and returns its error once the batch is
// back. It does not return when ctx ends: the command is the batch's until
// then, as a command a client has sent is its connection's. A command
// whose ctx has ended already is not sent, as a go-redis client sends
// none: so once the runtime's context ends, nothing more goes.
func (b *Batcher) Process(ctx context.Context, cmd redis.Cmder) error {
	return b.process(ctx, cmd, false)
}

func (b *Batcher) process(ctx context.Context, cmd redis.Cmder, later bool) error {
	if err := ctx.Err(); err != nil {
		cmd.SetErr(err)
		return err
	}
	wire, size := cmp.Or(b.wire, batchWire), cmp.Or(b.size, batchSize)
	b.mu.Lock()
	q := &b.waiting
	if later {
		q = &b.later
	}
	var bt *batch
	switch n := len(*q); {
	case b.out < wire: // none waits: a batch waits only while wire are out
		b.out++
		bt = &batch{sent: make(chan struct{})}
		bt.add(ctx, cmd)
		go b.send(context.WithoutCancel(ctx), bt)
	case n > 0 && len((*q)[n-1].cmds) < size:
		bt = (*q)[n-1]
		bt.add(ctx, cmd)
	default:
		bt = &batch{sent: make(chan struct{})}
		bt.add(ctx, cmd)
		*q = append(*q, bt)
		if cronhook.Queued != nil {
			cronhook.Queued(b.c, later)
		}
	}
	b.mu.Unlock()
	<-bt.sent
	return cmd.Err()
}

// send sends bt, then the batches that wait, until none does: first come
// first, the claims' and looks' before the completions', but a batch of
// completions lets at most wire others pass it, so that under a backlog
// that never ends (more jobs than Redis keeps up with) completions still
// go, and a run's completion is not held back past its job's next claim
// for long. Not under a caller's context, which may end before the
// others': the batch is theirs too.
func (b *Batcher) send(base context.Context, bt *batch) {
	wire := cmp.Or(b.wire, batchWire)
	for bt != nil {
		ctx, cancel := base, context.CancelFunc(func() {})
		if !bt.open {
			ctx, cancel = context.WithDeadline(base, bt.deadline)
		}
		if len(bt.cmds) == 1 {
			_ = processOne(ctx, b.c, bt.cmds[0])
		} else {
			_ = Pipelined(ctx, b.c, bt.cmds) // each command holds its own error
		}
		cancel()
		close(bt.sent)
		b.mu.Lock()
		switch {
		case len(b.waiting) > 0 && (len(b.later) == 0 || b.later[0].passed < wire):
			if len(b.later) > 0 {
				b.later[0].passed++
			}
			bt, b.waiting = pop(b.waiting)
			if cronhook.Dequeued != nil {
				cronhook.Dequeued(b.c, false)
			}
		case len(b.later) > 0:
			if len(b.waiting) > 0 && cronhook.CompletionsFirst != nil {
				cronhook.CompletionsFirst(b.c)
			}
			bt, b.later = pop(b.later)
			if cronhook.Dequeued != nil {
				cronhook.Dequeued(b.c, true)
			}
		default:
			bt = nil
			b.out--
		}
		b.mu.Unlock()
	}
}

// NewBatcher returns a Batcher over c whose batches hold at most size
// commands (0: batchSize). Its Process sends the claims and looks, and
// Later's the completions.
func NewBatcher(c redisscript.Client, size int) *Batcher {
	return &Batcher{c: c, size: size}
}

// Later returns the client through which b sends completions: after the
// claims and looks that wait (see laterClient).
func (b *Batcher) Later() redisscript.Client { return laterClient{b} }

// pop returns q's first batch, and the rest.
func pop(q []*batch) (*batch, []*batch) {
	bt := q[0]
	q[0] = nil
	return bt, q[1:]
}

// Pipelined sends cmds in one round trip if c pipelines (every go-redis
// client does), else one by one, and returns the first error. Each command
// holds its own reply or error either way: the batches' callers read
// theirs, and a script's caller whose EVALSHA answered NOSCRIPT sends its
// source, whatever the commands beside it answered.
func Pipelined(ctx context.Context, c redisscript.Client, cmds []redis.Cmder) error {
	if p, ok := c.(interface {
		Pipelined(context.Context, func(redis.Pipeliner) error) ([]redis.Cmder, error)
	}); ok {
		_, err := p.Pipelined(ctx, func(pipe redis.Pipeliner) error {
			for _, cmd := range cmds {
				_ = pipe.Process(ctx, cmd)
			}
			return nil
		})
		if err != nil {
			return err
		}
		for _, cmd := range cmds {
			if err := cmd.Err(); err != nil {
				return err
			}
		}
		return nil
	}
	// One by one, every one of them, though one fails: a client without
	// Pipelined (a user's wrapper that has only Process) is no reason for
	// the commands after a NOSCRIPT to go unsent.
	var first error
	for _, cmd := range cmds {
		if err := processOne(ctx, c, cmd); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// processOne sends cmd through c and returns its error, which cmd holds
// too: a wrapper's Process may return an error it did not set on the
// command, and a batch's caller reads only the command.
func processOne(ctx context.Context, c redisscript.Client, cmd redis.Cmder) error {
	err := redisscript.Process(ctx, c, cmd)
	if err != nil && cmd.Err() == nil {
		cmd.SetErr(err)
	}
	return err
}
