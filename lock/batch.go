package lock

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// TryLockMany takes, each on its own, the locks of names that are free, as
// [Lock.TryLock] would one by one, in one round trip per Redis node: the
// result holds one entry per name, in order, a token where the lock was free
// and nil where it was busy (a name given twice is busy the second time).
// It never waits.
//
// On one server, or through a Sentinel failover client, it sends one script
// call for all names. On a *redis.ClusterClient it sends one script call per
// hash slot among the names, in one pipeline, which go-redis splits by node
// and sends to the nodes at once: Redis refuses a script whose keys span
// slots even when one node owns them all. Through any other Client over a
// cluster (a caller's wrapper, say), the one call is refused with CROSSSLOT
// and TryLockMany falls back to one call per slot, one after the other. A
// *redis.Ring gets one call per name, pipelined per shard.
//
// The error is as for TryLock. When a node fails and others answer, the
// tokens of the names that were taken are returned with the error, which
// counts the names that failed and wraps the first failure: those names
// have nil, though their lock may have been taken (a lost reply) and is then
// left to its lease.
func (l Lock[N]) TryLockMany(ctx context.Context, db DB, names []N) ([]*Token, error) {
	if err := db.check(ctx, l.entity()); err != nil {
		return nil, err
	}
	if len(names) == 0 {
		return nil, nil
	}
	toks := make([]*Token, len(names))
	keys := make([]string, len(names))
	args := make([]any, len(names))
	var buf [128]byte
	for i := range names {
		keys[i] = string(l.f.appendKey(buf[:0], &names[i]))
		toks[i] = newToken(db.c, keys[i], l.f.lease, l.f.ms)
		args[i] = &toks[i].value
	}
	sent := time.Now()
	res, errs := lockMany.many(ctx, db.c, keys, args, 1, l.f.ms, true)
	o, _ := db.c.(*wrapped)
	var unreplicated []*Token
	for i, t := range toks {
		if o != nil {
			o.acquired(l.entity(), "lock", res[i], errs[i], sent)
		}
		if errs[i] != nil || res[i] == 0 {
			if errs[i] != nil && res[i] != 0 { // taken, not replicated
				unreplicated = append(unreplicated, t)
			}
			toks[i] = nil
			continue
		}
		t.acquired(sent)
	}
	if len(unreplicated) > 0 {
		ReleaseMany(context.WithoutCancel(ctx), unreplicated)
	}
	return toks, batchErr("TryLockMany", errs)
}

// ReleaseMany releases each of tokens, as [Token.Release] would one by one,
// in one round trip per Redis node (grouped as [Lock.TryLockMany] groups
// names), and reports for each, in order, whether it still held its lock.
// Nil tokens, which TryLockMany returns for busy names, are skipped and
// reported false, so its result can be passed as it is. Tokens of different
// DB clients are sent client by client. The error is as for TryLockMany:
// tokens whose node failed are reported false, and their leases end.
func ReleaseMany(ctx context.Context, tokens []*Token) ([]bool, error) {
	return manyTokens(ctx, tokens, unlockMany, false)
}

// ExtendMany extends each of tokens, as [Token.Extend] would one by one, in
// one round trip per Redis node, and reports for each, in order, whether it
// still held its lock (and so was extended). Nil tokens are skipped and
// reported false, as for [ReleaseMany]; the error is as for ReleaseMany's.
func ExtendMany(ctx context.Context, tokens []*Token) ([]bool, error) {
	return manyTokens(ctx, tokens, extendMany, true)
}

// manyTokens releases or extends tokens with s, grouped by client.
func manyTokens(ctx context.Context, tokens []*Token, s script, extend bool) ([]bool, error) {
	held := make([]bool, len(tokens))
	if err := ctx.Err(); err != nil {
		return held, err
	}
	errs := make([]error, len(tokens))
	per := 1
	if extend {
		per = 2
	}
	for _, g := range byClient(tokens) {
		c := tokens[g[0]].c
		if c == nil {
			for _, i := range g {
				errs[i] = ErrNoClient
			}
			continue
		}
		keys := make([]string, len(g))
		args := make([]any, 0, per*len(g))
		seqs := make([]uint64, len(g))
		sent := make([]time.Time, len(g))
		for j, i := range g {
			t := tokens[i]
			keys[j] = t.key
			args = append(args, &t.value)
			if extend {
				args = append(args, t.ms)
			}
			seqs[j], sent[j] = t.begin(!extend)
		}
		res, gerrs := s.many(ctx, c, keys, args, per, nil, extend)
		o, _ := c.(*wrapped)
		for j, i := range g {
			t := tokens[i]
			errs[i] = gerrs[j]
			if o != nil {
				o.settled(t.key, extend, res[j] != 0, gerrs[j], sent[j])
			}
			if gerrs[j] != nil {
				continue
			}
			held[i] = res[j] != 0
			t.settle(seqs[j], sent[j], held[i] && extend)
		}
	}
	verb := "ReleaseMany"
	if extend {
		verb = "ExtendMany"
	}
	return held, batchErr(verb, errs)
}

