package cron

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// The runs that the scheduler hands out go to a pool of workers: a few
// goroutines that take chunks of runs from a FIFO, rather than a goroutine
// per run, which cost a goroutine's creation, its stack's growth and its
// scheduling for each of thousands of runs due at one instant.
//
// A worker runs a chunk's runs one after the other, so a run that takes
// long would hold up the runs behind it. So only the runs of quick jobs go
// to the workers: jobs without an admission (whose runs have nothing but
// Process to wait for) whose last run in a goroutine of its own took less
// than stragglerAfter. The others, and every job's first run, whose time
// nobody knows yet, get a goroutine each, as all runs once did. And a
// worker whose chunk is not done stragglerAfter after it began it (a quick
// job turned slow) is replaced: a new goroutine takes the rest of the
// chunk and the worker's place at the FIFO, the old one ends with the run
// it is in, and that run's job is no longer quick. A slow or blocked run
// holds a goroutine of its own and delays the others by stragglerAfter at
// most, once.

// stragglerAfter is how long a worker may spend on a chunk before the rest
// of the chunk and its place go to a new goroutine.
const stragglerAfter = time.Millisecond

// workQueue is how many chunks the FIFO holds; a chunk that finds it full
// gets a goroutine of its own.
const workQueue = 1024

// workerCount is how many workers a runtime keeps.
func workerCount() int { return max(2, runtime.GOMAXPROCS(0)) }

// chunk is runs handed to a worker together. The worker that took it and
// any that replaced it claim its runs one at a time, and the last of them
// to let go of it puts it back in its pool.
type chunk struct {
	runs [dispatchChunk]*runArgs
	n    int32
	next atomic.Int32 // the next run to claim
	refs atomic.Int32 // the workers holding it
}

var chunks = sync.Pool{New: func() any { return new(chunk) }}

// newChunk returns an empty chunk, held by the worker it will be handed to.
func newChunk() *chunk {
	c := chunks.Get().(*chunk)
	c.refs.Store(1)
	return c
}

func (c *chunk) add(a *runArgs) {
	c.runs[c.n] = a
	c.n++
}

// claim returns the next run of c that nobody has taken, or nil.
func (c *chunk) claim() *runArgs {
	i := c.next.Add(1) - 1
	if i >= c.n {
		return nil
	}
	a := c.runs[i]
	c.runs[i] = nil
	return a
}

// release lets go of c, and puts it back in its pool if nobody holds it.
func (c *chunk) release() {
	if c.refs.Add(-1) == 0 {
		c.n = 0
		c.next.Store(0)
		chunks.Put(c)
	}
}

// pool is the runtime's workers and the runs in goroutines of their own:
// it runs what the scheduler hands it, and cancels a removed job's runs.
type pool struct {
	run  func(ctx context.Context, a *runArgs) // Runtime.run
	idle <-chan struct{}                       // closed when the runtime is stopped and idle

	// work is the FIFO of chunks waiting for a worker, and workers counts
	// the goroutines that take them and the runs of their own.
	work    chan *chunk
	workers sync.WaitGroup

	// The runs in progress that Remove may have to cancel: the workers,
	// each on one run at a time, and the runs in a goroutine of their own.
	runsMu    sync.Mutex
	workerSet map[*worker]struct{}
	aloneRuns map[*runArgs]context.CancelCauseFunc
}

// newPool returns a pool that runs its runs with run, and whose workers
// end once idle is closed. start starts them.
func newPool(run func(context.Context, *runArgs), idle <-chan struct{}) *pool {
	return &pool{
		run: run, idle: idle,
		work:      make(chan *chunk, workQueue),
		workerSet: make(map[*worker]struct{}),
		aloneRuns: make(map[*runArgs]context.CancelCauseFunc),
	}
}

// wait waits for the workers and the runs of their own to end.
func (p *pool) wait() { p.workers.Wait() }

// alone runs a in a goroutine of its own, under a context of its own that
// Remove can cancel.
func (p *pool) alone(ctx context.Context, a *runArgs) {
	a.alone = true
	p.workers.Add(1)
	go func() {
		defer p.workers.Done()
		ctx, cancel := context.WithCancelCause(ctx)
		p.runsMu.Lock()
		p.aloneRuns[a] = cancel
		p.runsMu.Unlock()
		returned := false
		defer func() {
			p.runsMu.Lock()
			delete(p.aloneRuns, a)
			p.runsMu.Unlock()
			cancel(nil)
			if returned { // else the job called runtime.Goexit: a is dropped
				putRun(a)
			}
		}()
		p.run(ctx, a)
		returned = true
	}()
}

