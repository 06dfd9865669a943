package fault_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"runtime/pprof"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/wakuwaku-go/wakuwaku/lock"
	"github.com/wakuwaku-go/wakuwaku/proof/internal/fault"
)

// conn says how a contender connects to Redis. Zero durations keep go-redis'
// defaults.
type conn struct {
	Addr       string
	Timeout    time.Duration // dial, read and write timeouts
	MaxRetries int
}

func (c conn) client() *redis.Client {
	return redis.NewClient(&redis.Options{
		Addr:                  c.Addr,
		DialTimeout:           c.Timeout,
		ReadTimeout:           c.Timeout,
		WriteTimeout:          c.Timeout,
		MaxRetries:            c.MaxRetries,
		ContextTimeoutEnabled: true,
	})
}

// resource is the protected resource as a contender reaches it: directly in
// the test process, through its link in a child.
type resource interface {
	Enter(name string, hold uint64, deadline int64) (uint64, bool, error)
	Write(name string, hold, version uint64, deadline int64) (bool, uint64, error)
}

// local is the test process's own access to the coordinator's resource.
type local struct{ r *fault.Resource }

func (l local) Enter(name string, hold uint64, deadline int64) (uint64, bool, error) {
	v, ok := l.r.Enter(name, hold, deadline)
	return v, ok, nil
}

func (l local) Write(name string, hold, version uint64, deadline int64) (bool, uint64, error) {
	ok, v := l.r.WriteBy(name, hold, version, deadline)
	return ok, v, nil
}

// load is the shape of a contention load: which locks, how long holders hold
// and how often they let a lease lapse.
type load struct {
	Namespace  string
	TTL        time.Duration
	Names      []string
	Kind       fault.LockKind
	Readers    int // for an RWLock: every Readers-th contender reads, the others write
	Backoff    time.Duration
	MaxSteps   int     // a holder extends up to this many times
	LapseShare float64 // the share of holder steps that outlast the TTL
	DropShare  float64 // the share of holds dropped rather than released
}

// contender is one goroutine of a load: it acquires, extends and releases at
// random, writes to the resource while its lease has a quarter of its TTL to
// go, and records every lock operation.
type contender struct {
	id  int32
	rec *fault.Recorder
	res resource
	rng *rand.Rand
	ld  load
}

func newContender(id int32, rec *fault.Recorder, res resource, ld load) *contender {
	return &contender{id: id, rec: rec, res: res, rng: rand.New(rand.NewPCG(uint64(id), uint64(time.Now().UnixNano()))), ld: ld}
}

// leaseToken is what a holder does with its token: both token types have it.
type leaseToken interface {
	Extend(ctx context.Context) (bool, error)
	Release(ctx context.Context) (bool, error)
	Deadline() time.Time
}

