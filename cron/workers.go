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

// runs are the arguments of runs, reused: a tick allocates nothing.
var runs = sync.Pool{New: func() any { return new(runArgs) }}

func getRun() *runArgs { return runs.Get().(*runArgs) }

func putRun(a *runArgs) {
	*a = runArgs{}
	runs.Put(a)
}

// alone runs a in a goroutine of its own, under a context of its own that
// Remove can cancel.
func (r *Runtime) alone(ctx context.Context, a *runArgs) {
	a.alone = true
	r.workers.Add(1)
	go func() {
		defer r.workers.Done()
		ctx, cancel := context.WithCancelCause(ctx)
		r.runsMu.Lock()
		r.aloneRuns[a] = cancel
		r.runsMu.Unlock()
		returned := false
		defer func() {
			r.runsMu.Lock()
			delete(r.aloneRuns, a)
			r.runsMu.Unlock()
			cancel(nil)
			if returned { // else the job called runtime.Goexit: a is dropped
				putRun(a)
			}
		}()
		r.run(ctx, a)
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

// startWorkers starts the runtime's workers.
func (r *Runtime) startWorkers(ctx context.Context) {
	for range workerCount() {
		r.workers.Add(1)
		go r.worker(ctx, nil, true)
	}
}

// hand gives a chunk to the workers.
func (r *Runtime) hand(ctx context.Context, c *chunk) {
	select {
	case r.work <- c:
	default:
		// Every worker is busy and the FIFO is full: a goroutine of its
		// own, which ends with the chunk.
		r.workers.Add(1)
		go r.worker(ctx, c, false)
	}
}

// worker runs chunks: c first, if not nil, then, if it stays, chunks from
// the FIFO until the runtime is stopped and idle. It ends early when
// another goroutine replaced it (see stragglerAfter).
func (r *Runtime) worker(ctx context.Context, c *chunk, stay bool) {
	w := new(worker)
	w.ctx, w.cancel = context.WithCancelCause(ctx)
	r.runsMu.Lock()
	r.workerSet[w] = struct{}{}
	r.runsMu.Unlock()
	returned := false
	defer func() {
		r.runsMu.Lock()
		delete(r.workerSet, w)
		r.runsMu.Unlock()
		w.mu.Lock()
		w.cancel(nil)
		w.mu.Unlock()
		if !returned {
			// A job called runtime.Goexit, which ends this goroutine:
			// what it held goes on without it.
			r.goexited(ctx, w, stay)
		}
		r.workers.Done()
	}()
	for {
		if c != nil {
			if r.runChunk(ctx, w, c, stay) || !stay {
				returned = true
				return
			}
		}
		select {
		case c = <-r.work:
		case <-r.idle:
			returned = true
			return
		}
	}
}

// runChunk runs the runs of c that nobody else claimed, and reports
// whether another goroutine replaced the worker meanwhile.
func (r *Runtime) runChunk(ctx context.Context, w *worker, c *chunk, stay bool) bool {
	w.mu.Lock()
	w.chunk = c
	w.mu.Unlock()
	if w.timer == nil {
		w.timer = time.AfterFunc(stragglerAfter, func() { r.straggling(ctx, w, stay) })
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
		r.run(rctx, a)
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
func (r *Runtime) straggling(ctx context.Context, w *worker, stay bool) {
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
	r.workers.Add(1) // w is counted, so the count is not 0
	go r.worker(ctx, c, stay)
}

// goexited hands on what a worker held when a job's runtime.Goexit ended
// its goroutine: the rest of its chunk and, for a worker that stays, its
// place.
func (r *Runtime) goexited(ctx context.Context, w *worker, stay bool) {
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
		r.workers.Add(1) // this goroutine is still counted
		go r.worker(ctx, c, stay)
	}
}
