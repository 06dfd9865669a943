// Command hourlyreport runs the HourlyReport cron job in several replicas
// at once, so that you can watch them agree on who runs each interval.
//
// Each replica is what a service's main would be: its own Redis client, a
// ServiceBuilder with the job, Start, and a graceful Shutdown on exit. The
// job runs in every replica, at startup and then at least an interval
// apart. It implements cron.Leased, as in the README: before each run the
// runtime takes a lease that covers most of the interval and is never
// released, so the first replica to tick runs the report and the others
// skip it until the next interval. With -seed the job takes that lease
// itself, the Rust crate's way, with the same key and the same effect.
//
// By default the replicas share an embedded Redis, and an "hour" lasts two
// seconds:
//
//	go run ./examples/hourlyreport                   # until Ctrl-C
//	go run ./examples/hourlyreport -duration 10s
//	go run ./examples/hourlyreport -redis redis://127.0.0.1:6379/0 -hour 1m
//	go run ./examples/hourlyreport -seed             # the job takes the lease
//	go run ./examples/hourlyreport -admin :8080      # and the status page
//	SSL_CERT_FILE=ca.pem go run ./examples/hourlyreport -redis rediss://user:password@host:6380
//
// The last one speaks TLS to Redis, as an ACL user, trusting the
// certificate authority in ca.pem (docs/operating.md gives the user's
// rule).
//
// With -admin the program also serves the jobs' status page
// (package statuspage), with its Pause, Resume and Run now buttons, at the
// root of that address: open http://localhost:8080/, pause the report and
// watch the replicas skip it. The demo has no authentication: a service
// mounts the page behind its own.
//
// If Redis does not answer within 5 seconds, it exits at once with status 1
// and one line on stderr that says why, before any replica starts.
//
// The first Ctrl-C (or SIGTERM) shuts the replicas down gracefully, waiting
// up to 10 seconds for the runs in progress; a second one exits at once,
// with a non-zero status.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
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
	"github.com/wakuwaku-go/wakuwaku/cron/statuspage"
	"github.com/wakuwaku-go/wakuwaku/interval"
	"github.com/wakuwaku-go/wakuwaku/lock"
)

// Replica is the dependency a report job is built from: the replica's
// Redis handle and the demo's knobs.
type Replica struct {
	Name   string
	DB     lock.DB
	Hour   time.Duration     // the report's interval
	Lease  lock.Lock[string] // for -seed: held for 55/60 of Hour and never released
	Events chan<- Event      // what the demo prints
}

// HourlyReport builds a report once per interval across all replicas. It
// declares, by implementing cron.Leased, that it runs once per interval
// across replicas, and the runtime takes the lease before each run.
type HourlyReport struct {
	r Replica
}

// NewHourlyReport is the job's constructor, which the builder calls with the
// replica's dependency.
func NewHourlyReport(r Replica) *HourlyReport { return &HourlyReport{r: r} }

// Name is the job's name, and so its lease's: the same in every replica.
func (j *HourlyReport) Name() string { return "hourly-report" }

// Interval spaces the runs of one replica at least an interval apart, never
// overlapping, which the lease arithmetic relies on.
func (j *HourlyReport) Interval() interval.Interval { return interval.AtLeast(j.r.Hour) }

// Lease asks for the runtime's lease, with its default TTL of 11/12 of the
// interval.
func (j *HourlyReport) Lease() cron.LeaseConfig { return cron.LeaseConfig{DB: j.r.DB} }

// Process runs only when this replica holds the interval's lease.
func (j *HourlyReport) Process(ctx context.Context, tick cron.Tick) error {
	j.r.Events <- Event{Replica: j.r.Name, At: tick.Scheduled, Kind: Ran}
	return buildReport(ctx, j.r.Hour/10)
}

// SeedReport is HourlyReport the Rust crate's way: the job takes the lease itself,
// on the same key, and returns when another replica holds it.
type SeedReport struct {
	r Replica
}

// NewSeedReport is SeedReport's constructor.
func NewSeedReport(r Replica) *SeedReport { return &SeedReport{r: r} }

// Interval is as for HourlyReport.
func (j *SeedReport) Interval() interval.Interval { return interval.AtLeast(j.r.Hour) }