// byClient returns the indexes of the non-nil tokens grouped by the client
// they were given, in order of first appearance. A client that can't be
// compared (its type, or a value it holds, such as a slice in an interface
// field) gets a group per token.
func byClient(tokens []*Token) [][]int {
	var groups [][]int
	var clients []Client
next:
	for i, t := range tokens {
		if t == nil {
			continue
		}
		if t.c != nil && reflect.ValueOf(t.c).Comparable() {
			for g, c := range clients {
				if c != nil && reflect.ValueOf(c).Comparable() && c == t.c {
					groups[g] = append(groups[g], i)
					continue next
				}
			}
		}
		clients = append(clients, t.c)
		groups = append(groups, []int{i})
	}
	return groups
}

// batchErr sums up the per-name errors of a batch operation: nil if none
// failed, else an error that counts them and wraps the first.
func batchErr(op string, errs []error) error {
	var first error
	failed := 0
	for _, err := range errs {
		if err != nil {
			failed++
			if first == nil {
				first = err
			}
		}
	}
	if failed == 0 {
		return nil
	}
	if failed == len(errs) {
		return first
	}
	return fmt.Errorf("lock: %s: %d of %d failed: %w", op, failed, len(errs), first)
}

// batch is one batch operation's calls of a script: the keys, their
// arguments, and what each key's call answered.
type batch struct {
	s        script
	keys     []string
	args     []any // per arguments for each key, in key order
	per      int
	tail     any   // the last argument of every call, unless nil
	replicas int   // replicas to WAIT for after the calls; 0: none
	waitMs   int64 // the WAIT's timeout
	res      []int64
	errs     []error
}

// many runs s over keys, in as few round trips as the client allows (see
// TryLockMany), and returns each key's integer answer and error. A call's
// KEYS are its keys; its ARGV, each key's per arguments from args in key
// order, then tail unless it is nil. s answers an array with an integer per
// key. When write is set and the DB waits for replicas, each call is
// followed by a WAIT on its connection, and the keys of a call that too few
// replicas acknowledged get an error wrapping ErrNotReplicated, with their
// answer kept, so that the caller can release what they took.
func (s script) many(ctx context.Context, c Client, keys []string, args []any, per int, tail any, write bool) ([]int64, []error) {
	b := &batch{s: s, keys: keys, args: args, per: per, tail: tail, res: make([]int64, len(keys)), errs: make([]error, len(keys))}
	if w, ok := c.(*wrapped); ok && write && w.replicas > 0 {
		b.replicas, b.waitMs = w.replicas, w.waitMs
	}
	all := make([]int, len(keys))
	for i := range all {
		all[i] = i
	}
	switch base := unwrap(c).(type) {
	case *redis.ClusterClient:
		b.cluster(ctx, base)
	case *redis.Ring:
		if b.replicas > 0 {
			b.fail(all, fmt.Errorf("lock: WithReplicas needs a *redis.Client or *redis.ClusterClient, not %T", base))
			break
		}
		b.pipelined(ctx, base.Pipeline(), eachKey(len(keys)))
	case *redis.Client:
		if b.replicas > 0 {
			b.pipelined(ctx, base.Pipeline(), [][]int{all}) // the call and its WAIT on one connection
			break
		}
		b.single(ctx, c, all)
	default:
		if b.replicas > 0 {
			b.fail(all, fmt.Errorf("lock: WithReplicas needs a *redis.Client or *redis.ClusterClient, not %T", base))
			break
		}
		b.single(ctx, c, all)
	}
	return b.res, b.errs
}

