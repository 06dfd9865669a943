// Command wakuwaku is the operators' tool for the jobs and locks of
// services built on wakuwaku: it reads and steers the cron jobs' records
// and lists or force-releases the locks held in a Redis.
//
//	wakuwaku [-redis URL | -cluster URL] [-timeout d] command [args]
//
//	status [-json] [job]   the leased jobs: last slot, replica, outcome, duration,
//	                       running now and since when, paused, next due
//	pause JOB              pause the job on every replica
//	resume JOB             resume it
//	run JOB                ask for one run now (one replica runs it)
//	locks [-namespace NS]  the locks held now, with their remaining TTL
//	release -force KEY     delete a stuck lock's key, printing what it held
//
// -redis takes a redis:// or rediss:// URL, as the example's flag does
// (default redis://127.0.0.1:6379); -cluster takes one for a Redis
// Cluster, with more seed nodes as addr= parameters:
// redis://host1:6379?addr=host2:6379. Any error prints one line and
// exits with status 1; bad usage exits with 2.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wakuwaku-go/wakuwaku/cron"
	"github.com/wakuwaku-go/wakuwaku/lock"
)

func main() {
	// go-redis logs each failed dial on its own; the tool says what failed
	// in one line.
	redis.SetLogger(quiet{})
	os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}

// quiet is a go-redis logger that drops what it is given.
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

// errUsage is a command line that can't be run: the usage is printed.
var errUsage = errors.New("usage")

// run runs the tool with args and returns its exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("wakuwaku", flag.ContinueOnError)
	fs.SetOutput(stderr)
	url := fs.String("redis", "redis://127.0.0.1:6379", "the Redis server's `URL`")
	clusterURL := fs.String("cluster", "", "a Redis Cluster's `URL`, more seed nodes as addr= parameters")
	timeout := fs.Duration("timeout", 10*time.Second, "give up after this long")
	fs.Usage = func() { usage(stderr, fs) }
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return 2
	}
	client, err := connect(*url, *clusterURL)
	if err != nil {
		fmt.Fprintf(stderr, "wakuwaku: %v\n", err)
		return 1
	}
	defer client.Close()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	t := &tool{rdb: client, db: lock.NewDb(client), out: stdout}
	err = t.do(ctx, fs.Arg(0), fs.Args()[1:])
	switch {
	case errors.Is(err, errUsage):
		fs.Usage()
		return 2
	case err != nil:
		fmt.Fprintf(stderr, "wakuwaku: %v\n", err)
		return 1
	}
	return 0
}

func usage(w io.Writer, fs *flag.FlagSet) {
	fmt.Fprint(w, `usage: wakuwaku [-redis URL | -cluster URL] [-timeout d] command [args]

commands:
  status [-json] [job]   the leased jobs' records
  pause JOB              pause the job on every replica
  resume JOB             resume it
  run JOB                ask for one run now
  locks [-namespace NS]  the locks held now
  release -force KEY     delete a stuck lock's key

flags:
`)
	fs.PrintDefaults()
}

// connect returns a client for the URL, or for the cluster URL if given.
func connect(url, clusterURL string) (redis.UniversalClient, error) {
	if clusterURL != "" {
		opts, err := redis.ParseClusterURL(clusterURL)
		if err != nil {
			return nil, fmt.Errorf("-cluster %q: %w", clusterURL, err)
		}
		return redis.NewClusterClient(opts), nil
	}
	opts, err := redis.ParseURL(url)
	if err != nil {
		return nil, fmt.Errorf("-redis %q: %w", url, err)
	}
	return redis.NewClient(opts), nil
}

// tool runs the commands over one client.
type tool struct {
	rdb redis.UniversalClient
	db  lock.Db
	out io.Writer
}

func (t *tool) do(ctx context.Context, cmd string, args []string) error {
	if err := t.db.Ping(ctx); err != nil {
		return err
	}
	admin := cron.NewAdmin(t.db)
	switch cmd {
	case "status":
		return t.status(ctx, admin, args)
	case "pause", "resume", "run":
		if len(args) != 1 {
			return fmt.Errorf("%s needs one job name: %w", cmd, errUsage)
		}
		return t.control(ctx, admin, cmd, args[0])
	case "locks":
		return t.locks(ctx, args)
	case "release":
		return t.release(ctx, args)
	}
	return fmt.Errorf("no command %q: %w", cmd, errUsage)
}

func (t *tool) control(ctx context.Context, admin cron.Admin, cmd, job string) error {
	var err error
	var done string
	switch cmd {
	case "pause":
		err, done = admin.Pause(ctx, job), "paused"
	case "resume":
		err, done = admin.Resume(ctx, job), "resumed"
	case "run":
		err, done = admin.RunNow(ctx, job), "asked to run now"
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(t.out, "%s: %s\n", job, done)
	return nil
}