// Process runs the report unless another replica has run it this interval.
func (j *SeedReport) Process(ctx context.Context, tick cron.Tick) error {
	lease, err := j.r.Lease.TryLock(ctx, j.r.DB, "hourly-report")
	if err != nil {
		return err // logged by the runtime; the job keeps its schedule
	}
	if lease == nil {
		j.r.Events <- Event{Replica: j.r.Name, At: tick.Scheduled, Kind: Skipped}
		return nil // another replica ran it this interval
	}
	j.r.Events <- Event{Replica: j.r.Name, At: tick.Scheduled, Kind: Ran}
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

// EventKind says what an Event reports.
type EventKind int

// The kinds of Event.
const (
	Started EventKind = iota // the replica started its jobs
	Ran                      // the replica ran the report
	Skipped                  // the replica found the lease held and skipped the report
	Note                     // a line of the demo's own (Event.Note)
)

// Event is one thing that happened in one replica, in the order the
// printer prints it.
type Event struct {
	Replica string
	At      time.Time // when the tick was due, or when the replica started
	Kind    EventKind
	Note    string
}

// config is what the command line says.
type config struct {
	hour     time.Duration // the report's interval
	duration time.Duration // 0: until a signal
	redisURL string        // "": an embedded Redis
	replicas int
	seed     bool   // the job takes the lease, instead of the runtime
	admin    string // "": no status page; else the address to serve it on
}

func main() {
	cfg, err := parseFlags(os.Args[1:])
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		os.Exit(2) // the flag package has said why
	}
	// go-redis logs every failed dial on stderr by itself. The demo says
	// what failed on its own, in one line, so go-redis's lines go to slog
	// at Debug, below the default logger's level.
	redis.SetLogger(redisLog{slog.Default(), slog.LevelDebug})
	if err := run(os.Stdout, cfg); err != nil {
		fmt.Fprintf(os.Stderr, "hourlyreport: %v\n", err)
		os.Exit(1)
	}
}

// redisLog routes go-redis's own log lines into slog, at one level.
type redisLog struct {
	log   *slog.Logger
	level slog.Level
}

// Printf is go-redis's logging interface (see redis.SetLogger).
func (r redisLog) Printf(ctx context.Context, format string, v ...any) {
	r.log.Log(ctx, r.level, fmt.Sprintf(format, v...), "source", "go-redis")
}

// parseFlags reads the command line.
func parseFlags(args []string) (config, error) {
	var cfg config
	fs := flag.NewFlagSet("hourlyreport", flag.ContinueOnError)
	fs.DurationVar(&cfg.hour, "hour", 2*time.Second, "the report's interval (an hour in production)")
	fs.DurationVar(&cfg.duration, "duration", 0, "stop by itself after this long (0: run until Ctrl-C)")
	fs.StringVar(&cfg.redisURL, "redis", "", "a real Redis, as redis://host:port/db (default: an embedded one)")
	fs.IntVar(&cfg.replicas, "replicas", 3, "how many replicas to run")
	fs.BoolVar(&cfg.seed, "seed", false, "let the job take the lease by hand (the Rust crate's way) instead of the runtime (cron.Leased)")
	fs.StringVar(&cfg.admin, "admin", "", "serve the jobs' status page, with its actions, on this address, as :8080 (default: none)")
	return cfg, fs.Parse(args)
}

// errSecondSignal is run's error when a second signal cut the shutdown short.
var errSecondSignal = errors.New("second signal: exiting without waiting for the runs in progress")

