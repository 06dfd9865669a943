package fault_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/wakuwaku-go/wakuwaku/internal/redistest"
	"github.com/wakuwaku-go/wakuwaku/lock"
	"github.com/wakuwaku-go/wakuwaku/proof/internal/fault"
)

// commandCalls returns how many times the server ran cmd, from INFO
// commandstats.
func commandCalls(t *testing.T, c *redis.Client, cmd string) int64 {
	t.Helper()
	stats, err := redistest.CommandStats(t.Context(), c)
	if err != nil {
		t.Fatal(err)
	}
	return stats[cmd].Calls
}

// TestScriptFlush empties the server's script cache with SCRIPT FLUSH every
// couple of milliseconds while 16 goroutines here and 16 in a child contend.
// Every script that the flush drops comes back through the EVAL fallback.
// Pass: no error reaches a caller, no overlap, porcupine Ok.
func TestScriptFlush(t *testing.T) {
	srv := redistest.Start(t)
	admin := srv.Client(t)
	coord := fault.NewCoordinator(t)
	ld := load{
		Namespace:  "flush",
		TTL:        250 * time.Millisecond,
		Names:      []string{"a", "b", "c", "d"},
		Backoff:    10 * time.Millisecond,
		MaxSteps:   3,
		LapseShare: 0.02,
		DropShare:  0.1,
	}
	spell := fault.Pick(5*time.Second, 60*time.Second)
	child := startChildren(t, coord, func(int) contendArgs { return contendArgs{Conn: conn{Addr: srv.Addr()}, Load: ld, Goroutines: 16} }, 1)[0]
	ctx, stop := context.WithTimeout(t.Context(), spell)
	defer stop()
	rec := fault.NewRecorder(0)
	local := runLocal(ctx, lock.NewDB(srv.Client(t)), rec, coord.Resource, ld, 1, 16)
	flushes := 0
	for ctx.Err() == nil {
		if err := admin.ScriptFlush(t.Context()).Err(); err != nil {
			t.Fatalf("SCRIPT FLUSH: %v", err)
		}
		flushes++
		time.Sleep(2 * time.Millisecond)
	}
	local.Wait()
	child.Stop(t)
	coord.History.Add(rec.Take()...)

	h := coord.History
	ta := h.Tally()
	for i, o := range h.Errors() {
		if i == 10 {
			break
		}
		t.Errorf("error reached a caller: %v", o)
	}
	n := overlaps(t, h, ld.TTL)
	evals, evalshas := commandCalls(t, admin, "eval"), commandCalls(t, admin, "evalsha")
	// What the scenario shows (RELIABILITY.md, SCRIPT FLUSH): scripts met
	// the flushes and came back through the EVAL fallback.
	if flushes == 0 || evalshas == 0 || evals == 0 {
		t.Errorf("%d SCRIPT FLUSH, the server ran %d EVALSHA and %d EVAL; want flushes, and scripts that came back through the EVAL fallback", flushes, evalshas, evals)
	}
	res := coord.Resource.Figures()
	fault.Publish(t, fault.Figures{
		Scenario:       "SCRIPT FLUSH under load",
		Seconds:        spell.Seconds(),
		Ops:            ta.Ops,
		Acquired:       ta.Acquired,
		Errors:         ta.Errors,
		Faults:         fmt.Sprintf("%d SCRIPT FLUSH", flushes),
		Overlaps:       n,
		WritesAccepted: res.Accepted,
		StaleAccepted:  res.StaleAccepted,
		StaleRefused:   res.StaleRefused,
		EntersLate:     res.EntersLate,
		Linearizable:   verdict(t, h, ld.TTL, ld.Kind),
		Notes:          []string{fmt.Sprintf("server ran %d EVALSHA and %d EVAL (the fallback after NOSCRIPT)", evalshas, evals), stale(t, res)},
	})
}
