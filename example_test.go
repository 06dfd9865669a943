package wakuwaku_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/wakuwaku-go/wakuwaku"
	"github.com/wakuwaku-go/wakuwaku/cron"
	"github.com/wakuwaku-go/wakuwaku/interval"
	"github.com/wakuwaku-go/wakuwaku/lock"
)

// ReportLease is held for most of an hour and never released, so that at
// most one replica runs the report per hour.
var ReportLease = lock.New[string]("cron", 55*time.Minute)

// HourlyReport is the seed's job: it runs in every replica, and the lease
// decides which one builds the report.
type HourlyReport struct {
	db      lock.DB
	replica string
	done    chan<- string // for the example's output
}

// Interval starts runs at least an hour apart, never overlapping, in each
// replica: what the lease arithmetic relies on.
func (r *HourlyReport) Interval() interval.Interval { return interval.AtLeast(time.Hour) }

// Process builds the report unless another replica has this hour.
func (r *HourlyReport) Process(ctx context.Context, _ cron.Tick) error {
	lease, err := ReportLease.TryLock(ctx, r.db, "hourly-report")
	if err != nil {
		return err // logged by the runtime; the job keeps its schedule
	}
	if lease == nil {
		r.done <- r.replica + ": another replica ran it this hour"
		return nil
	}
	r.done <- r.replica + ": report built" // build_report()
	return nil
}

// replica is what a service's main does: a builder with its dependency and
// its jobs, and Start.
func replica(name string, client *redis.Client, done chan<- string) *wakuwaku.Crons {
	type deps struct {
		db      lock.DB
		replica string
	}
	b := wakuwaku.NewServiceBuilder(deps{lock.NewDB(client), name})
	wakuwaku.CronJob(b, func(d deps) *HourlyReport { return &HourlyReport{db: d.db, replica: d.replica, done: done} })
	_, crons, err := b.Start()
	if err != nil {
		log.Fatal(err)
	}
	return crons
}

// Two replicas start the same hourly job. Each runs it at startup; the
// first takes the hour's lease and builds the report, the second finds the
// lease held.
func Example_hourlyReport() {
	m := embeddedRedis()
	defer m.Close()
	done := make(chan string)

	a := replica("replica A", redis.NewClient(&redis.Options{Addr: m.Addr()}), done)
	fmt.Println(<-done)
	b := replica("replica B", redis.NewClient(&redis.Options{Addr: m.Addr()}), done)
	fmt.Println(<-done)

	// On exit: stop scheduling and wait for the runs in progress.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	fmt.Println(a.Shutdown(ctx), b.Shutdown(ctx))
	// Output:
	// replica A: report built
	// replica B: another replica ran it this hour
	// <nil> <nil>
}

// CleanupJob leaves the lease to the runtime: by implementing cron.Leased it
// declares that it runs once per interval across all replicas.
type CleanupJob struct {
	db   lock.DB
	done chan<- string
}

// Name names the job, and its lease key: @@wakuwaku-entity:Lock:cron:cleanup.
func (j *CleanupJob) Name() string { return "cleanup" }

// Interval is every ten minutes in each replica.
func (j *CleanupJob) Interval() interval.Interval { return interval.AtLeast(10 * time.Minute) }

// Lease takes the lease in j.db, for the default 11/12 of the interval.
func (j *CleanupJob) Lease() cron.LeaseConfig { return cron.LeaseConfig{DB: j.db} }

// Process runs only in the replica that took this interval's lease.
func (j *CleanupJob) Process(context.Context, cron.Tick) error {
	j.done <- "cleaned up"
	return nil
}

// The runtime takes the lease before each run; a replica that finds it held
// skips the run, which an observer sees.
func ExampleCronJob_leased() {
	m := embeddedRedis()
	defer m.Close()
	done := make(chan string)
	skipped := cron.WithObserver(cron.Observer{RunSkipped: func(_ cron.Tick, reason string, _ error) {
		done <- "skipped: " + reason
	}})

	// A deploy: the old replica runs the job and stops, the new one
	// finds the interval's run done.
	for range 2 {
		db := lock.NewDB(redis.NewClient(&redis.Options{Addr: m.Addr()}))
		b := wakuwaku.NewServiceBuilder(db).WithCronOptions(skipped)
		wakuwaku.CronJob(b, func(db lock.DB) *CleanupJob { return &CleanupJob{db: db, done: done} })
		_, crons, err := b.Start()
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(<-done)
		crons.Shutdown(context.Background())
	}
	// Output:
	// cleaned up
	// skipped: lease held by another replica
}

// embeddedRedis starts the in-process Redis the examples use; a service
// uses its real one.
func embeddedRedis() *miniredis.Miniredis {
	m, err := miniredis.Run()
	if err != nil {
		log.Fatal(err)
	}
	return m
}
