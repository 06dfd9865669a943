package cron

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wakuwaku-go/wakuwaku/cron/internal/record"
	"github.com/wakuwaku-go/wakuwaku/internal/redisscript"
	"github.com/wakuwaku-go/wakuwaku/lock"
)

// ErrUnknownJob is the error, wrapped with the job's name, of an operation
// on a job that doesn't exist: an [Admin] operation on a job that has no
// record (no replica runs it: a record expires a few intervals after its
// last replica stopped; or the name is not its lease's name), and
// [Runtime.Remove] or [Runtime.Replace] of a name that none of the
// runtime's jobs has. The message says which.
var ErrUnknownJob = errors.New("cron: no such job")

// Admin reads and steers the records of [Leased] jobs, cluster-wide, with
// nothing but a [lock.DB]: the operators' side of the runtime, for a
// command-line tool or a status page. Jobs are named by their lease's name
// ([LeaseConfig.Name], by default the job's name).
//
// An Admin is a small value, safe to copy and to use from many goroutines.
// The zero Admin has no client: its methods return [lock.ErrNoClient].
type Admin struct {
	db lock.DB
	by string // who asks, as the records say
}

// NewAdmin returns an Admin over db, which must be able to take locks in
// [LeaseNamespace], as the jobs' own LeaseConfig.DB does. Its commands are
// recorded as coming from this host and process. With a db made with
// [lock.WithReplicas], Pause, Resume and RunNow wait for its replicas, and
// return an error wrapping [lock.ErrNotReplicated] when too few
// acknowledged the command within the timeout: the master has it, but a
// failover before a replica has it too would undo it; send it again.
func NewAdmin(db lock.DB) Admin {
	host, _ := os.Hostname()
	return Admin{db: db, by: "admin " + host + "/" + strconv.Itoa(os.Getpid())}
}

func (a Admin) client() (redisscript.Client, error) {
	return redisscript.ClientOf(a.db, LeaseNamespace)
}

// Pause pauses the job on every replica: its ticks are skipped, with
// [ReasonPaused], until [Admin.Resume]. A run in progress goes on. A run
// requested with [Admin.RunNow] still runs. The pause lasts as long as the
// job's record, while any replica runs the job.
func (a Admin) Pause(ctx context.Context, job string) error {
	return a.control(ctx, "pause", job)
}

// Resume ends a pause: the job runs again from its next slot.
func (a Admin) Resume(ctx context.Context, job string) error {
	return a.control(ctx, "resume", job)
}

// RunNow asks for one run of the job now, outside its schedule: exactly one
// replica runs it, within about a second (the replicas hear of it over
// Pub/Sub; a replica whose client can't subscribe serves it at its next
// tick). It costs two round trips: the request is recorded, then
// published. It waits for a run in progress to end. The run's [Tick] has
// [TriggerRequest], and it runs while the job is paused too. Several
// requests before the run starts make one run.
func (a Admin) RunNow(ctx context.Context, job string) error {
	return a.control(ctx, "run", job)
}

func (a Admin) control(ctx context.Context, op, job string) error {
	c, err := a.client()
	if err != nil {
		return err
	}
	repl := redisscript.ReplicationOf(a.db)
	found, short, err := record.Control(ctx, c, repl, job, op, a.by)
	switch {
	case err != nil:
		return fmt.Errorf("cron: %s %q: %w", op, job, err)
	case !found:
		return fmt.Errorf("%w %q: no record of the job: no replica runs it", ErrUnknownJob, job)
	}
	// R15, R16 with a DB that waits for replicas: the master has the
	// command; a failover before a replica has it too would undo it.
	if short != nil {
		short = fmt.Errorf("cron: %s %q: recorded, but %w", op, job, short)
	}
	if op != "run" {
		return short
	}
	// R16: the request is recorded; now the replicas hear of it. If it
	// fails, the request waits in the record for the job's next claim.
	if err := record.Announce(ctx, c, job); err != nil {
		return errors.Join(short, fmt.Errorf("cron: %s %q: the request is recorded, but announcing it failed: %w", op, job, err))
	}
	return short
}

// scanKeys returns the keys that match pattern on every master of a Redis
// Cluster, every shard of a Ring, or the one server of another client.
func scanKeys(ctx context.Context, c redisscript.Client, pattern string) ([]string, error) {
	var out []string
	scan := func(ctx context.Context, node redisscript.Client) error {
		cursor := uint64(0)
		for {
			cmd := redis.NewScanCmd(ctx, nil, "scan", cursor, "match", pattern, "count", 1000)
			if err := redisscript.Process(ctx, node, cmd); err != nil {
				return err
			}
			keys, next := cmd.Val()
			out = append(out, keys...)
			if next == 0 {
				return nil
			}
			cursor = next
		}
	}
	var mu sync.Mutex // the masters or shards are scanned concurrently
	each := func(ctx context.Context, node *redis.Client) error {
		mu.Lock()
		defer mu.Unlock()
		return scan(ctx, node)
	}
	var err error
	switch cl := c.(type) {
	case interface {
		ForEachMaster(context.Context, func(context.Context, *redis.Client) error) error
	}:
		err = cl.ForEachMaster(ctx, each) // a Cluster
	case interface {
		ForEachShard(context.Context, func(context.Context, *redis.Client) error) error
	}:
		err = cl.ForEachShard(ctx, each) // a Ring
	default:
		err = scan(ctx, c)
	}
	return out, err
}

// ReplicaStatus is a runtime with leased jobs, as the replica registry
// holds it: each such runtime beats in the registry of its group, the
// runtimes that run the same leased jobs on one Redis, every quarter of
// its shortest leased interval (from a second to a minute), and counts as
// live for three beats.
type ReplicaStatus struct {
	// Name is the replica's name (see [WithReplica]).
	Name string `json:"name"`
	// Group names the replica's group: runtimes with the same leased
	// jobs share it.
	Group string `json:"group"`
	// LiveUntil is when the replica stops counting as live unless it
	// beats again, by its own clock.
	LiveUntil time.Time `json:"liveUntil"`
}

// Replicas returns the live replicas of every group, by group and name.
// A runtime that shut down takes itself out at once; one that died drops
// out after three beats.
func (a Admin) Replicas(ctx context.Context) ([]ReplicaStatus, error) {
	c, err := a.client()
	if err != nil {
		return nil, err
	}
	keys, err := scanKeys(ctx, c, replicasPrefix+"*")
	if err != nil {
		return nil, fmt.Errorf("cron: listing the replica registries: %w", err)
	}
	slices.Sort(keys)
	keys = slices.Compact(keys)
	now := strconv.FormatInt(time.Now().UnixMilli(), 10)
	var out []ReplicaStatus
	for _, k := range keys {
		cmd := redis.NewZSliceCmd(ctx, "zrangebyscore", k, now, "+inf", "withscores")
		if err := redisscript.Process(ctx, c, cmd); err != nil {
			return nil, fmt.Errorf("cron: reading the replica registry %s: %w", k, err)
		}
		for _, z := range cmd.Val() {
			name, _ := z.Member.(string)
			out = append(out, ReplicaStatus{Name: name, Group: groupOf(k), LiveUntil: time.UnixMilli(int64(z.Score))})
		}
	}
	slices.SortFunc(out, func(a, b ReplicaStatus) int {
		return cmp.Or(strings.Compare(a.Group, b.Group), strings.Compare(a.Name, b.Name))
	})
	return out, nil
}
