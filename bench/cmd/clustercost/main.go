// Command clustercost measures what running the same jobs on several
// replicas of a service costs one redis-server, per job and slot, and
// whether every slot ran once: ours (cron.Leased jobs), gocron v2 with a
// Redis locker on redsync (the locker gocron's documentation points to,
// written here on redsync as that locker is: one try, released after the
// run), and a bare lease: one SET NX PX of a per-slot key by every replica
// at every tick, never released.
//
// Each run starts its own redis-server, its replicas (in this process, each
// with its own client and pool) and jobs due every second, lets them warm
// up, resets the server's statistics and measures for -for:
//
//	go run ./cmd/clustercost -lib ours -replicas 3 -jobs 1000 -for 10s
//
// It prints one JSON object (cronresult.Cluster): the server's time per job-slot
// as INFO commandstats counts it for the commands the clients sent (a
// script's own commands are inside its time; a command that the scripts
// send too is counted at its average cost, and ours' looks, HMGETs like
// the scripts', at their own cost, measured on the records after the
// window), the commands the clients
// sent per job-slot, the server's CPU, the slots of the window that ran
// once, twice or not at all, and how late the runs began.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-co-op/gocron/v2"
	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"

	"github.com/wakuwaku-go/wakuwaku/bench"
	"github.com/wakuwaku-go/wakuwaku/bench/cronresult"
	"github.com/wakuwaku-go/wakuwaku/cron"
	"github.com/wakuwaku-go/wakuwaku/interval"
	"github.com/wakuwaku-go/wakuwaku/lock"
)

func main() {
	lib := flag.String("lib", "ours", "ours, ours-ap (ours through an autopipeliner), gocron or setnx")
	replicas := flag.Int("replicas", 3, "replicas of the service, each with its own client")
	jobs := flag.Int("jobs", 1000, "jobs, each due every second on every replica")
	dur := flag.Duration("for", 10*time.Second, "how long the window lasts")
	profile := flag.String("cpuprofile", "", "write this process's CPU profile (the replicas') to this file")
	masters := flag.Int("masters", 0, "run against a Redis Cluster of this many masters (0: one redis-server)")
	flag.Parse()
	if *profile != "" {
		f, err := os.Create(*profile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "clustercost:", err)
			os.Exit(1)
		}
		defer pprof.StopCPUProfile()
	}
	res, err := run(*lib, *replicas, *jobs, *dur, *masters)
	if err != nil {
		fmt.Fprintln(os.Stderr, "clustercost:", err)
		os.Exit(1)
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(res); err != nil {
		fmt.Fprintln(os.Stderr, "clustercost:", err)
		os.Exit(1)
	}
}

// tally counts the runs of each job in each second of the window, and how
// late they began.
type tally struct {
	open  time.Time // the first second of the window
	secs  int
	runs  []atomic.Int32 // job*secs + second
	late  []int64        // µs, one per run of the window
	nlate atomic.Int64
	mu    sync.Mutex
	skips map[string]int64 // ours' skipped ticks of the window's slots, by reason
}

func newTally(jobs, secs int, open time.Time) *tally {
	return &tally{open: open, secs: secs, runs: make([]atomic.Int32, jobs*secs), late: make([]int64, 4*jobs*secs), skips: map[string]int64{}}
}

// ran records a run of job for the second slot, begun now.
func (t *tally) ran(job int, slot time.Time) {
	k := int(slot.Sub(t.open) / time.Second)
	if k < 0 || k >= t.secs || slot.Before(t.open) {
		return
	}
	t.runs[job*t.secs+k].Add(1)
	if i := t.nlate.Add(1) - 1; i < int64(len(t.late)) {
		t.late[i] = time.Since(slot).Microseconds()
	}
}

// skipped counts a skipped tick of a slot in the window, by reason.
func (t *tally) skipped(slot time.Time, reason string) {
	if slot.Before(t.open) || slot.Sub(t.open) >= time.Duration(t.secs)*time.Second {
		return
	}
	t.mu.Lock()
	t.skips[reason]++
	t.mu.Unlock()
}

