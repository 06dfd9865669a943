package crontest

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// replication is the cluster's model of a replica of its Redis: between a
// call of RedisFailover and the failover itself, what the replica has
// (a snapshot of the keys), and how many failovers there were, so that a
// WAIT whose script ran before one can tell.
type replication struct {
	raw      *redis.Client // no hook: for the snapshots; guarded by Cluster.mu
	mu       sync.Mutex
	due      int      // failovers announced that have not come yet
	replica  snapshot // what the replica has, while due > 0
	failures uint64   // failovers so far
}

// snapshot is every key of Redis, with its remaining TTL, at taken.
type snapshot struct {
	keys  []storedKey
	taken time.Time
}

type storedKey struct {
	key, kind string
	ttl       time.Duration // negative: none
	values    []string      // a hash's fields and values, a list's, a set's members, a sorted set's members and scores, a string's value
}

// snapshotScript reads every key at one instant.
var snapshotScript = redis.NewScript(`
local out = {}
for _, k in ipairs(redis.call('KEYS', '*')) do
	local t = redis.call('TYPE', k)
	if type(t) == 'table' then
		t = t['ok']
	end
	local v = {}
	if t == 'hash' then
		v = redis.call('HGETALL', k)
	elseif t == 'list' then
		v = redis.call('LRANGE', k, 0, -1)
	elseif t == 'set' then
		v = redis.call('SMEMBERS', k)
	elseif t == 'zset' then
		v = redis.call('ZRANGE', k, 0, -1, 'WITHSCORES')
	elseif t == 'string' then
		v = {redis.call('GET', k)}
	end
	out[#out + 1] = {k, t, redis.call('PTTL', k), v}
end
return out`)

// RedisFailover fails Redis over to its replica, as a Sentinel does when
// the master's host crashes: the master fails lag from now, and the
// replica that takes its place has every write made before now and, of
// the writes made from now until then, those that a WAIT acknowledged
// (see lock.WithReplicas), with every write before them; the others are
// lost, and so is every cached script. Redis is then down for down (see
// [Cluster.RedisDown]), the time a Sentinel takes to notice and promote.
//
// At any other time a WAIT is answered at once with the replicas it asks
// for, as by replicas that keep up. A WAIT whose script reached the
// master before a failover is answered with none.
//
// Failovers may overlap, as when the promoted replica's host fails in
// turn. A call while another failover is due does not bring the lagging
// replica up to date: it keeps what it has. At a failover that another
// one follows, the promoted replica's own replica starts with what it
// has, and gains what WAITs acknowledge from then on.
func (c *Cluster) RedisFailover(lag, down time.Duration) {
	c.tb.Helper()
	c.repl.mu.Lock()
	defer c.repl.mu.Unlock()
	if c.repl.due == 0 {
		snap, err := c.snapshot()
		if err != nil {
			c.tb.Errorf("crontest: RedisFailover: %v", err)
			return
		}
		c.repl.replica = snap
	}
	c.repl.due++
	time.AfterFunc(lag, func() { c.failOver(down) })
}

// failOver is a failover that RedisFailover announced.
func (c *Cluster) failOver(down time.Duration) {
	c.repl.mu.Lock()
	defer c.repl.mu.Unlock()
	c.repl.failures++
	c.repl.due--
	c.RedisDown(down)
	c.redis.FlushAll()
	if err := c.restore(c.repl.replica); err != nil {
		c.tb.Errorf("crontest: RedisFailover: %v", err)
	}
	if c.repl.due == 0 {
		c.repl.replica = snapshot{}
	} else {
		// The next failover's replica starts as a copy of the master it
		// serves now: what was just restored, with its TTLs counted from
		// now.
		snap, err := c.snapshot()
		if err != nil {
			c.tb.Errorf("crontest: RedisFailover: %v", err)
		}
		c.repl.replica = snap
	}
	if err := c.rawClient().ScriptFlush(context.Background()).Err(); err != nil {
		c.tb.Errorf("crontest: RedisFailover: flushing the scripts: %v", err)
	}
}

// failovers returns how many failovers there were so far.
func (c *Cluster) failovers() uint64 {
	c.repl.mu.Lock()
	defer c.repl.mu.Unlock()
	return c.repl.failures
}

