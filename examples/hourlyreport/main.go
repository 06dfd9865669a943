// Command hourlyreport runs the HourlyReport cron job in several replicas
// at once, so that you can watch them agree on who runs each interval.
//
// Each replica is what a service's main would be: its own Redis client, a
// ServiceBuilder with the job, Start, and a graceful Shutdown on exit. The
// job runs in every replica, at startup and then at least an interval
// apart, and takes a lease that covers most of the interval and is never
// released: the first replica to tick runs the report, the others find the
// lease held until the next interval.
//
// By default the replicas share an embedded Redis, and an "hour" lasts two
// seconds:
//
//	go run ./examples/hourlyreport                   # until Ctrl-C
//	go run ./examples/hourlyreport -duration 10s
//	go run ./examples/hourlyreport -redis redis://127.0.0.1:6379/0 -hour 1m
//	go run ./examples/hourlyreport -builtin    # the runtime takes the lease
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/wakuwaku-go/wakuwaku"
	"github.com/wakuwaku-go/wakuwaku/cron"
	"github.com/wakuwaku-go/wakuwaku/interval"
	"github.com/wakuwaku-go/wakuwaku/lock"
)

// Replica is the dependency an HourlyReport is built from: the replica's
// Redis handle and the demo's knobs.
type Replica struct {
	Name   string
	Db     lock.Db
	Hour   time.Duration     // the report's interval
	Lease  lock.Lock[string] // held for 55/60 of Hour and never released
	Events chan<- Event      // what the demo prints
}

// HourlyReport builds a report once per interval across all replicas.
type HourlyReport struct {
	r Replica
}

// NewHourlyReport is the job's constructor, which the builder calls with the
// replica's dependency.
func NewHourlyReport(r Replica) *HourlyReport { return &HourlyReport{r: r} }

// Interval spaces the runs of one replica at least an interval apart, never
// overlapping, which the lease arithmetic relies on.
func (j *HourlyReport) Interval() interval.Interval { return interval.AtLeast(j.r.Hour) }

// Process runs the report unless another replica has run it this interval.
func (j *HourlyReport) Process(ctx context.Context, tick cron.Tick) error {
	lease, err := j.r.Lease.TryLock(ctx, j.r.Db, "hourly-report")
	if err != nil {
		return err // logged by the runtime; the job keeps its schedule
	}
	if lease == nil {
		j.r.Events <- Event{Replica: j.r.Name, At: tick.Scheduled, Ran: false}
		return nil // another replica ran it this interval
	}
	j.r.Events <- Event{Replica: j.r.Name, At: tick.Scheduled, Ran: true}
	return buildReport(ctx, j.r.Hour/10)
}

// LeasedReport is HourlyReport with the lease left to the runtime: it
// declares, by implementing cron.Leased, that it runs once per interval
// across replicas, and the runtime takes the lease before each run.
type LeasedReport struct {
	r Replica
}

// NewLeasedReport is LeasedReport's constructor.
func NewLeasedReport(r Replica) *LeasedReport { return &LeasedReport{r: r} }

// Name is the job's name, and so its lease's: the same in every replica.
func (j *LeasedReport) Name() string { return "hourly-report" }

// Interval is as for HourlyReport.
func (j *LeasedReport) Interval() interval.Interval { return interval.AtLeast(j.r.Hour) }

// Lease asks for the runtime's lease, with its default TTL of 11/12 of the
// interval.
func (j *LeasedReport) Lease() cron.Lease { return cron.Lease{Db: j.r.Db} }

// Process runs only when this replica holds the interval's lease.
func (j *LeasedReport) Process(ctx context.Context, tick cron.Tick) error {
	j.r.Events <- Event{Replica: j.r.Name, At: tick.Scheduled, Ran: true}
	return buildReport(ctx, j.r.Hour/10)
}