// run contends until ctx ends; the hold in progress then finishes. It returns
// an error only when the resource can't be reached.
func (c *contender) run(ctx context.Context, db lock.DB) error {
	l := lock.New[string](c.ld.Namespace, c.ld.TTL)
	rw := lock.NewRW[string](c.ld.Namespace, c.ld.TTL)
	for ctx.Err() == nil {
		name := c.ld.Names[c.rng.IntN(len(c.ld.Names))]
		var err error
		switch {
		case c.ld.Kind == fault.Lock:
			err = c.lockOnce(ctx, db, l, name)
		case c.ld.Readers > 0 && int(c.id)%c.ld.Readers == 0:
			err = c.readOnce(ctx, db, rw, name)
		default:
			err = c.writeOnce(ctx, db, rw, name)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (c *contender) lockOnce(ctx context.Context, db lock.DB, l lock.Lock[string], name string) error {
	key, hold := l.Key(name), c.rec.NewHold()
	var tok *lock.Token
	sent := fault.Now()
	c.rec.Do(c.id, fault.Acquire, key, hold, func() (bool, error) {
		var err error
		tok, err = l.TryLock(context.WithoutCancel(ctx), db, name)
		return tok != nil, err
	})
	if tok == nil {
		c.sleep(ctx, c.backoff())
		return nil
	}
	return c.hold(ctx, key, hold, sent, tok, fault.Extend, fault.Release, true)
}

func (c *contender) writeOnce(ctx context.Context, db lock.DB, l lock.RWLock[string], name string) error {
	key, _ := l.Keys(name)
	hold := c.rec.NewHold()
	var tok *lock.Token
	sent := fault.Now()
	c.rec.Do(c.id, fault.WriteAcquire, key, hold, func() (bool, error) {
		var err error
		tok, err = l.TryWrite(context.WithoutCancel(ctx), db, name)
		return tok != nil, err
	})
	if tok == nil {
		c.sleep(ctx, c.backoff())
		return nil
	}
	return c.hold(ctx, key, hold, sent, tok, fault.Extend, fault.Release, true)
}

func (c *contender) readOnce(ctx context.Context, db lock.DB, l lock.RWLock[string], name string) error {
	key, _ := l.Keys(name) // readers and the writer of one name share a history partition
	hold := c.rec.NewHold()
	var tok *lock.ReadToken
	c.rec.Do(c.id, fault.ReadAcquire, key, hold, func() (bool, error) {
		var err error
		tok, err = l.TryRead(context.WithoutCancel(ctx), db, name)
		return tok != nil, err
	})
	if tok == nil {
		c.sleep(ctx, c.backoff())
		return nil
	}
	// Readers starve writers when their leases overlap without a gap: they
	// hold for one step at most and then pause.
	err := c.hold(ctx, key, hold, 0, tok, fault.ReadExtend, fault.ReadRelease, false)
	c.sleep(ctx, 4*c.backoff())
	return err
}

// hold keeps a lease for a few random steps, extending it after each, and
// releases or drops it at the end. A writer enters the resource first, with
// the deadline of the lease its acquire, sent at sent, took; if its Enter
// arrived after that deadline, the resource refused it and the hold writes
// nothing.
func (c *contender) hold(ctx context.Context, key string, hold uint64, sent int64, tok leaseToken, extend, release fault.Kind, writes bool) error {
	steps := c.ld.MaxSteps
	if !writes {
		steps = min(steps, 1)
	}
	bg := context.WithoutCancel(ctx)
	var version uint64
	if writes {
		v, entered, err := c.res.Enter(key, hold, fault.LeaseDeadline(sent, c.ld.TTL))
		if err != nil {
			return err
		}
		version, writes = v, entered
	}
	for range c.rng.IntN(steps + 1) {
		if !c.sleep(ctx, c.step()) {
			break
		}
		if d := tok.Deadline(); writes && time.Until(d) > c.ld.TTL/4 {
			ok, v, err := c.res.Write(key, hold, version, fault.WallDeadline(d))
			if err != nil {
				return err
			}
			if ok {
				version = v
			}
		}
		ok, err := c.rec.Do(c.id, extend, key, hold, func() (bool, error) { return tok.Extend(bg) })
		if err == nil && !ok {
			break
		}
	}
	if ctx.Err() != nil || c.rng.Float64() >= c.ld.DropShare {
		c.rec.Do(c.id, release, key, hold, func() (bool, error) { return tok.Release(bg) })
	}
	return nil
}

// step is how long a holder works before its next extension: mostly under a
// third of the TTL, now and then past the TTL, so that the lease lapses.
func (c *contender) step() time.Duration {
	ttl := c.ld.TTL
	if c.rng.Float64() < c.ld.LapseShare {
		return ttl + time.Duration(c.rng.Int64N(int64(ttl/2)))
	}
	return time.Duration(c.rng.Int64N(int64(ttl / 3)))
}

func (c *contender) backoff() time.Duration {
	return c.ld.Backoff/2 + time.Duration(c.rng.Int64N(int64(c.ld.Backoff)))
}

// sleep waits d or until ctx ends, and reports whether it waited d.
func (c *contender) sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// contendArgs are the arguments of the contend role.
type contendArgs struct {
	Conn       conn
	Load       load
	Goroutines int
}

// contendRole runs Goroutines contenders in a child until the test process
// stops it, streaming their history to the test process. It says "ready"
// and waits for the gate "go" first, so that children start together.
func contendRole(ctx context.Context, env *fault.Env) error {
	var a contendArgs
	if err := env.Args(&a); err != nil {
		return err
	}
	before := runtime.NumGoroutine()
	rdb := a.Conn.client()
	closed := false
	defer func() {
		if !closed {
			rdb.Close()
		}
	}()
	db := lock.NewDB(rdb)
	if err := rdb.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("ping: %w", err)
	}
	if err := env.Link.Note("ready", 0, ""); err != nil {
		return err
	}
	if err := env.Link.Wait("go"); err != nil {
		return err
	}
	rec := fault.NewRecorder(env.Child)
	streamCtx, stopStream := context.WithCancel(context.WithoutCancel(ctx))
	streamErr := make(chan error, 1)
	go func() { streamErr <- fault.Stream(streamCtx, rec, env.Link) }()
	var wg sync.WaitGroup
	errs := make([]error, a.Goroutines)
	for i := range a.Goroutines {
		c := newContender(int32(env.Child*1000+i), rec, env.Link, a.Load)
		wg.Go(func() { errs[i] = c.run(ctx, db) })
	}
	wg.Wait()
	stopStream()
	if err := <-streamErr; err != nil {
		return err
	}
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	// Nothing the contenders started may outlive them and their client.
	rdb.Close()
	closed = true
	for deadline := time.Now().Add(10 * time.Second); runtime.NumGoroutine() > before; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			var b strings.Builder
			_ = pprof.Lookup("goroutine").WriteTo(&b, 1)
			return fmt.Errorf("%d goroutines left, %d before: a leak\n%s", runtime.NumGoroutine(), before, b.String())
		}
	}
	return nil
}

// runLocal runs n contenders in the test process until ctx ends, recording
// into rec; ids start at first.
func runLocal(ctx context.Context, db lock.DB, rec *fault.Recorder, res *fault.Resource, ld load, first int32, n int) *sync.WaitGroup {
	var wg sync.WaitGroup
	for i := range n {
		c := newContender(first+int32(i), rec, local{res}, ld)
		wg.Go(func() { _ = c.run(ctx, db) })
	}
	return &wg
}

// noopRole does nothing until it is stopped; the harness's own tests use it.
func noopRole(ctx context.Context, env *fault.Env) error {
	if err := env.Link.Note("ready", int64(env.Child), ""); err != nil {
		return err
	}
	<-ctx.Done()
	return nil
}