// acknowledge answers the WAITs among cmds, which were sent when there had
// been before failovers: every replica asked for if no failover came
// since, none otherwise. A replica whose failover is due takes every write
// so far.
func (c *Cluster) acknowledge(before uint64, cmds []redis.Cmder) {
	for _, cmd := range cmds {
		wait, ok := cmd.(*redis.IntCmd)
		if !ok || cmd.Name() != "wait" || cmd.Err() != nil {
			continue
		}
		n, _ := strconv.ParseInt(fmt.Sprint(cmd.Args()[1]), 10, 64)
		c.repl.mu.Lock()
		if c.repl.failures != before {
			c.repl.mu.Unlock()
			wait.SetVal(0)
			continue
		}
		if c.repl.due > 0 {
			snap, err := c.snapshot()
			if err != nil {
				c.repl.mu.Unlock()
				wait.SetVal(0)
				continue
			}
			c.repl.replica = snap
		}
		c.repl.mu.Unlock()
		wait.SetVal(n)
	}
}

// rawClient returns a client of the cluster's Redis with no hook at all,
// closed with the cluster.
func (c *Cluster) rawClient() *redis.Client {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.repl.raw == nil {
		c.repl.raw = redis.NewClient(&redis.Options{
			Dialer:                   func(context.Context, string, string) (net.Conn, error) { return c.dial() },
			MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
		})
	}
	return c.repl.raw
}

// snapshot reads every key of Redis.
func (c *Cluster) snapshot() (snapshot, error) {
	reply, err := snapshotScript.Run(context.Background(), c.rawClient(), nil).Slice()
	if err != nil {
		return snapshot{}, fmt.Errorf("reading the keys: %w", err)
	}
	snap := snapshot{taken: time.Now()}
	for _, r := range reply {
		f, _ := r.([]any)
		if len(f) != 4 {
			return snapshot{}, fmt.Errorf("reading the keys: unexpected reply %v", r)
		}
		k := storedKey{ttl: -1}
		k.key, _ = f[0].(string)
		k.kind, _ = f[1].(string)
		if ms, _ := f[2].(int64); ms >= 0 {
			k.ttl = time.Duration(ms) * time.Millisecond
		}
		vs, _ := f[3].([]any)
		for _, v := range vs {
			s, _ := v.(string)
			k.values = append(k.values, s)
		}
		snap.keys = append(snap.keys, k)
	}
	return snap, nil
}

// restore writes snap into Redis, which holds no key, with the TTLs that
// its keys have now.
func (c *Cluster) restore(snap snapshot) error {
	m := c.redis
	since := time.Since(snap.taken)
	for _, k := range snap.keys {
		if k.ttl >= 0 && k.ttl <= since {
			continue // expired on the replica meanwhile
		}
		var err error
		switch k.kind {
		case "hash":
			m.HSet(k.key, k.values...)
		case "list":
			_, err = m.Push(k.key, k.values...)
		case "set":
			_, err = m.SetAdd(k.key, k.values...)
		case "zset":
			for i := 0; i+1 < len(k.values) && err == nil; i += 2 {
				var score float64
				if score, err = strconv.ParseFloat(k.values[i+1], 64); err == nil {
					_, err = m.ZAdd(k.key, score, k.values[i])
				}
			}
		case "string":
			err = m.Set(k.key, k.values[0])
		default:
			err = fmt.Errorf("a key of type %q", k.kind)
		}
		if err != nil {
			return fmt.Errorf("restoring %q: %w", k.key, err)
		}
		if k.ttl >= 0 {
			m.SetTTL(k.key, k.ttl-since)
		}
	}
	return nil
}

// acks is the go-redis hook of Client: it answers WAITs, and nothing else.
type acks struct{ c *Cluster }

func (a acks) DialHook(next redis.DialHook) redis.DialHook { return next }

func (a acks) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		before := a.c.failovers()
		err := next(ctx, cmd)
		a.c.acknowledge(before, []redis.Cmder{cmd})
		return err
	}
}

func (a acks) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		before := a.c.failovers()
		err := next(ctx, cmds)
		a.c.acknowledge(before, cmds)
		return err
	}
}