// fail sets the error of the keys of g.
func (b *batch) fail(g []int, err error) {
	for _, i := range g {
		b.errs[i] = err
	}
}

// single sends one call over the keys of all through c, and, if a cluster
// behind c refuses it for spanning slots, one call per slot.
func (b *batch) single(ctx context.Context, c Client, all []int) {
	err := b.once(ctx, c, all)
	if err == nil {
		return
	}
	if !isCrossSlot(err) {
		b.fail(all, err)
		return
	}
	for _, g := range bySlot(b.keys) {
		if err := b.once(ctx, c, g); err != nil {
			b.fail(g, err)
		}
	}
}

// cluster sends one call per hash slot among the keys, grouped by the
// master that owns the slot: one pipeline per master, all masters at once,
// so that one slow or failing master fails its own names only. A call that
// a master redirects (MOVED, ASK: the slot moved or is moving) or defers
// (TRYAGAIN) is sent again through cc, which follows the redirection; when
// the batch waits for replicas, such a call fails with the redirection
// instead, since cc would send it without its WAIT.
func (b *batch) cluster(ctx context.Context, cc *redis.ClusterClient) {
	type node struct {
		c      *redis.Client
		groups [][]int
	}
	var nodes []*node
	at := map[*redis.Client]*node{}
	for _, g := range bySlot(b.keys) {
		c, err := cc.MasterForKey(ctx, b.keys[g[0]])
		if err != nil {
			b.fail(g, err)
			continue
		}
		n := at[c]
		if n == nil {
			n = &node{c: c}
			at[c] = n
			nodes = append(nodes, n)
		}
		n.groups = append(n.groups, g)
	}
	// The nodes' groups hold distinct indexes, so the goroutines write
	// distinct elements of res and errs.
	var wg sync.WaitGroup
	for _, n := range nodes {
		wg.Go(func() {
			b.pipelined(ctx, n.c.Pipeline(), n.groups)
			if b.replicas > 0 {
				return
			}
			for _, g := range n.groups {
				if err := b.errs[g[0]]; err != nil && isRedirect(err) {
					err = b.once(ctx, cc, g)
					b.fail(g, err)
				}
			}
		})
	}
	wg.Wait()
}

// isRedirect reports whether err is a cluster node saying that another node
// serves the slot, or will once a migration is over.
func isRedirect(err error) bool {
	for _, p := range []string{"MOVED", "ASK", "TRYAGAIN"} {
		if redis.HasErrorPrefix(err, p) {
			return true
		}
	}
	return false
}

// once sends one call over the keys of g through c, with the NOSCRIPT
// fallback, and writes the answers into res. It never waits for replicas.
func (b *batch) once(ctx context.Context, c Client, g []int) error {
	cmd := b.cmd(ctx, "evalsha", b.s.sha, g)
	err := process(ctx, c, cmd)
	if err != nil && isNoScript(err) {
		cmd = b.cmd(ctx, "eval", b.s.src, g)
		err = process(ctx, c, cmd)
	}
	if err == nil {
		err = answers(cmd, g, b.res)
	}
	return err
}

// pipelined sends one call per group in one pipeline, then re-sends in
// full, in a second pipeline, the calls a node answered NOSCRIPT. When the
// batch waits for replicas, each pipeline ends with a WAIT, which covers
// the calls sent with it: a pipeline holds one connection while it runs,
// and two pipelines may run on two.
func (b *batch) pipelined(ctx context.Context, p redis.Pipeliner, groups [][]int) {
	cmds := make([]*redis.SliceCmd, len(groups))
	waits := make([]*redis.IntCmd, len(groups)) // the WAIT that covers each group's call
	exec := func(which []int) {
		var wait *redis.IntCmd
		if b.replicas > 0 {
			wait = redis.NewIntCmd(ctx, "wait", b.replicas, b.waitMs)
			p.Process(ctx, wait)
		}
		for _, i := range which {
			waits[i] = wait
		}
		p.Exec(ctx) // each command's own error is read below
	}
	first := make([]int, len(groups))
	for i, g := range groups {
		cmds[i] = b.cmd(ctx, "evalsha", b.s.sha, g)
		p.Process(ctx, cmds[i])
		first[i] = i
	}
	exec(first)
	var again []int
	for i, cmd := range cmds {
		if err := cmd.Err(); err != nil && isNoScript(err) {
			cmds[i] = b.cmd(ctx, "eval", b.s.src, groups[i])
			p.Process(ctx, cmds[i])
			again = append(again, i)
		}
	}
	if len(again) > 0 {
		exec(again)
	}
	for i, cmd := range cmds {
		err := cmd.Err()
		if err == nil {
			err = answers(cmd, groups[i], b.res)
		}
		if err == nil && waits[i] != nil {
			err = notReplicated(waits[i], b.replicas, b.waitMs)
		}
		if err != nil {
			b.fail(groups[i], err)
		}
	}
}