// run runs cfg.replicas replicas until cfg.duration has passed or a signal
// comes, then shuts them down. A second signal during the shutdown ends it
// at once, and run returns errSecondSignal.
func run(out io.Writer, cfg config) error {
	hour := cfg.hour
	if hour < 10*time.Millisecond || cfg.replicas < 1 || cfg.duration < 0 {
		return errors.New("want -hour ≥ 10ms, -replicas ≥ 1 and -duration ≥ 0")
	}
	out = &lockedWriter{w: out} // the printer and run both write to it
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if cfg.duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cfg.duration)
		defer cancel()
	}

	opts, closeRedis, err := redisOptions(cfg.redisURL)
	if err != nil {
		return err
	}
	defer closeRedis()
	// Fail now, in one line, rather than start replicas whose every
	// lease would fail.
	if err := ping(ctx, opts); err != nil {
		return err
	}

	// Listen before any replica starts, so that a bad -admin fails now.
	var page *adminServer
	if cfg.admin != "" {
		client := redis.NewClient(opts)
		defer client.Close()
		if page, err = serveAdmin(cfg.admin, lock.NewDB(client)); err != nil {
			return err
		}
		defer page.srv.Close() // if run returns early; after Shutdown, a no-op
	}

	lease := lock.New[string]("cron", hour*55/60) // the runtime's default is the same 11/12
	events := make(chan Event, 64)
	printed := make(chan struct{})
	go printIntervals(out, events, cfg.replicas, printed)

	apart := hour / time.Duration(cfg.replicas)
	who := "the runtime takes it (cron.Leased)"
	if cfg.seed {
		who = "the job takes it (-seed)"
	}
	fmt.Fprintf(out, "an interval of %v, a lease of %v: %s; a replica starts every %v\n",
		round(hour), round(lease.TTL()), who, round(apart))
	if page != nil {
		fmt.Fprintf(out, "the jobs' status page: %s\n", page.url)
	}
	var running []*wakuwaku.Crons
	start := time.Now()
	for i := range cfg.replicas {
		// Replicas start at offset times, as they do after a deploy.
		if !sleep(ctx, time.Until(start.Add(time.Duration(i)*apart))) {
			break
		}
		client := redis.NewClient(opts)
		defer client.Close()
		dep := Replica{
			Name:   fmt.Sprintf("replica-%d", i+1),
			DB:     lock.NewDB(client),
			Hour:   hour,
			Lease:  lease,
			Events: events,
		}
		events <- Event{Replica: dep.Name, At: time.Now(), Kind: Started}
		b := wakuwaku.NewServiceBuilder(dep).WithCronOptions(cron.WithReplica(dep.Name))
		if cfg.seed {
			wakuwaku.CronJob(b, NewSeedReport)
		} else {
			wakuwaku.CronJob(b, NewHourlyReport).WithCronOptions(cron.WithObserver(cron.Observer{
				RunSkipped: func(tick cron.Tick, reason string, _ error) {
					switch reason {
					case cron.ReasonLeaseHeld:
						events <- Event{Replica: dep.Name, At: tick.Scheduled, Kind: Skipped}
					case cron.ReasonPaused: // with -admin's Pause button, or wakuwaku pause
						events <- Event{Kind: Note, Note: dep.Name + " skipped: the job is paused"}
					}
				},
			}))
		}
		_, crons, err := b.Start()
		if err != nil {
			return err
		}
		running = append(running, crons)
	}

	<-ctx.Done()
	// The first signal (or the end of -duration) asks for a graceful
	// shutdown. From here on a signal is no longer ctx's: stop that, and
	// listen again, so that a second signal ends the grace at once.
	stop()
	force, cancelForce := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancelForce()
	events <- Event{Kind: Note, Note: fmt.Sprintf("shutting down %s: waiting for runs in progress (Ctrl-C again to exit at once)", plural(len(running), "replica"))}
	shutdownCtx, cancel := context.WithTimeout(force, 10*time.Second)
	defer cancel()
	var errs []error
	for _, c := range running {
		errs = append(errs, c.Shutdown(shutdownCtx))
	}
	if page != nil {
		errs = append(errs, page.shutdown(shutdownCtx))
	}
	if force.Err() != nil {
		// Runs may still be going, and may still send events: leave
		// events open, and return at once.
		return errSecondSignal
	}
	close(events)
	<-printed
	if !cfg.seed && len(running) > 0 {
		client := redis.NewClient(opts)
		defer client.Close()
		printRecord(out, lock.NewDB(client))
	}
	fmt.Fprintln(out, "all replicas stopped")
	return errors.Join(errs...)
}

// adminServer serves the status page.
type adminServer struct {
	srv    *http.Server
	url    string     // where to open it
	served chan error // Serve's error, once it returned
}

