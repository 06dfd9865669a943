package main

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wakuwaku-go/wakuwaku/bench"
	"github.com/wakuwaku-go/wakuwaku/bench/cronresult"
	"github.com/wakuwaku-go/wakuwaku/cron"
	"github.com/wakuwaku-go/wakuwaku/interval"
	"github.com/wakuwaku-go/wakuwaku/lock"
)

// leasedJob is a leased job of our runtime on ourBurst, over db.
type leasedJob struct {
	name string
	db   lock.DB
}

func (j *leasedJob) Name() string                { return j.name }
func (j *leasedJob) Interval() interval.Interval { return ourBurst }
func (j *leasedJob) Lease() cron.LeaseConfig     { return cron.LeaseConfig{DB: j.db} }
func (j *leasedJob) Process(_ context.Context, t cron.Tick) error {
	rec.add(time.Since(t.Scheduled))
	return nil
}

// runLeased starts n jobs of which due are leased jobs on burstSpec, their
// starts spread over spread of each slot (none if 0), over a redis-server
// of its own, and measures, from half a second before a burst for dur, how
// late their runs began Process (after the claim: a run's round trip to
// Redis and its wait for a connection and for the server are in it), how
// many ticks were skipped (on this one replica, only a claim that failed
// or came too late skips one), and the server's CPU.
func runLeased(n, due int, spread, dur time.Duration) error {
	srv, err := bench.StartServer()
	if err != nil {
		return err
	}
	defer srv.Close()
	client := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer client.Close()
	db := lock.NewDB(client)
	now := time.Now()
	spec := dailySpec(now)
	// No startup run: the first runs are a burst's, and the start sends
	// one announcement per job instead, before the window.
	ourEvery = interval.MustCron(spec)
	ourBurst = interval.MustCron(burstSpec).WithSpread(spread).WithoutStartupRun()
	noStartup = true
	rec.late = make([]int64, due*(int(dur/burstEvery)+2))
	jobs := make([]cron.Job, n)
	for i := range jobs {
		name := "job-" + strconv.Itoa(i)
		if i < due {
			jobs[i] = &leasedJob{name: name, db: db}
		} else {
			jobs[i] = &ourJob{name: name}
		}
	}
	var skipped atomic.Int64
	var mu sync.Mutex
	reasons := make(map[string]int64)
	began := time.Now()
	rt, err := cron.Start(jobs, cron.WithObserver(cron.Observer{
		RunSkipped: func(_ cron.Tick, reason string, _ error) {
			skipped.Add(1)
			mu.Lock()
			reasons[reason]++
			mu.Unlock()
		},
	}))
	if err != nil {
		return err
	}
	started := time.Since(began)
	// The window opens half a second before a burst at least 4 s away,
	// once the start's announcements are done.
	open := time.Now().Truncate(burstEvery).Add(2*burstEvery - 500*time.Millisecond)
	time.Sleep(time.Until(open))
	rec.n.Store(0)
	skipped.Store(0)
	mu.Lock()
	clear(reasons)
	mu.Unlock()
	ctx := context.Background()
	cpu0 := cpuTime()
	redis0, err := srv.CPU(ctx)
	if err != nil {
		return err
	}
	peak, stop := sampleCPU(ctx, srv, redis0)
	time.Sleep(time.Until(open.Add(dur)))
	redis1, err := srv.CPU(ctx)
	if err != nil {
		return err
	}
	cpu1 := cpuTime()
	stop()
	if err := rt.Shutdown(ctx); err != nil {
		return err
	}
	res := cronresult.Result{
		Lib: "ours", Mode: "leased", Jobs: n, Due: due, For: dur.Seconds(),
		StartS:       started.Seconds(),
		UserS:        cpu1.user - cpu0.user,
		SysS:         cpu1.sys - cpu0.sys,
		SpreadS:      spread.Seconds(),
		RedisCPUS:    redis1 - redis0,
		RedisPeakCPU: *peak,
		Skipped:      skipped.Load(),
		SkipReasons:  reasons,
	}
	lateness(&res)
	return emit(res)
}

// sampleCPU reads the server's CPU time every tenth of a second, from
// first, and keeps the most it used in any second, as a share of a core,
// until stop.
func sampleCPU(ctx context.Context, srv *bench.Server, first float64) (*float64, func()) {
	const every, window = 100 * time.Millisecond, time.Second
	type sample struct {
		at  time.Time
		cpu float64
	}
	peak := new(float64)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		samples := []sample{{time.Now(), first}}
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			cpu, err := srv.CPU(ctx)
			if err != nil {
				continue
			}
			now := sample{time.Now(), cpu}
			samples = append(samples, now)
			// The oldest sample at least a second before this one.
			i := len(samples) - 1
			for i > 0 && now.at.Sub(samples[i].at) < window {
				i--
			}
			if d := now.at.Sub(samples[i].at); d >= window {
				*peak = max(*peak, (now.cpu-samples[i].cpu)/d.Seconds())
			}
		}
	})
	return peak, func() { close(done); wg.Wait() }
}
