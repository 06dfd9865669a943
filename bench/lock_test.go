package bench_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	redsyncgoredis "github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"

	"github.com/wakuwaku-go/wakuwaku/bench"
	"github.com/wakuwaku-go/wakuwaku/lock"
)

var (
	rounds = flag.Int("rounds", 1, "how many times BenchmarkLock runs its whole set of comparisons, one round after the other")
	cmdLog = flag.String("cmdlog", "", "append each lock benchmark's counted commands to this file, one JSON object a line")
	levels = flag.String("levels", "1,16,64", "the parallelism levels of BenchmarkLock: goroutines sending at once")
)

// ttl is every lock's lease in these benchmarks: long enough that no lease
// runs out during a benchmark, so every release and extend succeeds.
const ttl = 30 * time.Second

// keysPerWorker is how many distinct keys each goroutine cycles through in
// the uncontended cases.
const keysPerWorker = 256

// env is what every lock benchmark shares: one redis-server and one go-redis
// client (and so one pool) for all the libraries.
type env struct {
	srv     *bench.Server
	client  *redis.Client
	counter *bench.Counter
}

var (
	envOnce sync.Once
	shared  *env
	envErr  error
)

func getEnv(b *testing.B) *env {
	b.Helper()
	envOnce.Do(func() {
		srv, err := bench.StartServer()
		if err != nil {
			envErr = err
			return
		}
		counter := &bench.Counter{}
		client := redis.NewClient(&redis.Options{
			Addr:     srv.Addr(),
			Dialer:   counter.Dial,
			PoolSize: 128, // more than the 64 goroutines of the widest case
		})
		shared = &env{srv: srv, client: client, counter: counter}
	})
	if envErr != nil {
		b.Fatal(envErr)
	}
	return shared
}

func TestMain(m *testing.M) {
	flag.Parse()
	code := m.Run()
	if shared != nil {
		shared.client.Close()
		shared.srv.Close()
	}
	os.Exit(code)
}

// errBusy is what a cycle returns when an acquire that had to succeed found
// the lock held.
var errBusy = errors.New("lock unexpectedly busy")

// impl is one library's way through each benchmarked operation. A key is
// given both as a number (our locks are keyed by int) and as the full Redis
// key the other libraries take.
type impl struct {
	name string
	// cycle acquires the lock on a free key, extends it extends times and
	// releases it.
	cycle func(ctx context.Context, n int, key string, extends int) error
	// try makes one attempt on a key others may hold, and releases the
	// lock at once if it got it. It reports whether it did.
	try func(ctx context.Context, n int, key string) (bool, error)
}

// token is a fresh random lock value, as any correct lock needs one.
func token() string {
	var b [16]byte
	rand.Read(b[:])
	return string(b[:])
}

// The raw baseline's scripts: the usual compare-and-delete and
// compare-and-pexpire, run by SHA through go-redis's Script.
var (
	rawRelease = redis.NewScript(`if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`)
	rawExtend  = redis.NewScript(`if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end return 0`)
)

func impls(c *redis.Client) []impl {
	ours, raw := oursImpl("ours", c), rawImpl("raw", c)
	bsm := redislock.New(c)
	bsmCycle := func(ctx context.Context, _ int, key string, extends int) error {
		l, err := bsm.Obtain(ctx, key, ttl, nil)
		if errors.Is(err, redislock.ErrNotObtained) {
			return errBusy
		}
		if err != nil {
			return err
		}
		for range extends {
			if err := l.Refresh(ctx, ttl, nil); err != nil {
				return fmt.Errorf("Refresh = %v", err)
			}
		}
		return l.Release(ctx)
	}
	bsmTry := func(ctx context.Context, _ int, key string) (bool, error) {
		l, err := bsm.Obtain(ctx, key, ttl, nil)
		if errors.Is(err, redislock.ErrNotObtained) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		return true, l.Release(ctx)
	}

	// One pool, as a single Redis (not a Redlock quorum) has. Options are
	// built once, as a program would; a mutex is per key, so it is made
	// per operation, as redsync's users do.
	rs := redsync.New(redsyncgoredis.NewPool(c))
	rsOpts := []redsync.Option{redsync.WithExpiry(ttl), redsync.WithTries(1)}
	rsCycle := func(ctx context.Context, _ int, key string, extends int) error {
		m := rs.NewMutex(key, rsOpts...)
		if err := m.TryLockContext(ctx); err != nil {
			var taken *redsync.ErrTaken
			if errors.As(err, &taken) {
				return errBusy
			}
			return err
		}
		for range extends {
			if ok, err := m.ExtendContext(ctx); !ok || err != nil {
				return fmt.Errorf("ExtendContext = %v, %v", ok, err)
			}
		}
		if ok, err := m.UnlockContext(ctx); !ok || err != nil {
			return fmt.Errorf("UnlockContext = %v, %v", ok, err)
		}
		return nil
	}
	rsTry := func(ctx context.Context, _ int, key string) (bool, error) {
		m := rs.NewMutex(key, rsOpts...)
		if err := m.TryLockContext(ctx); err != nil {
			var taken *redsync.ErrTaken
			if errors.As(err, &taken) {
				return false, nil
			}
			return false, err
		}
		_, err := m.UnlockContext(ctx)
		return true, err
	}

	return []impl{
		ours,
		raw,
		{name: "bsm", cycle: bsmCycle, try: bsmTry},
		{name: "redsync", cycle: rsCycle, try: rsTry},
	}
}

