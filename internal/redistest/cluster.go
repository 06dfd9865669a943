package redistest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

const (
	// busPortOffset is where Redis puts a node's cluster bus: its port plus 10000.
	busPortOffset = 10000
	// nodesConf is the cluster configuration file in a node's directory.
	nodesConf = "nodes.conf"
	// formTimeout bounds how long a new cluster may take to agree on its slots.
	formTimeout = 30 * time.Second
	// migrateTimeout bounds a whole MigrateSlot.
	migrateTimeout = time.Minute
	// migrateBatch is how many keys one MIGRATE moves.
	migrateBatch = 100
	// migrateKeyTimeoutMs is MIGRATE's own timeout, in milliseconds as the command takes it.
	migrateKeyTimeoutMs = 5000
	// pollInterval is how often the rig re-reads the cluster's state while waiting for it.
	pollInterval = 20 * time.Millisecond
	// staleGrace is how long after a slot moved a message sent before the move may still
	// arrive: MigrateSlot waits for a newer one from the slot's new owner before moving the
	// slot again.
	staleGrace = 200 * time.Millisecond
)

// Cluster is a Redis Cluster of masters without replicas, started by StartCluster. Each node
// is a cluster-enabled redis-server on its own free loopback port, and every hash slot is
// assigned. Its methods are safe for concurrent use, though two MigrateSlot calls for the same
// slot would interfere. The test's cleanup stops every node.
type Cluster struct {
	nodes []*Server
	ids   []string // node ids, by node index

	mu      sync.Mutex
	moved   map[int]time.Time // when MigrateSlot last moved each slot
	longest time.Duration     // the longest MIGRATE command of MigrateSlot
}