// cmd builds the call of the script (verb and body: evalsha and the SHA, or
// eval and the source) over the keys of g.
func (b *batch) cmd(ctx context.Context, verb string, body any, g []int) *redis.SliceCmd {
	argv := make([]any, 0, 3+(1+b.per)*len(g)+1)
	argv = append(argv, verb, body, len(g))
	for _, i := range g {
		argv = append(argv, b.keys[i])
	}
	for _, i := range g {
		argv = append(argv, b.args[b.per*i:b.per*(i+1)]...)
	}
	if b.tail != nil {
		argv = append(argv, b.tail)
	}
	return redis.NewSliceCmd(ctx, argv...)
}

// answers copies the array reply of cmd, one integer per key of g, into res.
func answers(cmd *redis.SliceCmd, g []int, res []int64) error {
	v := cmd.Val()
	if len(v) != len(g) {
		return fmt.Errorf("lock: script answered %d values for %d keys", len(v), len(g))
	}
	for j, i := range g {
		n, ok := v[j].(int64)
		if !ok {
			return fmt.Errorf("lock: script answered %T, want an integer", v[j])
		}
		res[i] = n
	}
	return nil
}

// bySlot groups the indexes of keys by Redis Cluster hash slot, in order of
// first appearance.
func bySlot(keys []string) [][]int {
	at := make(map[uint16]int)
	var groups [][]int
	for i, k := range keys {
		s := slotOf(k)
		g, ok := at[s]
		if !ok {
			g = len(groups)
			at[s] = g
			groups = append(groups, nil)
		}
		groups[g] = append(groups[g], i)
	}
	return groups
}

// eachKey returns n groups of one index each.
func eachKey(n int) [][]int {
	groups := make([][]int, n)
	for i := range groups {
		groups[i] = []int{i}
	}
	return groups
}

// isCrossSlot reports whether err is Redis Cluster refusing a command whose
// keys span slots.
func isCrossSlot(err error) bool {
	return strings.HasPrefix(err.Error(), "CROSSSLOT") || redis.HasErrorPrefix(err, "CROSSSLOT")
}

// lockMany takes each KEYS[i] for the token ARGV[i] as lockScript does, for
// ARGV[#KEYS+1] ms; it answers an array with 1 where the token holds the key
// and 0 where another does.
var lockMany = newScript(`
local ms = ARGV[#KEYS + 1]
local res = {}
for i, key in ipairs(KEYS) do
	res[i] = 0
	if redis.REDIS_VERSION_NUM then
		local cur = redis.call('SET', key, ARGV[i], 'NX', 'GET', 'PX', ms)
		if not cur or cur == ARGV[i] then
			res[i] = 1
		end
	elseif redis.call('SET', key, ARGV[i], 'NX', 'PX', ms) or redis.call('GET', key) == ARGV[i] then
		res[i] = 1
	end
end
return res`)

// unlockMany deletes each KEYS[i] that holds the token ARGV[i]; an array
// with 1 where it did and 0 where it didn't.
var unlockMany = newScript(`
local res = {}
for i, key in ipairs(KEYS) do
	res[i] = 0
	if redis.call('GET', key) == ARGV[i] then
		res[i] = redis.call('DEL', key)
	end
end
return res`)

// extendMany restarts the lease on each KEYS[i] that holds the token
// ARGV[2i-1] for ARGV[2i] ms; an array with 1 where it did and 0 where it
// didn't.
var extendMany = newScript(`
local res = {}
for i, key in ipairs(KEYS) do
	res[i] = 0
	if redis.call('GET', key) == ARGV[2 * i - 1] then
		res[i] = redis.call('PEXPIRE', key, ARGV[2 * i])
	end
end
return res`)