// oursImpl is our Lock over c.
func oursImpl(name string, c lock.Client) impl {
	ours := lock.New[int]("bench", ttl)
	db := lock.NewDB(c)
	cycle := func(ctx context.Context, n int, _ string, extends int) error {
		tok, err := ours.TryLock(ctx, db, n)
		if err != nil {
			return err
		}
		if tok == nil {
			return errBusy
		}
		for range extends {
			if ok, err := tok.Extend(ctx); !ok || err != nil {
				return fmt.Errorf("Extend = %v, %v", ok, err)
			}
		}
		if ok, err := tok.Release(ctx); !ok || err != nil {
			return fmt.Errorf("Release = %v, %v", ok, err)
		}
		return nil
	}
	try := func(ctx context.Context, n int, _ string) (bool, error) {
		tok, err := ours.TryLock(ctx, db, n)
		if tok == nil || err != nil {
			return false, err
		}
		_, err = tok.Release(ctx)
		return true, err
	}
	return impl{name: name, cycle: cycle, try: try}
}

// rawClient is what the raw baseline needs from go-redis: a command sent
// through Process, and the script calls of redis.Script.
type rawClient interface {
	lock.Client
	redis.Scripter
}

// rawImpl is the raw go-redis baseline over c.
func rawImpl(name string, c rawClient) impl {
	rawMs := any(ttl.Milliseconds()) // boxed once
	acquire := func(ctx context.Context, key, tok string) (bool, error) {
		cmd := redis.NewBoolCmd(ctx, "set", key, tok, "px", rawMs, "nx")
		c.Process(ctx, cmd)
		return cmd.Result()
	}
	release := func(ctx context.Context, key, tok string) error {
		n, err := rawRelease.Run(ctx, c, []string{key}, tok).Int()
		if n != 1 && err == nil {
			err = fmt.Errorf("release = %d", n)
		}
		return err
	}
	cycle := func(ctx context.Context, _ int, key string, extends int) error {
		tok := token()
		ok, err := acquire(ctx, key, tok)
		if err != nil {
			return err
		}
		if !ok {
			return errBusy
		}
		for range extends {
			if n, err := rawExtend.Run(ctx, c, []string{key}, tok, rawMs).Int(); n != 1 || err != nil {
				return fmt.Errorf("extend = %d, %v", n, err)
			}
		}
		return release(ctx, key, tok)
	}
	try := func(ctx context.Context, _ int, key string) (bool, error) {
		tok := token()
		ok, err := acquire(ctx, key, tok)
		if !ok || err != nil {
			return false, err
		}
		return true, release(ctx, key, tok)
	}
	return impl{name: name, cycle: cycle, try: try}
}

// autoPipelined is ours and the raw baseline over the blocking
// autopipeliner of c (go-redis's Client.AutoPipeline, with its default
// options), which sends the commands of concurrent callers together, in
// one write per batch.
func autoPipelined(b *testing.B, c *redis.Client) []impl {
	ap, err := c.AutoPipeline()
	if err != nil {
		b.Fatalf("AutoPipeline: %v", err)
	}
	return []impl{oursImpl("ours-ap", ap), rawImpl("raw-ap", ap)}
}

// ourRead is our RWLock's read cycle, measured beside our Lock's.
func ourRead(c *redis.Client) impl {
	rw := lock.NewRW[int]("bench", ttl)
	db := lock.NewDB(c)
	return impl{name: "ours-rwread", cycle: func(ctx context.Context, n int, _ string, extends int) error {
		tok, err := rw.TryRead(ctx, db, n)
		if err != nil {
			return err
		}
		if tok == nil {
			return errBusy
		}
		for range extends {
			if ok, err := tok.Extend(ctx); !ok || err != nil {
				return fmt.Errorf("Extend = %v, %v", ok, err)
			}
		}
		if ok, err := tok.Release(ctx); !ok || err != nil {
			return fmt.Errorf("Release = %v, %v", ok, err)
		}
		return nil
	}}
}