// counted is what a client sent, by command name.
type counted struct {
	mu sync.Mutex
	n  map[string]int64
	on atomic.Bool
}

func (c *counted) add(name string, k int64) {
	if !c.on.Load() {
		return
	}
	c.mu.Lock()
	c.n[name] += k
	c.mu.Unlock()
}

// hook counts the commands a client sends, pipelines too.
type hook struct{ c *counted }

func (h hook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h hook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.c.add(strings.ToLower(cmd.Name()), 1)
		return next(ctx, cmd)
	}
}
func (h hook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			h.c.add(strings.ToLower(cmd.Name()), 1)
		}
		return next(ctx, cmds)
	}
}

func run(lib string, replicas, jobs int, dur time.Duration, masters int) (*cronresult.Cluster, error) {
	var nodes []*bench.Server
	newClient := func() redis.UniversalClient { return redis.NewClient(&redis.Options{Addr: nodes[0].Addr()}) }
	if masters > 0 {
		cl, err := bench.StartCluster(masters)
		if err != nil {
			return nil, err
		}
		defer cl.Close()
		nodes = cl.Nodes
		newClient = func() redis.UniversalClient { return redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs()}) }
	} else {
		srv, err := bench.StartServer()
		if err != nil {
			return nil, err
		}
		defer srv.Close()
		nodes = []*bench.Server{srv}
	}
	srv := servers(nodes)
	sent := &counted{n: map[string]int64{}}
	clients := make([]redis.UniversalClient, replicas)
	for i := range clients {
		clients[i] = newClient()
		clients[i].AddHook(hook{sent})
		defer clients[i].Close()
	}
	// The window opens on a whole second at least 3 s away: the start
	// and the first slots are warm-up.
	open := time.Now().Truncate(time.Second).Add(4 * time.Second)
	secs := int(dur / time.Second)
	t := newTally(jobs, secs, open)
	var stops []func() error
	for i, c := range clients {
		stop, err := startReplica(lib, i, c, jobs, t)
		if err != nil {
			return nil, err
		}
		stops = append(stops, stop)
	}
	// The counting runs half a second ahead of the slots: a slot's claims
	// and completions come just after its second begins, so the window
	// counts the traffic of its own slots (in a steady state, any phase
	// counts as much).
	ctx := context.Background()
	time.Sleep(time.Until(open.Add(-time.Second / 2)))
	if _, err := srv.Command(ctx, "CONFIG", "RESETSTAT"); err != nil {
		return nil, err
	}
	sent.on.Store(true)
	cpu0, err := srv.CPU(ctx)
	if err != nil {
		return nil, err
	}
	shut := open.Add(time.Duration(secs) * time.Second)
	time.Sleep(time.Until(shut.Add(-time.Second / 2)))
	sent.on.Store(false)
	cpu1, err := srv.CPU(ctx)
	if err != nil {
		return nil, err
	}
	stats, err := commandStats(ctx, srv)
	if err != nil {
		return nil, err
	}
	// The window's last runs may still be starting.
	time.Sleep(3 * time.Second / 2)
	for _, stop := range stops {
		if err := stop(); err != nil {
			return nil, err
		}
	}
	res := &cronresult.Cluster{Lib: lib, Replicas: replicas, Masters: masters, Jobs: jobs, For: float64(secs), Slots: int64(jobs * secs),
		Commands: map[string]int64{}, Server: stats, RedisCPUS: cpu1 - cpu0}
	if strings.HasPrefix(lib, "ours") && sent.n["hmget"] > 0 {
		if res.LookUS, err = lookCost(ctx, srv, newClient(), jobs); err != nil {
			return nil, err
		}
	}
	sent.mu.Lock()
	for name, n := range sent.n {
		res.Commands[name] = n
		st := stats[name]
		switch {
		case name == "hmget" && res.LookUS > 0:
			res.ServerUS += float64(n) * res.LookUS // the looks alone
		case float64(n) < st[0]:
			// The scripts call it too: count the clients' calls at the
			// average cost.
			res.ServerUS += float64(n) * st[1] / st[0]
		default:
			res.ServerUS += st[1]
		}
	}
	sent.mu.Unlock()
	for i := range t.runs {
		switch n := t.runs[i].Load(); {
		case n == 0:
			res.Missed++
		case n == 1:
			res.Once++
		default:
			res.Twice++
		}
	}
	if len(t.skips) > 0 {
		res.Skips = t.skips
	}
	late := slices.Clone(t.late[:min(t.nlate.Load(), int64(len(t.late)))])
	slices.Sort(late)
	res.LateP50, res.LateP99 = quantile(late, 0.5), quantile(late, 0.99)
	return res, nil
}

