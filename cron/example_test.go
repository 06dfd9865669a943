package cron_test

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"os"
	"time"

	"github.com/wakuwaku-go/wakuwaku/cron"
	"github.com/wakuwaku-go/wakuwaku/interval"
)

// HourlyReport is spaced with AtLeast: its runs never overlap and start at
// least an hour apart, which a lease covering most of the hour relies on.
type HourlyReport struct {
	sent chan<- cron.Tick
}

func (HourlyReport) Interval() interval.Interval { return interval.AtLeast(time.Hour) }

func (r HourlyReport) Process(ctx context.Context, tick cron.Tick) error {
	// Build the report for the hour before tick.Scheduled here.
	r.sent <- tick
	return nil
}

// This example starts a job, waits for its startup run and shuts the
// runtime down. The job has no Name method, so it is known by its type.
func Example() {
	sent := make(chan cron.Tick, 1)
	rt, err := cron.Start([]cron.Job{HourlyReport{sent: sent}})
	if err != nil {
		log.Fatal(err)
	}
	tick := <-sent
	fmt.Println(tick.Job, "run", tick.Run)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := rt.Shutdown(ctx); err != nil {
		log.Fatal(err)
	}
	// Output: cron_test.HourlyReport run 1
}

// CacheCleanup is spaced with AfterFinish: it rests five minutes between
// runs, however long a run takes.
type CacheCleanup struct {
	done chan<- cron.Tick
}

func (CacheCleanup) Name() string                { return "cache-cleanup" }
func (CacheCleanup) Interval() interval.Interval { return interval.AfterFinish(5 * time.Minute) }

func (c CacheCleanup) Process(ctx context.Context, tick cron.Tick) error {
	c.done <- tick
	return nil
}

// This example runs a job that rests between runs; its Name method names
// it.
func Example_afterFinish() {
	done := make(chan cron.Tick, 1)
	job := CacheCleanup{done: done}
	rt, err := cron.Start([]cron.Job{job})
	if err != nil {
		log.Fatal(err)
	}
	tick := <-done
	fmt.Printf("%s run %d, then %v\n", tick.Job, tick.Run, job.Interval())
	if err := rt.Shutdown(context.Background()); err != nil {
		log.Fatal(err)
	}
	// Output: cache-cleanup run 1, then after finish 5m0s
}

// Heartbeat is spaced with AfterStart: it beats every 30 seconds even when
// a beat is slow, so beats may overlap (at most cron.DefaultMaxOverlap of
// them, unless cron.WithMaxOverlap says otherwise).
type Heartbeat struct {
	beat chan<- cron.Tick
}

func (Heartbeat) Name() string                { return "heartbeat" }
func (Heartbeat) Interval() interval.Interval { return interval.AfterStart(30 * time.Second) }

func (h Heartbeat) Process(ctx context.Context, tick cron.Tick) error {
	h.beat <- tick
	return nil
}

// This example runs a job on a fixed beat, allowing two beats at a time.
func Example_afterStart() {
	beat := make(chan cron.Tick, 1)
	job := Heartbeat{beat: beat}
	rt, err := cron.Start([]cron.Job{job}, cron.WithMaxOverlap(2))
	if err != nil {
		log.Fatal(err)
	}
	tick := <-beat
	fmt.Printf("%s run %d, then %v\n", tick.Job, tick.Run, job.Interval())
	if err := rt.Shutdown(context.Background()); err != nil {
		log.Fatal(err)
	}
	// Output: heartbeat run 1, then after start 30s
}

// nightly is a package-level policy: MustCron suits constant specs.
var nightly = interval.MustCron("CRON_TZ=Europe/Paris 0 3 * * *")

// NightlyExport runs at 3:00 in Paris, and once at startup. A slot that
// comes while the previous export is still going is skipped.
type NightlyExport struct {
	exported chan<- cron.Tick
}

func (NightlyExport) Name() string                { return "nightly-export" }
func (NightlyExport) Interval() interval.Interval { return nightly }