// keys are a library's keys for the uncontended cases: keysPerWorker for
// each of up to maxWorkers goroutines, none shared.
type keys struct {
	n [][]int
	s [][]string
}

func makeKeys(lib string, maxWorkers int) keys {
	var k keys
	for w := range maxWorkers {
		ns := make([]int, keysPerWorker)
		ss := make([]string, keysPerWorker)
		for j := range ns {
			ns[j] = w*100_000 + j
			ss[j] = "bench:" + lib + ":" + strconv.Itoa(ns[j])
		}
		k.n = append(k.n, ns)
		k.s = append(k.s, ss)
	}
	return k
}

// BenchmarkLock runs every lock comparison: for each case and parallelism,
// ours and each peer one after the other, on one redis-server and one
// go-redis client. With -rounds=n the whole set runs n times, so that each
// library is measured n times interleaved with the others, and a machine
// whose load drifts shifts all of them alike; each round starts its groups
// with a different library, so that none always runs first.
//
// Ours and the raw baseline also run over go-redis's AutoPipeliner (the
// libraries "ours-ap" and "raw-ap"), in the uncontended and the busy cases,
// interleaved with the rest.
//
// Besides time and allocations, each line reports rt/op, the round trips
// per operation counted by the client's dialer (writes: commands sent, but
// for the autopipelined libraries, whose one write may carry the commands
// of many callers), and srv/op, the commands the server executed per
// operation (INFO commandstats, so the commands scripts call count too),
// cpu-µs/op, this process's CPU time per operation, and srvcpu-µs/op, the
// server's (INFO cpu). The contended cases make use of cycles/s (attempts
// that got the lock and released it, per second) and ok/op (the share of
// attempts that got it).
func BenchmarkLock(b *testing.B) {
	e := getEnv(b)
	ps, err := parseLevels(*levels)
	if err != nil {
		b.Fatal(err)
	}
	maxP := 0
	for _, p := range ps {
		maxP = max(maxP, p)
	}
	libs := impls(e.client)
	ap := autoPipelined(b, e.client)
	withRead := append(slices.Clone(libs), ourRead(e.client))
	withRead = append(withRead, ap...)
	withAP := append(slices.Clone(libs), ap...)
	libKeys := make(map[string]keys)
	// Warm up: load every script and open the connections, so no case pays
	// for that. Each library warms up at the widest parallelism, so that the
	// pools (the client's, and the autopipeliner's pipeline pool) hold their
	// connections before anything is timed: otherwise the first library of
	// the first round at p=64 would pay for dialing them.
	ctx := context.Background()
	for _, l := range withRead {
		k := makeKeys(l.name, maxP)
		libKeys[l.name] = k
		errs := make([]error, maxP)
		var wg sync.WaitGroup
		for w := range maxP {
			wg.Go(func() { errs[w] = l.cycle(ctx, k.n[w][0], k.s[w][0], 1) })
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			b.Fatalf("%s warm-up: %v", l.name, err)
		}
	}

	for round := range *rounds {
		for _, p := range ps {
			for _, l := range rotate(withRead, round) {
				b.Run(fmt.Sprintf("uncontended/p=%d/%s", p, l.name), func(b *testing.B) {
					benchCycle(b, e, p, l, libKeys[l.name], 0)
				})
			}
		}
		for _, p := range ps {
			for _, l := range rotate(libs, round) {
				b.Run(fmt.Sprintf("extend3/p=%d/%s", p, l.name), func(b *testing.B) {
					benchCycle(b, e, p, l, libKeys[l.name], 3)
				})
			}
		}
		for _, p := range ps {
			for _, l := range rotate(libs, round) {
				b.Run(fmt.Sprintf("contended/p=%d/%s", p, l.name), func(b *testing.B) {
					benchContended(b, e, p, l, false)
				})
			}
		}
		for _, p := range ps {
			for _, l := range rotate(withAP, round) {
				b.Run(fmt.Sprintf("busy/p=%d/%s", p, l.name), func(b *testing.B) {
					benchContended(b, e, p, l, true)
				})
			}
		}
	}
}

// rotate returns ls starting at its round-th element (modulo its length), so
// that no library is always the first of its group to run, or always follows
// the same other one.
func rotate(ls []impl, round int) []impl {
	k := round % len(ls)
	return append(slices.Clone(ls[k:]), ls[:k]...)
}

func parseLevels(s string) ([]int, error) {
	var ps []int
	for _, f := range strings.Split(s, ",") {
		p, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || p < 1 {
			return nil, fmt.Errorf("-levels: %q is not a parallelism level", f)
		}
		ps = append(ps, p)
	}
	return ps, nil
}