// StartCluster starts a Redis Cluster of the given number of masters, splits the 16384 slots
// evenly among them in node order, and returns once every node reports cluster_state:ok and
// every node's CLUSTER SLOTS is the same full map. Three masters take a little over two
// seconds: a master doesn't report ok until two seconds after it started. StartCluster fails
// the test if masters is below 1, if redis-server is missing, or if the cluster doesn't agree
// within 30 seconds (with the tail of each node's log).
func StartCluster(tb testing.TB, masters int) *Cluster {
	tb.Helper()
	if masters < 1 || masters > SlotCount {
		tb.Fatalf("redistest: StartCluster(%d): want between 1 and %d masters", masters, SlotCount)
	}
	bin := serverBinary(tb)
	c := &Cluster{nodes: make([]*Server, masters), ids: make([]string, masters), moved: map[int]time.Time{}}
	for i := range c.nodes {
		c.nodes[i] = newServer(tb, bin, true, nil)
	}
	// Start the processes side by side: starting is mostly waiting.
	errs := make([]error, masters)
	var wg sync.WaitGroup
	for i, s := range c.nodes {
		wg.Go(func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			errs[i] = s.start(true)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		tb.Fatalf("%v", err)
	}
	ctx, cancel := context.WithTimeout(tb.Context(), formTimeout)
	defer cancel()
	if err := c.form(ctx); err != nil {
		tb.Fatalf("redistest: form a cluster of %d masters: %v\n%s", masters, err, c.logTails())
	}
	return c
}

// form joins the started nodes into one cluster and waits until they agree.
func (c *Cluster) form(ctx context.Context) error {
	n := len(c.nodes)
	for i, s := range c.nodes {
		a := s.adminClient()
		id, err := a.ClusterMyID(ctx).Result()
		if err != nil {
			return fmt.Errorf("node %d: CLUSTER MYID: %w", i, err)
		}
		c.ids[i] = id
		// Distinct epochs up front spare the nodes resolving epoch collisions by themselves,
		// which is what redis-cli --cluster create does too.
		if err := a.Do(ctx, "CLUSTER", "SET-CONFIG-EPOCH", i+1).Err(); err != nil {
			return fmt.Errorf("node %d: CLUSTER SET-CONFIG-EPOCH: %w", i, err)
		}
		lo, hi := i*SlotCount/n, (i+1)*SlotCount/n-1
		if err := addSlots(ctx, a, lo, hi); err != nil {
			return fmt.Errorf("node %d: add slots %d-%d: %w", i, lo, hi, err)
		}
	}
	first := c.nodes[0]
	for i, s := range c.nodes[1:] {
		if err := s.adminClient().ClusterMeet(ctx, "127.0.0.1", strconv.Itoa(first.port)).Err(); err != nil {
			return fmt.Errorf("node %d: CLUSTER MEET: %w", i+1, err)
		}
	}
	return c.poll(ctx, c.agreed)
}

// addSlots assigns slots lo through hi to the node, with ADDSLOTSRANGE where the server has it
// (Redis 7) and ADDSLOTS otherwise.
func addSlots(ctx context.Context, a *redis.Client, lo, hi int) error {
	err := a.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", lo, hi).Err()
	if err != nil && strings.Contains(strings.ToLower(err.Error()), "unknown") {
		err = a.ClusterAddSlotsRange(ctx, lo, hi).Err()
	}
	return err
}

// poll calls check until it succeeds or ctx ends, and then reports the last failure.
func (c *Cluster) poll(ctx context.Context, check func(context.Context) error) error {
	for {
		err := check(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w; last check: %v", context.Cause(ctx), err)
		case <-time.After(pollInterval):
		}
	}
}

// agreed checks that every node knows every other, reports cluster_state:ok, and has the same
// complete slot map as the others.
func (c *Cluster) agreed(ctx context.Context) error {
	var want string
	for i, s := range c.nodes {
		a := s.adminClient()
		info, err := a.ClusterInfo(ctx).Result()
		if err != nil {
			return fmt.Errorf("node %d: CLUSTER INFO: %w", i, err)
		}
		if !strings.Contains(info, "cluster_state:ok") {
			return fmt.Errorf("node %d: cluster_state is not ok", i)
		}
		if known := fmt.Sprintf("cluster_known_nodes:%d\r\n", len(c.nodes)); !strings.Contains(info, known) {
			return fmt.Errorf("node %d: does not know all %d nodes yet", i, len(c.nodes))
		}
		//lint:ignore SA1019 CLUSTER SHARDS needs Redis 7; the rig also runs on Redis 6.
		slots, err := a.ClusterSlots(ctx).Result()
		if err != nil {
			return fmt.Errorf("node %d: CLUSTER SLOTS: %w", i, err)
		}
		m, err := slotMap(slots)
		if err != nil {
			return fmt.Errorf("node %d: %w", i, err)
		}
		if i == 0 {
			want = m
		} else if m != want {
			return fmt.Errorf("node %d sees slots %s, node 0 sees %s", i, m, want)
		}
	}
	return nil
}

// slotMap renders a CLUSTER SLOTS reply as a canonical string, and fails unless the ranges
// cover every slot exactly once.
func slotMap(slots []redis.ClusterSlot) (string, error) {
	slots = slices.Clone(slots)
	slices.SortFunc(slots, func(a, b redis.ClusterSlot) int { return a.Start - b.Start })
	var b strings.Builder
	next := 0
	for _, r := range slots {
		if r.Start != next || r.End < r.Start || len(r.Nodes) == 0 {
			return "", fmt.Errorf("slots %d-%d are not covered exactly once", next, r.Start)
		}
		fmt.Fprintf(&b, "%d-%d:%s@%s ", r.Start, r.End, r.Nodes[0].ID, r.Nodes[0].Addr)
		next = r.End + 1
	}
	if next != SlotCount {
		return "", fmt.Errorf("slots %d-%d are not covered", next, SlotCount-1)
	}
	return strings.TrimSpace(b.String()), nil
}

// Addrs returns the nodes' addresses, in node order. The caller may modify the slice.
func (c *Cluster) Addrs() []string {
	addrs := make([]string, len(c.nodes))
	for i, s := range c.nodes {
		addrs[i] = s.Addr()
	}
	return addrs
}

// Options returns new cluster client options listing every node, for redis.NewClusterClient.
// Each call returns a fresh value.
func (c *Cluster) Options() *redis.ClusterOptions {
	return &redis.ClusterOptions{Addrs: c.Addrs()}
}

// Client returns a new go-redis cluster client, made from Options. The test's cleanup closes
// it before the nodes stop.
func (c *Cluster) Client(tb testing.TB) *redis.ClusterClient {
	tb.Helper()
	cc := redis.NewClusterClient(c.Options())
	tb.Cleanup(func() { _ = cc.Close() })
	return cc
}

// Nodes returns the nodes, in the order of Addrs, so that a test can pause, kill or restart
// one. The slice is a copy; the servers in it are the cluster's own.
func (c *Cluster) Nodes() []*Server {
	return slices.Clone(c.nodes)
}

// NodeID returns the cluster node id of node i, as CLUSTER NODES shows it.
func (c *Cluster) NodeID(i int) string {
	return c.ids[i]
}

// WaitHealthy waits until the cluster is whole again, as StartCluster does before returning:
// every node reports cluster_state:ok and all have the same complete slot map. A test calls it
// after resuming or restarting a node. A restarted master takes about two seconds, the delay
// Redis imposes before a master that was down rejoins. WaitHealthy fails the test if the
// cluster doesn't agree within 30 seconds, which is also what happens while a node is
// killed or paused.
func (c *Cluster) WaitHealthy(tb testing.TB) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(tb.Context(), formTimeout)
	defer cancel()
	if err := c.poll(ctx, c.agreed); err != nil {
		tb.Fatalf("redistest: cluster did not heal: %v\n%s", err, c.logTails())
	}
}