// buildReport stands for the real work.
func buildReport(ctx context.Context, takes time.Duration) error {
	select {
	case <-time.After(takes):
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// Event is one tick of one replica: it ran the report, or found it held.
type Event struct {
	Replica string
	At      time.Time // when the tick was due
	Ran     bool
}

func main() {
	hour := flag.Duration("hour", 2*time.Second, "the report's interval (an hour in production)")
	duration := flag.Duration("duration", 0, "stop by itself after this long (0: run until Ctrl-C)")
	redisURL := flag.String("redis", "", "a real Redis, as redis://host:port/db (default: an embedded one)")
	replicas := flag.Int("replicas", 3, "how many replicas to run")
	builtin := flag.Bool("builtin", false, "let the runtime take the lease (cron.Leased) instead of the job")
	flag.Parse()
	if err := run(os.Stdout, *hour, *duration, *redisURL, *replicas, *builtin); err != nil {
		log.Fatal(err)
	}
}

func run(out io.Writer, hour, duration time.Duration, redisURL string, replicas int, builtin bool) error {
	if hour < 10*time.Millisecond || replicas < 1 || duration < 0 {
		return errors.New("want -hour ≥ 10ms, -replicas ≥ 1 and -duration ≥ 0")
	}
	out = &lockedWriter{w: out} // the printer and run both write to it
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, duration)
		defer cancel()
	}

	opts, closeRedis, err := redisOptions(redisURL)
	if err != nil {
		return err
	}
	defer closeRedis()

	lease := lock.New[string]("cron", hour*55/60)
	events := make(chan Event, 64)
	printed := make(chan struct{})
	go printIntervals(out, events, replicas, printed)

	fmt.Fprintf(out, "%d replicas, an interval of %v, a lease of %v\n", replicas, hour, lease.TTL())
	var running []*wakuwaku.Crons
	start := time.Now()
	for i := range replicas {
		// Replicas start at offset times, as they do after a deploy.
		if !sleep(ctx, time.Until(start.Add(time.Duration(i)*hour/time.Duration(replicas)))) {
			break
		}
		client := redis.NewClient(opts)
		defer client.Close()
		dep := Replica{
			Name:   fmt.Sprintf("replica-%d", i+1),
			Db:     lock.NewDb(client),
			Hour:   hour,
			Lease:  lease,
			Events: events,
		}
		b := wakuwaku.NewServiceBuilder(dep)
		if builtin {
			wakuwaku.CronJob(b, NewLeasedReport).WithCronOptions(cron.WithObserver(cron.Observer{
				RunSkipped: func(tick cron.Tick, reason string, _ error) {
					if reason == cron.ReasonLeaseHeld {
						events <- Event{Replica: dep.Name, At: tick.Scheduled, Ran: false}
					}
				},
			}))
		} else {
			wakuwaku.CronJob(b, NewHourlyReport)
		}
		_, crons, err := b.Start()
		if err != nil {
			return err
		}
		running = append(running, crons)
	}

	<-ctx.Done()
	fmt.Fprintln(out, "shutting down: waiting for runs in progress")
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var errs []error
	for _, c := range running {
		errs = append(errs, c.Shutdown(shutdownCtx))
	}
	close(events)
	<-printed
	fmt.Fprintln(out, "all replicas stopped")
	return errors.Join(errs...)
}

// redisOptions returns how to reach Redis: url, or an embedded server whose
// clock runs in real time, so that leases expire as on a real server.
func redisOptions(url string) (*redis.Options, func(), error) {
	if url != "" {
		opts, err := redis.ParseURL(url)
		return opts, func() {}, err
	}
	m, err := miniredis.Run()
	if err != nil {
		return nil, nil, err
	}
	// miniredis expires keys only when told that time passed.
	done := make(chan struct{})
	ticked := make(chan struct{})
	go func() {
		defer close(ticked)
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		last := time.Now()
		for {
			select {
			case now := <-t.C:
				m.FastForward(now.Sub(last))
				last = now
			case <-done:
				return
			}
		}
	}()
	return &redis.Options{Addr: m.Addr()}, func() { close(done); <-ticked; m.Close() }, nil
}

// lockedWriter serializes writes to w.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// sleep waits for d, and reports false if ctx ended first.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// printIntervals prints one line per interval: the replica that ran the
// report and those that found it held. An interval starts with a run; its
// line is printed once every replica ticked in it, or when the next
// interval starts.
func printIntervals(out io.Writer, events <-chan Event, replicas int, done chan<- struct{}) {
	defer close(done)
	var (
		n     int
		ran   *Event
		held  []string
		first time.Time
	)
	flush := func() {
		if ran == nil {
			return
		}
		line := fmt.Sprintf("interval %d at %6.2fs: report by %s", n, ran.At.Sub(first).Seconds(), ran.Replica)
		if len(held) > 0 {
			line += "; held for " + strings.Join(held, ", ")
		}
		fmt.Fprintln(out, line)
		ran, held = nil, nil
	}
	for e := range events {
		if first.IsZero() {
			first = e.At
		}
		if e.Ran {
			flush()
			n++
			ran = &e
		} else if ran == nil {
			// The lease was taken before this program started (a real
			// Redis, a previous run): nobody here ran this interval.
			fmt.Fprintf(out, "%s found the lease of an earlier run held\n", e.Replica)
		} else {
			held = append(held, fmt.Sprintf("%s (+%.2fs)", e.Replica, e.At.Sub(ran.At).Seconds()))
		}
		if ran != nil && 1+len(held) == replicas {
			flush()
		}
	}
	flush()
}