// benchCycle measures acquire, extends extends and release on keys no other
// goroutine uses, with p goroutines at once.
func benchCycle(b *testing.B, e *env, p int, l impl, k keys, extends int) {
	run(b, e, p, func(ctx context.Context, w, i int) (bool, error) {
		j := i % keysPerWorker
		return true, l.cycle(ctx, k.n[w][j], k.s[w][j], extends)
	})
}

// benchContended measures attempts by p goroutines on one key. When busy,
// the key is held all along by a holder outside the benchmark, so every
// attempt fails: the cost of the busy path alone.
func benchContended(b *testing.B, e *env, p int, l impl, busy bool) {
	const n = 999_999_999
	key := "bench:" + l.name + ":contended"
	ctx := context.Background()
	if busy {
		// Someone else holds the key: its value is no library's token.
		holder := redis.NewStatusCmd(ctx, "set", key, "someone else", "px", ttl.Milliseconds())
		lockKey := lock.New[int]("bench", ttl).Key(n)
		holderOurs := redis.NewStatusCmd(ctx, "set", lockKey, "someone else", "px", ttl.Milliseconds())
		for _, cmd := range []*redis.StatusCmd{holder, holderOurs} {
			if err := e.client.Process(ctx, cmd); err != nil {
				b.Fatal(err)
			}
		}
		b.Cleanup(func() { e.client.Del(ctx, key, lockKey) })
	}
	run(b, e, p, func(ctx context.Context, _, _ int) (bool, error) {
		return l.try(ctx, n, key)
	})
}

// run calls op b.N times in all, from p goroutines at once, and reports the
// metrics every case shares. op reports whether the attempt got the lock.
func run(b *testing.B, e *env, p int, op func(ctx context.Context, w, i int) (bool, error)) {
	ctx := context.Background()
	before, err := e.srv.CommandStats(ctx)
	if err != nil {
		b.Fatal(err)
	}
	writes := e.counter.Writes()
	srvCPU, err := e.srv.CPU(ctx)
	if err != nil {
		b.Fatal(err)
	}
	cpu := processCPU()
	var (
		next, ok  atomic.Int64
		wg        sync.WaitGroup
		firstErr  error
		errOnce   sync.Once
		total     = int64(b.N)
		perWorker = make([]int, p)
	)
	b.ReportAllocs()
	b.ResetTimer()
	for w := range p {
		wg.Go(func() {
			for next.Add(1) <= total {
				i := perWorker[w]
				perWorker[w]++
				got, err := op(ctx, w, i)
				if err != nil {
					errOnce.Do(func() { firstErr = err })
					return
				}
				if got {
					ok.Add(1)
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	if firstErr != nil {
		b.Fatal(firstErr)
	}
	elapsed := b.Elapsed()
	cpu = processCPU() - cpu
	sent := e.counter.Writes() - writes
	srvCPUAfter, err := e.srv.CPU(ctx)
	if err != nil {
		b.Fatal(err)
	}
	after, err := e.srv.CommandStats(ctx)
	if err != nil {
		b.Fatal(err)
	}
	calls := make(map[string]int64)
	var srv int64
	for name, n := range after {
		if d := n - before[name]; d > 0 {
			calls[name] = d
			srv += d
		}
	}
	b.ReportMetric(float64(sent)/float64(b.N), "rt/op")
	b.ReportMetric(float64(srv)/float64(b.N), "srv/op")
	b.ReportMetric(float64(ok.Load())/float64(b.N), "ok/op")
	b.ReportMetric(cpu.Seconds()*1e6/float64(b.N), "cpu-µs/op")
	b.ReportMetric((srvCPUAfter-srvCPU)*1e6/float64(b.N), "srvcpu-µs/op")
	if elapsed > 0 {
		b.ReportMetric(float64(ok.Load())/elapsed.Seconds(), "cycles/s")
	}
	logCommands(b, sent, calls)
}

// processCPU returns the CPU time this process has used, user and system.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// commandRecord is one line of the -cmdlog file: what one run of a
// benchmark sent and what the server executed.
type commandRecord struct {
	Name  string           `json:"name"`
	N     int              `json:"n"`
	Sent  int64            `json:"sent"`
	Calls map[string]int64 `json:"calls"`
}

var cmdLogMu sync.Mutex

func logCommands(b *testing.B, sent int64, calls map[string]int64) {
	if *cmdLog == "" {
		return
	}
	line, err := json.Marshal(commandRecord{Name: b.Name(), N: b.N, Sent: sent, Calls: calls})
	if err != nil {
		b.Fatal(err)
	}
	cmdLogMu.Lock()
	defer cmdLogMu.Unlock()
	f, err := os.OpenFile(*cmdLog, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(append(line, '\n')); err != nil {
		b.Fatal(err)
	}
}
