package fault_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wakuwaku-go/wakuwaku/internal/redistest"
	"github.com/wakuwaku-go/wakuwaku/lock"
	"github.com/wakuwaku-go/wakuwaku/proof/internal/fault"
)

// TestClusterMigration contends on a Lock and an RWLock in a three-master
// Redis Cluster while the hash slots of their keys move from master to master
// again and again (CLUSTER SETSLOT, MIGRATE, with ASK redirections in
// between). Pass: no overlapping holders, no CROSSSLOT error, porcupine Ok
// on both histories. Other errors are counted and published.
func TestClusterMigration(t *testing.T) {
	cl := redistest.StartCluster(t, 3)
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		// Each node's view of the cluster, for a failure that the rig
		// reports as nodes that disagree.
		for i, node := range cl.Nodes() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			out, err := node.Client(t).ClusterNodes(ctx).Result()
			cancel()
			t.Logf("node %d (%s) CLUSTER NODES: %v\n%s", i, cl.NodeID(i), err, out)
			if b, err := os.ReadFile(filepath.Join(node.Dir(), "redis.log")); err == nil {
				lines := strings.Split(strings.TrimSpace(string(b)), "\n")
				t.Logf("node %d log:\n%s", i, strings.Join(lines[max(0, len(lines)-40):], "\n"))
			}
		}
	})
	dbs := []lock.DB{lock.NewDB(cl.Client(t)), lock.NewDB(cl.Client(t))}
	locks := load{
		Namespace:  "migrating",
		TTL:        250 * time.Millisecond,
		Names:      []string{"a", "b"},
		Backoff:    10 * time.Millisecond,
		MaxSteps:   3,
		LapseShare: 0.03,
		DropShare:  0.1,
	}
	rws := locks
	rws.Kind, rws.Readers = fault.RWLock, 3
	l := lock.New[string](locks.Namespace, locks.TTL)
	rw := lock.NewRW[string](rws.Namespace, rws.TTL)
	var slots []int
	for _, n := range locks.Names {
		w, r := rw.Keys(n)
		if redistest.Slot(w) != redistest.Slot(r) {
			t.Fatalf("RWLock keys %q and %q in different slots", w, r)
		}
		slots = append(slots, redistest.Slot(l.Key(n)), redistest.Slot(w))
	}

	spell := fault.Pick(8*time.Second, 90*time.Second)
	ctx, stop := context.WithTimeout(t.Context(), spell)
	defer stop()
	res := fault.NewResource()
	lockRec, rwRec := fault.NewRecorder(0), fault.NewRecorder(1)
	var running []interface{ Wait() }
	for i, db := range dbs {
		running = append(running,
			runLocal(ctx, db, lockRec, res, locks, int32(100*i), 6),
			runLocal(ctx, db, rwRec, res, rws, int32(100*i+50), 6))
	}
	migrations := 0
	for ctx.Err() == nil {
		for _, s := range slots {
			cl.MigrateSlot(t, s, (cl.SlotOwner(t, s)+1)%3)
			migrations++
		}
	}
	for _, w := range running {
		w.Wait()
	}

	lockH, rwH := &fault.History{}, &fault.History{}
	lockH.Add(lockRec.Take()...)
	rwH.Add(rwRec.Take()...)
	// A key that a MIGRATE moved lives on by the time its target took to
	// run the RESTORE: a holder's lease ends no earlier, but a busy answer
	// a little after its end is Redis's, not the lock's.
	outlive := cl.LongestMigrate()
	lockH.KeysOutlive(outlive)
	rwH.KeysOutlive(outlive)
	kinds := map[string]int{}
	var errs int
	for _, h := range []*fault.History{lockH, rwH} {
		for _, o := range h.Errors() {
			errs++
			code, _, _ := strings.Cut(o.Err, " ")
			kinds[o.Kind.String()+" "+code]++
			if errs <= 5 {
				t.Logf("error reached a caller: %v", o)
			}
		}
	}
	for k, n := range kinds {
		if strings.HasSuffix(k, " CROSSSLOT") {
			t.Errorf("%d CROSSSLOT errors (%s), want 0", n, k)
		}
	}
	n := overlaps(t, lockH, locks.TTL) + overlaps(t, rwH, rws.TTL)
	lt, rt := lockH.Tally(), rwH.Tally()
	fig := res.Figures()
	fault.Publish(t, fault.Figures{
		Scenario:       "Redis Cluster slot migration",
		Seconds:        spell.Seconds(),
		Ops:            lt.Ops + rt.Ops,
		Acquired:       lt.Acquired + rt.Acquired,
		Errors:         errs,
		Faults:         fmt.Sprintf("%d slot migrations between 3 masters (%d slots)", migrations, len(slots)),
		Overlaps:       n,
		WritesAccepted: fig.Accepted,
		StaleAccepted:  fig.StaleAccepted,
		StaleRefused:   fig.StaleRefused,
		EntersLate:     fig.EntersLate,
		Linearizable:   fmt.Sprintf("Lock %s, RWLock %s", verdict(t, lockH, locks.TTL, locks.Kind), verdict(t, rwH, rws.TTL, rws.Kind)),
		Notes: []string{fmt.Sprintf("errors by operation and code: %v", kinds), stale(t, fig),
			fmt.Sprintf("the longest MIGRATE took %v, which the check allows a key to outlive its TTL", outlive.Round(time.Microsecond))},
	})
}