// lookCost returns the server's µs for one look of ours at a job's
// record, as the runtime sends it (HMGET record slot paused), over the
// records the window left: 20 rounds over the jobs, after a reset of the
// server's statistics.
func lookCost(ctx context.Context, srv servers, c redis.UniversalClient, jobs int) (float64, error) {
	defer c.Close()
	if _, err := srv.Command(ctx, "CONFIG", "RESETSTAT"); err != nil {
		return 0, err
	}
	for range 20 {
		pipe := c.Pipeline()
		for i := range jobs {
			pipe.HMGet(ctx, "@@wakuwaku-cron:{@@wakuwaku-entity:Lock:cron:job-"+strconv.Itoa(i)+"}", "slot", "paused")
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return 0, err
		}
	}
	stats, err := commandStats(ctx, srv)
	if err != nil {
		return 0, err
	}
	if st := stats["hmget"]; st[0] > 0 {
		return st[1] / st[0], nil
	}
	return 0, errors.New("no HMGET counted")
}

// servers are the redis-servers of a run: one, or a cluster's masters.
type servers []*bench.Server

// Command sends a command to every server, and returns the first's reply.
func (ss servers) Command(ctx context.Context, args ...string) (string, error) {
	var first string
	for i, s := range ss {
		reply, err := s.Command(ctx, args...)
		if err != nil {
			return "", err
		}
		if i == 0 {
			first = reply
		}
	}
	return first, nil
}

// CPU returns the servers' CPU time, added up.
func (ss servers) CPU(ctx context.Context) (float64, error) {
	var total float64
	for _, s := range ss {
		c, err := s.CPU(ctx)
		if err != nil {
			return 0, err
		}
		total += c
	}
	return total, nil
}