func (n NightlyExport) Process(ctx context.Context, tick cron.Tick) error {
	// Key the export by tick.Scheduled, the slot, to make it idempotent.
	n.exported <- tick
	return nil
}

// This example runs a job on a cron spec.
func Example_cron() {
	exported := make(chan cron.Tick, 1)
	rt, err := cron.Start([]cron.Job{NightlyExport{exported: exported}})
	if err != nil {
		log.Fatal(err)
	}
	tick := <-exported
	fmt.Printf("%s run %d, then %v\n", tick.Job, tick.Run, nightly)
	if err := rt.Shutdown(context.Background()); err != nil {
		log.Fatal(err)
	}
	// Output: nightly-export run 1, then cron "CRON_TZ=Europe/Paris 0 3 * * *"
}

// This example makes a job from a function. With cron.WithLease it would
// be a leased job, run once per slot across replicas.
func ExampleFunc() {
	ran := make(chan cron.Tick, 1)
	cleanup := cron.Func("cache-cleanup", interval.AfterFinish(5*time.Minute), func(ctx context.Context, tick cron.Tick) error {
		ran <- tick
		return nil
	})
	rt, err := cron.Start([]cron.Job{cleanup})
	if err != nil {
		log.Fatal(err)
	}
	tick := <-ran
	fmt.Println(tick.Job, "run", tick.Run)
	if err := rt.Shutdown(context.Background()); err != nil {
		log.Fatal(err)
	}
	// Output: cache-cleanup run 1
}

// This example puts an admission in front of a job, as a lease taken once
// per interval across replicas would be: here another replica has it, so
// the startup run is skipped, and the observer hears why.
func ExampleWithAdmission() {
	skipped := make(chan string, 1)
	observer := cron.Observer{
		RunSkipped: func(t cron.Tick, reason string, err error) {
			skipped <- fmt.Sprintf("%s run %d skipped: %s", t.Job, t.Run, reason)
		},
	}
	leaseHeld := func(ctx context.Context, t cron.Tick) (bool, string, error) {
		return false, "held by another replica", nil
	}
	rt, err := cron.Start([]cron.Job{CacheCleanup{}},
		cron.WithAdmission("cache-cleanup", leaseHeld), cron.WithObserver(observer))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(<-skipped)
	if err := rt.Shutdown(context.Background()); err != nil {
		log.Fatal(err)
	}
	// Output: cache-cleanup run 1 skipped: held by another replica
}

// failing is a job whose runs fail.
type failing struct{}

func (failing) Name() string                { return "failing" }
func (failing) Interval() interval.Interval { return interval.AtLeast(time.Minute) }

func (failing) Process(context.Context, cron.Tick) error {
	return fmt.Errorf("the report service answered %d", 503)
}

// This example logs a runtime's life as text: its start, a run that
// fails, and its shutdown. The runtime keeps the job's schedule after a
// failure.
func ExampleWithLogger() {
	logger := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			switch a.Key {
			case slog.TimeKey, "scheduled", "slot", "duration", "runs":
				return slog.Attr{} // they change from run to run
			}
			return a
		},
	}))
	done := make(chan struct{})
	finished := cron.Observer{RunFinished: func(cron.Tick, error, time.Duration) { close(done) }}
	rt, err := cron.Start([]cron.Job{failing{}},
		cron.WithLogger(logger), cron.WithReplica("replica-1"), cron.WithObserver(finished))
	if err != nil {
		log.Fatal(err)
	}
	<-done
	if err := rt.Shutdown(context.Background()); err != nil {
		log.Fatal(err)
	}
	// Output:
	// level=INFO msg="cron runtime started" replica=replica-1 jobs=1 names=[failing]
	// level=INFO msg="cron job started" replica=replica-1 job=failing tick=1
	// level=ERROR msg="cron job failed" replica=replica-1 job=failing tick=1 outcome=error error="the report service answered 503"
	// level=INFO msg="cron runtime shutting down" replica=replica-1
	// level=INFO msg="cron runtime stopped" replica=replica-1
}