// SlotOwner returns the index of the node that owns slot, as the running, unpaused nodes agree
// (it waits up to 10 seconds for a node that was paused during a change to catch up). It
// fails the test if the slot is out of range, unassigned, or the nodes don't agree in time.
func (c *Cluster) SlotOwner(tb testing.TB, slot int) int {
	tb.Helper()
	checkSlot(tb, slot)
	ctx, cancel := context.WithTimeout(tb.Context(), 10*time.Second)
	defer cancel()
	owner, err := c.owner(ctx, slot)
	if err != nil {
		tb.Fatalf("redistest: owner of slot %d: %v", slot, err)
	}
	return owner
}

// owner polls until the live nodes agree on who owns slot.
func (c *Cluster) owner(ctx context.Context, slot int) (int, error) {
	owner := -1
	err := c.poll(ctx, func(ctx context.Context) error {
		owner = -1
		for i, s := range c.nodes {
			if !s.live() {
				continue
			}
			o, err := c.ownerSeenBy(ctx, i, slot)
			if err != nil {
				return err
			}
			if owner >= 0 && o != owner {
				return fmt.Errorf("node %d says node %d owns slot %d, another says node %d", i, o, slot, owner)
			}
			owner = o
		}
		if owner < 0 {
			return errors.New("no node is running")
		}
		return nil
	})
	return owner, err
}

// ownerSeenBy returns the owner of slot in node i's CLUSTER SLOTS.
func (c *Cluster) ownerSeenBy(ctx context.Context, i, slot int) (int, error) {
	//lint:ignore SA1019 CLUSTER SHARDS needs Redis 7; the rig also runs on Redis 6.
	slots, err := c.nodes[i].adminClient().ClusterSlots(ctx).Result()
	if err != nil {
		return 0, fmt.Errorf("node %d: CLUSTER SLOTS: %w", i, err)
	}
	for _, r := range slots {
		if r.Start <= slot && slot <= r.End && len(r.Nodes) > 0 {
			if o := slices.Index(c.ids, r.Nodes[0].ID); o >= 0 {
				return o, nil
			}
			return 0, fmt.Errorf("node %d: slot %d is owned by unknown node %s", i, slot, r.Nodes[0].ID)
		}
	}
	return 0, fmt.Errorf("node %d: slot %d is not assigned", i, slot)
}