// commandStats returns the server's calls and time (µs) per command, from
// INFO commandstats.
func commandStats(ctx context.Context, srv servers) (map[string][2]float64, error) {
	out := map[string][2]float64{}
	for _, node := range srv {
		text, err := node.Command(ctx, "INFO", "commandstats")
		if err != nil {
			return nil, err
		}
		if err := addStats(out, text); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// addStats adds one server's INFO commandstats to out.
func addStats(out map[string][2]float64, text string) error {
	for line := range strings.SplitSeq(text, "\r\n") {
		name, rest, ok := strings.Cut(strings.TrimPrefix(line, "cmdstat_"), ":")
		if !ok || line == name {
			continue
		}
		var st [2]float64
		for field := range strings.SplitSeq(rest, ",") {
			k, v, _ := strings.Cut(field, "=")
			i := slices.Index([]string{"calls", "usec"}, k)
			if i < 0 {
				continue
			}
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return fmt.Errorf("INFO commandstats line %q: %w", line, err)
			}
			st[i] = f
		}
		if name == "info" || name == "config|resetstat" {
			continue
		}
		prev := out[name]
		out[name] = [2]float64{prev[0] + st[0], prev[1] + st[1]}
	}
	return nil
}

func quantile(sorted []int64, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := max(0, min(int(q*float64(len(sorted))+0.5)-1, len(sorted)-1))
	return float64(sorted[i])
}

var everySecond = interval.MustCron("* * * * * *").WithoutStartupRun()

// leasedJob is a job of ours, leased on its replica's client.
type leasedJob struct {
	i  int
	db lock.DB
	t  *tally
}

func (j *leasedJob) Name() string                { return "job-" + strconv.Itoa(j.i) }
func (j *leasedJob) Interval() interval.Interval { return everySecond }
func (j *leasedJob) Lease() cron.LeaseConfig     { return cron.LeaseConfig{DB: j.db} }
func (j *leasedJob) Process(_ context.Context, tk cron.Tick) error {
	j.t.ran(j.i, tk.Slot.Start)
	return nil
}

// startReplica starts replica r of lib with its jobs over c.
func startReplica(lib string, r int, c redis.UniversalClient, jobs int, t *tally) (func() error, error) {
	switch lib {
	case "ours", "ours-ap":
		db := lock.NewDB(c)
		if lib == "ours-ap" {
			// The same, through go-redis's blocking autopipeliner: the
			// claims, completions and looks that many jobs send at one
			// instant share round trips.
			var ap *redis.AutoPipeliner
			var err error
			switch c := c.(type) {
			case *redis.Client:
				ap, err = c.AutoPipeline()
			case *redis.ClusterClient:
				ap, err = c.AutoPipeline()
			}
			if err != nil || ap == nil {
				return nil, fmt.Errorf("no autopipeliner: %v", err)
			}
			db = lock.NewDB(ap)
		}
		js := make([]cron.Job, jobs)
		for i := range js {
			js[i] = &leasedJob{i: i, db: db, t: t}
		}
		rt, err := cron.Start(js, cron.WithReplica("replica-"+strconv.Itoa(r)),
			cron.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))),
			cron.WithObserver(cron.Observer{RunSkipped: func(tk cron.Tick, reason string, _ error) { t.skipped(tk.Slot.Start, reason) }}))
		if err != nil {
			return nil, err
		}
		return func() error { return rt.Shutdown(context.Background()) }, nil
	case "gocron":
		s, err := gocron.NewScheduler(gocron.WithDistributedLocker(newLocker(c)))
		if err != nil {
			return nil, err
		}
		for i := range jobs {
			task := func() { t.ran(i, time.Now().Truncate(time.Second)) }
			if _, err := s.NewJob(gocron.CronJob("* * * * * *", true), gocron.NewTask(task),
				gocron.WithName("job-"+strconv.Itoa(i))); err != nil {
				return nil, err
			}
		}
		s.Start()
		return s.Shutdown, nil
	case "setnx":
		return startSetNX(r, c, jobs, t), nil
	}
	return nil, fmt.Errorf("unknown -lib %q (want ours, ours-ap, gocron or setnx)", lib)
}

// startSetNX starts a replica of the bare lease: at every second, each job
// sends SET <job>:<second> NX PX 2000 and runs if it got the key; the key
// is never released, so a late replica finds it.
func startSetNX(r int, c redis.UniversalClient, jobs int, t *tally) func() error {
	ctx, cancel := context.WithCancel(context.Background())
	token := "replica-" + strconv.Itoa(r)
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			next := time.Now().Truncate(time.Second).Add(time.Second)
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Until(next)):
			}
			key := ":" + strconv.FormatInt(next.Unix(), 10)
			for i := range jobs {
				wg.Go(func() {
					ok, err := c.SetNX(ctx, "job-"+strconv.Itoa(i)+key, token, 2*time.Second).Result()
					if err == nil && ok {
						t.ran(i, next)
					}
				})
			}
		}
	})
	return func() error { cancel(); wg.Wait(); return nil }
}

// locker is a gocron.Locker on redsync, as gocron's Redis locker is: one
// try at the lock, redsync's default expiry (8 s), released after the run.
type locker struct{ rs *redsync.Redsync }

func newLocker(c redis.UniversalClient) *locker { return &locker{rs: redsync.New(goredis.NewPool(c))} }

var errNotObtained = errors.New("lock not obtained")

func (l *locker) Lock(ctx context.Context, key string) (gocron.Lock, error) {
	m := l.rs.NewMutex(key, redsync.WithTries(1))
	if err := m.LockContext(ctx); err != nil {
		return nil, errNotObtained
	}
	return unlocker{m}, nil
}

type unlocker struct{ m *redsync.Mutex }

func (u unlocker) Unlock(ctx context.Context) error {
	ok, err := u.m.UnlockContext(ctx)
	if err == nil && !ok {
		err = errors.New("lock was not held")
	}
	return err
}