// serveAdmin starts serving the status page of the jobs in db on addr.
func serveAdmin(addr string, db lock.DB) (*adminServer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("-admin: %w", err)
	}
	mux := http.NewServeMux()
	// The page answers any path; the mux gives it the root only. A service
	// would mount it under a prefix of its own, with http.StripPrefix,
	// behind its authentication.
	mux.Handle("/{$}", statuspage.New(cron.NewAdmin(db), statuspage.WithActions()))
	a := &adminServer{
		srv:    &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second},
		url:    "http://" + browsable(ln.Addr()) + "/",
		served: make(chan error, 1),
	}
	go func() { a.served <- a.srv.Serve(ln) }()
	return a, nil
}

// shutdown stops the server and waits for it.
func (a *adminServer) shutdown(ctx context.Context) error {
	err := a.srv.Shutdown(ctx)
	if serr := <-a.served; !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	return err
}

// browsable is the address of a listener as a browser would open it:
// localhost for all interfaces.
func browsable(addr net.Addr) string {
	host, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		return addr.String()
	}
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		host = "localhost"
	}
	return net.JoinHostPort(host, port)
}

// printRecord prints what the job's record in Redis says, as any replica
// or an operator's tool reads it (cron.Admin).
func printRecord(out io.Writer, db lock.DB) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := cron.NewAdmin(db).Status(ctx, "hourly-report")
	switch {
	case err != nil:
		fmt.Fprintf(out, "the job's record: %v\n", err)
	case st.Last != nil:
		fmt.Fprintf(out, "the job's record in Redis: last run by %s, outcome %s\n", st.Last.Replica, st.Last.Outcome)
	default:
		fmt.Fprintln(out, "the job's record: no run has ended yet")
	}
}

// round rounds d for printing: to the millisecond under a second, to the
// hundredth of a second above.
func round(d time.Duration) time.Duration {
	if d < time.Second {
		return d.Round(time.Millisecond)
	}
	return d.Round(10 * time.Millisecond)
}

// plural says "1 replica", "3 replicas".
func plural(n int, noun string) string {
	if n == 1 {
		return fmt.Sprintf("1 %s", noun)
	}
	return fmt.Sprintf("%d %ss", n, noun)
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

// ping checks that the Redis of opts answers within a few seconds.
func ping(ctx context.Context, opts *redis.Options) error {
	client := redis.NewClient(opts)
	defer client.Close()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := lock.NewDB(client).Ping(ctx); err != nil {
		return fmt.Errorf("cannot reach redis at %s: %w", opts.Addr, err)
	}
	return nil
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

// printIntervals prints the events: a line per replica that starts, and one
// line per interval, with the replica that ran the report and those that
// skipped it. An interval starts with a run; its line is printed once every
// replica ticked in it, or when the next interval starts, or before a note.
func printIntervals(out io.Writer, events <-chan Event, replicas int, done chan<- struct{}) {
	defer close(done)
	var (
		n       int
		ran     *Event
		skipped []string
		first   time.Time
	)
	flush := func() {
		if ran == nil {
			return
		}
		line := fmt.Sprintf("interval %d at %6.2fs: report by %s", n, ran.At.Sub(first).Seconds(), ran.Replica)
		if len(skipped) > 0 {
			line += "; " + strings.Join(skipped, ", ")
		}
		fmt.Fprintln(out, line)
		ran, skipped = nil, nil
	}
	for e := range events {
		switch e.Kind {
		case Started:
			fmt.Fprintf(out, "%s started\n", e.Replica)
			continue
		case Note:
			flush()
			fmt.Fprintln(out, e.Note)
			continue
		}
		if first.IsZero() {
			first = e.At
		}
		switch {
		case e.Kind == Ran:
			flush()
			n++
			ran = &e
		case ran == nil:
			// The lease was taken before this program started (a real
			// Redis, a previous run), or its interval's line is printed:
			// nobody here ran this interval since.
			fmt.Fprintf(out, "%s skipped: the lease of an earlier run is held\n", e.Replica)
		default:
			skipped = append(skipped, fmt.Sprintf("%s skipped at %+.2fs", e.Replica, e.At.Sub(ran.At).Seconds()))
		}
		if ran != nil && 1+len(skipped) == replicas {
			flush()
		}
	}
	flush()
}