// MigrateSlot moves slot and its keys from the node that owns it to node to, the way Redis
// documents resharding, so it works while clients keep using the slot. It first waits until
// the running, unpaused nodes agree on every node's config epoch and no two share one (the
// target takes a new epoch when it takes the slot, which must not tie with another's), and,
// for a slot it moved before, until each of them has heard from the slot's owner since (a
// second or two after that move: Redis 7.0 can otherwise lose the slot to a stale claim). Then
// CLUSTER SETSLOT IMPORTING on the target, then MIGRATING on the source (from then on the
// source answers ASK for keys it no longer holds), then the keys move in batches of CLUSTER
// GETKEYSINSLOT and MIGRATE ... KEYS, and finally CLUSTER SETSLOT NODE on the target, the
// source and every other running, unpaused node (a paused node learns it by gossip). It
// returns once the live nodes agree that to owns the slot, and does nothing if it does
// already. MigrateSlot fails the test on a bad slot or index, or when a step fails or takes
// over a minute in all.
func (c *Cluster) MigrateSlot(tb testing.TB, slot int, to int) {
	tb.Helper()
	checkSlot(tb, slot)
	if to < 0 || to >= len(c.nodes) {
		tb.Fatalf("redistest: MigrateSlot(%d, %d): the cluster has nodes 0 to %d", slot, to, len(c.nodes)-1)
	}
	ctx, cancel := context.WithTimeout(tb.Context(), migrateTimeout)
	defer cancel()
	if err := c.migrate(ctx, slot, to); err != nil {
		tb.Fatalf("redistest: migrate slot %d to node %d: %v", slot, to, err)
	}
}

// migrate does MigrateSlot's work.
func (c *Cluster) migrate(ctx context.Context, slot, to int) error {
	from, err := c.owner(ctx, slot)
	if err != nil {
		return err
	}
	if from == to {
		return nil
	}
	// The target raises its config epoch when it takes the slot, to just above the highest
	// it knows of. Unless every node already knows every other's epoch, that may equal
	// another node's, and Redis breaks such a tie by bumping one of the two, which can make
	// the source's old claim on the slot win over the target's: the target then believes
	// the source owns the slot while the source believes the target does, for good.
	if err := c.poll(ctx, c.epochsSettled); err != nil {
		return fmt.Errorf("config epochs did not settle: %w", err)
	}
	// A slot moved a moment ago must first be heard of from its new owner by every node.
	// Redis 7.0 marks a slot whose owner (as a node sees it) stops claiming it, which a
	// node sees when a message from before the move arrives late, and clears the mark only
	// when it hears the owner claim the slot again; a node that takes the slot while marked
	// then gives it to the next stale claim that arrives, whatever its epoch, and drops its
	// keys (redis/redis#12344, fixed by #12564 in later releases).
	c.mu.Lock()
	movedAt, wasMoved := c.moved[slot]
	c.mu.Unlock()
	if wasMoved {
		if err := c.poll(ctx, func(ctx context.Context) error { return c.heardSince(ctx, from, movedAt.Add(staleGrace)) }); err != nil {
			return fmt.Errorf("the nodes did not hear from node %d after it took slot %d: %w", from, slot, err)
		}
	}
	src, dst := c.nodes[from].adminClient(), c.nodes[to].adminClient()
	// Importing first: once the source sends ASK, the target must already accept it.
	if err := dst.Do(ctx, "CLUSTER", "SETSLOT", slot, "IMPORTING", c.ids[from]).Err(); err != nil {
		return fmt.Errorf("node %d: SETSLOT IMPORTING: %w", to, err)
	}
	if err := src.Do(ctx, "CLUSTER", "SETSLOT", slot, "MIGRATING", c.ids[to]).Err(); err != nil {
		return fmt.Errorf("node %d: SETSLOT MIGRATING: %w", from, err)
	}
	// A migrating source creates no keys in the slot (it sends ASK instead), so once it has
	// none left they have all moved.
	for {
		keys, err := src.ClusterGetKeysInSlot(ctx, slot, migrateBatch).Result()
		if err != nil {
			return fmt.Errorf("node %d: GETKEYSINSLOT: %w", from, err)
		}
		if len(keys) == 0 {
			break
		}
		args := []any{"MIGRATE", "127.0.0.1", c.nodes[to].port, "", 0, migrateKeyTimeoutMs, "KEYS"}
		for _, k := range keys {
			args = append(args, k)
		}
		sent := time.Now()
		if err := src.Do(ctx, args...).Err(); err != nil {
			return fmt.Errorf("node %d: MIGRATE %d keys: %w", from, len(keys), err)
		}
		c.mu.Lock()
		c.longest = max(c.longest, time.Since(sent))
		c.mu.Unlock()
	}
	// The target first, so that it owns the slot (under a new config epoch) before the source
	// starts sending clients there with MOVED; the others directly rather than by gossip.
	order := []int{to, from}
	for i := range c.nodes {
		if i != to && i != from && c.nodes[i].live() {
			order = append(order, i)
		}
	}
	for _, i := range order {
		if err := c.nodes[i].adminClient().Do(ctx, "CLUSTER", "SETSLOT", slot, "NODE", c.ids[to]).Err(); err != nil {
			return fmt.Errorf("node %d: SETSLOT NODE: %w", i, err)
		}
	}
	err = c.poll(ctx, func(ctx context.Context) error {
		owner, err := c.owner(ctx, slot)
		if err == nil && owner != to {
			err = fmt.Errorf("node %d still owns slot %d", owner, slot)
		}
		return err
	})
	if err == nil {
		c.mu.Lock()
		c.moved[slot] = time.Now()
		c.mu.Unlock()
	}
	return err
}

