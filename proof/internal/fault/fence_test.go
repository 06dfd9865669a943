package fault_test

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wakuwaku-go/wakuwaku/internal/redistest"
	"github.com/wakuwaku-go/wakuwaku/lock"
	"github.com/wakuwaku-go/wakuwaku/proof/internal/fault"
)

// TestFencedStaleWrites has 6 holders take 2 fenced names on a real server
// over and over, each writing to a FencedResource right after it took the
// lock and once more before releasing it. One hold in four stalls before
// its second write for twice the lease, as a process does in a long GC
// pause or a frozen VM, so that another holder takes the name and writes
// meanwhile: the stalled write is stale. Pass: every write of a holder that
// was the latest to take its name is accepted (the numbers grow in the
// order the lock changed hands), stale writes happened, and every stale
// write that came after the newer holder's first write was refused.
func TestFencedStaleWrites(t *testing.T) {
	srv := redistest.Start(t)
	db := lock.NewDB(srv.Client(t))
	const ttl = 40 * time.Millisecond
	l := lock.New[string]("fenced", ttl).Fenced()
	names := []string{"a", "b"}
	res := fault.NewFencedResource()
	spell := fault.Pick(4*time.Second, 60*time.Second)
	deadline := time.Now().Add(spell)

	// latest is, per name, the number of the holder that took it last and
	// has written: a write with a lower number is stale.
	var mu sync.Mutex
	latest := map[string]uint64{}
	// taken is, per name, the highest number handed out: a write below it
	// that the resource accepted is a stale write that came before the
	// newer holder's first write (harmless, and counted).
	taken := map[string]uint64{}
	var stale, staleRefused, staleEarly, staleBefore, liveRefused, holds, errs atomic.Int64
	write := func(name string, f uint64, first bool) {
		mu.Lock()
		isStale := f < latest[name]
		ok := res.Write(name, f)
		if !isStale && ok && f < taken[name] {
			staleBefore.Add(1)
		}
		if first && ok {
			latest[name] = f
		}
		mu.Unlock()
		switch {
		case isStale && ok:
			staleEarly.Add(1) // cannot happen: latest has written, so the resource saw its number
		case isStale:
			stale.Add(1)
			staleRefused.Add(1)
		case !ok:
			liveRefused.Add(1)
		}
	}
	var wg sync.WaitGroup
	for g := range 6 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), 14))
			for time.Now().Before(deadline) {
				name := names[r.IntN(len(names))]
				tok, f, err := l.TryLock(t.Context(), db, name)
				if err != nil {
					errs.Add(1)
					continue
				}
				if tok == nil {
					time.Sleep(time.Millisecond)
					continue
				}
				holds.Add(1)
				mu.Lock()
				taken[name] = max(taken[name], f)
				mu.Unlock()
				write(name, f, true)
				if r.IntN(4) == 0 {
					time.Sleep(2 * ttl) // the stall: the lease runs out
				} else {
					time.Sleep(time.Millisecond)
				}
				write(name, f, false)
				tok.Release(t.Context())
			}
		})
	}
	wg.Wait()

	fig := res.Figures()
	if liveRefused.Load() != 0 {
		t.Errorf("%d writes of the latest holder refused: a later acquire got a lower number", liveRefused.Load())
	}
	if staleEarly.Load() != 0 {
		t.Errorf("%d stale writes accepted after the newer holder wrote", staleEarly.Load())
	}
	if stale.Load() == 0 {
		t.Errorf("no stale write in %d holds: the stalls never let another holder in", holds.Load())
	}
	if errs.Load() != 0 {
		t.Errorf("%d acquires failed", errs.Load())
	}
	fault.Publish(t, fault.Figures{
		Scenario:       "fenced resource",
		Seconds:        spell.Seconds(),
		Acquired:       int(holds.Load()),
		Errors:         int(errs.Load()),
		Faults:         fmt.Sprintf("about one hold in four stalled for 2x TTL (%v)", 2*ttl),
		WritesAccepted: fig.Accepted,
		StaleRefused:   staleRefused.Load(),
		Notes: []string{
			fmt.Sprintf("writes of the latest holder refused: %d", liveRefused.Load()),
			fmt.Sprintf("stale writes: %d, all refused by the fencing number", stale.Load()),
			fmt.Sprintf("stale writes accepted before the newer holder's first write (harmless, not checked): %d", staleBefore.Load()),
		},
	})
}