// worker is one worker goroutine's state, which its straggler timer and
// Remove read.
type worker struct {
	timer *time.Timer // fires stragglerAfter into a chunk

	mu       sync.Mutex
	chunk    *chunk // the chunk in progress, nil between chunks
	replaced bool   // another goroutine took the rest of chunk, and its place
	// The job whose run is in progress, or was last, and the runs'
	// context, which Remove cancels when it gives up waiting for that
	// run: the next run gets a new one.
	running   *entry
	ctx       context.Context
	cancel    context.CancelCauseFunc
	cancelled bool
}

// start starts the pool's workers.
func (p *pool) start(ctx context.Context) {
	for range workerCount() {
		p.workers.Add(1)
		go p.worker(ctx, nil, true)
	}
}

// hand gives a chunk to the workers.
func (p *pool) hand(ctx context.Context, c *chunk) {
	select {
	case p.work <- c:
	default:
		// Every worker is busy and the FIFO is full: a goroutine of its
		// own, which ends with the chunk.
		p.workers.Add(1)
		go p.worker(ctx, c, false)
	}
}

// worker runs chunks: c first, if not nil, then, if it stays, chunks from
// the FIFO until the runtime is stopped and idle. It ends early when
// another goroutine replaced it (see stragglerAfter).
func (p *pool) worker(ctx context.Context, c *chunk, stay bool) {
	w := new(worker)
	w.ctx, w.cancel = context.WithCancelCause(ctx)
	p.runsMu.Lock()
	p.workerSet[w] = struct{}{}
	p.runsMu.Unlock()
	returned := false
	defer func() {
		p.runsMu.Lock()
		delete(p.workerSet, w)
		p.runsMu.Unlock()
		w.mu.Lock()
		w.cancel(nil)
		w.mu.Unlock()
		if !returned {
			// A job called runtime.Goexit, which ends this goroutine:
			// what it held goes on without it.
			p.goexited(ctx, w, stay)
		}
		p.workers.Done()
	}()
	for {
		if c != nil {
			if p.runChunk(ctx, w, c, stay) || !stay {
				returned = true
				return
			}
		}
		select {
		case c = <-p.work:
		case <-p.idle:
			returned = true
			return
		}
	}
}

// runChunk runs the runs of c that nobody else claimed, and reports
// whether another goroutine replaced the worker meanwhile.
func (p *pool) runChunk(ctx context.Context, w *worker, c *chunk, stay bool) bool {
	w.mu.Lock()
	w.chunk = c
	w.mu.Unlock()
	if w.timer == nil {
		w.timer = time.AfterFunc(stragglerAfter, func() { p.straggling(ctx, w, stay) })
	} else {
		w.timer.Reset(stragglerAfter)
	}
	for a := c.claim(); a != nil; a = c.claim() {
		w.mu.Lock()
		w.running = a.e
		if w.cancelled {
			w.ctx, w.cancel = context.WithCancelCause(ctx)
			w.cancelled = false
		}
		rctx := w.ctx
		w.mu.Unlock()
		p.run(rctx, a)
		putRun(a)
	}
	w.timer.Stop()
	w.mu.Lock()
	w.running = nil
	w.chunk = nil
	replaced := w.replaced
	w.mu.Unlock()
	c.release()
	return replaced
}

// straggling is called when w has been on its chunk for stragglerAfter: a
// new goroutine takes the rest of the chunk and w's place.
func (p *pool) straggling(ctx context.Context, w *worker, stay bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	c := w.chunk
	if c == nil || w.replaced {
		return // the chunk was done in time
	}
	if e := w.running; e != nil {
		// Most likely the run that holds the chunk up: its job's next
		// runs get a goroutine of their own.
		e.setQuick(false)
	}
	w.replaced = true
	c.refs.Add(1)
	p.workers.Add(1) // w is counted, so the count is not 0
	go p.worker(ctx, c, stay)
}

// goexited hands on what a worker held when a job's runtime.Goexit ended
// its goroutine: the rest of its chunk and, for a worker that stays, its
// place.
func (p *pool) goexited(ctx context.Context, w *worker, stay bool) {
	if w.timer != nil {
		w.timer.Stop()
	}
	w.mu.Lock()
	c, replaced := w.chunk, w.replaced
	w.chunk, w.replaced = nil, true
	w.mu.Unlock()
	switch {
	case replaced && c != nil:
		c.release()
	case !replaced:
		p.workers.Add(1) // this goroutine is still counted
		go p.worker(ctx, c, stay)
	}
}

// cancel cancels the contexts of e's runs in progress with cause.
func (p *pool) cancel(e *entry, cause error) {
	p.runsMu.Lock()
	defer p.runsMu.Unlock()
	for w := range p.workerSet {
		w.mu.Lock()
		if w.running == e && !w.cancelled {
			// Its next run gets a new context (see runChunk).
			w.cancel(cause)
			w.cancelled = true
		}
		w.mu.Unlock()
	}
	for a, cancel := range p.aloneRuns {
		if a.e == e {
			cancel(cause)
		}
	}
}