// LongestMigrate returns the longest that a MIGRATE command of MigrateSlot took. A key it moved
// may outlive its TTL by up to that: the source reads the milliseconds the key has left, and the
// target sets them from its own clock when it runs the RESTORE, so a target slow to run it (a
// busy machine's scheduler) adds its delay to the key's life.
func (c *Cluster) LongestMigrate() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.longest
}

// heardSince checks that every running, unpaused node other than node i has received a PONG
// from node i since t, by the pong-recv field of its CLUSTER NODES.
func (c *Cluster) heardSince(ctx context.Context, i int, t time.Time) error {
	for j, s := range c.nodes {
		if j == i || !s.live() {
			continue
		}
		out, err := s.adminClient().ClusterNodes(ctx).Result()
		if err != nil {
			return fmt.Errorf("node %d: CLUSTER NODES: %w", j, err)
		}
		heard := false
		for line := range strings.Lines(out) {
			f := strings.Fields(line)
			if len(f) < 8 || f[0] != c.ids[i] {
				continue
			}
			ms, err := strconv.ParseInt(f[5], 10, 64)
			if err != nil {
				return fmt.Errorf("node %d: CLUSTER NODES: pong-recv %q: %w", j, f[5], err)
			}
			heard = ms >= t.UnixMilli()
		}
		if !heard {
			return fmt.Errorf("node %d has not heard from node %d since %v", j, i, t.Format(time.StampMilli))
		}
	}
	return nil
}

// epochsSettled checks that the running, unpaused nodes agree on every node's config epoch,
// and that no two nodes have the same one.
func (c *Cluster) epochsSettled(ctx context.Context) error {
	var want map[string]string
	for i, s := range c.nodes {
		if !s.live() {
			continue
		}
		out, err := s.adminClient().ClusterNodes(ctx).Result()
		if err != nil {
			return fmt.Errorf("node %d: CLUSTER NODES: %w", i, err)
		}
		epochs := map[string]string{} // node id to config epoch
		owners := map[string]string{} // config epoch to node id
		for line := range strings.Lines(out) {
			f := strings.Fields(line)
			if len(f) < 8 {
				continue
			}
			id, epoch := f[0], f[6]
			if other, ok := owners[epoch]; ok {
				return fmt.Errorf("node %d: nodes %s and %s share config epoch %s", i, other, id, epoch)
			}
			epochs[id], owners[epoch] = epoch, id
		}
		if want == nil {
			want = epochs
		} else if !maps.Equal(epochs, want) {
			return fmt.Errorf("node %d sees config epochs %v, another node sees %v", i, epochs, want)
		}
	}
	return nil
}

// checkSlot fails the test unless slot is a valid hash slot.
func checkSlot(tb testing.TB, slot int) {
	tb.Helper()
	if slot < 0 || slot >= SlotCount {
		tb.Fatalf("redistest: slot %d is out of range [0, %d)", slot, SlotCount)
	}
}

// logTails quotes the end of every node's log, for failure messages.
func (c *Cluster) logTails() string {
	var b strings.Builder
	for i, s := range c.nodes {
		fmt.Fprintf(&b, "--- node %d (%s) ---\n%s\n", i, s.Addr(), s.logTail())
	}
	return b.String()
}
