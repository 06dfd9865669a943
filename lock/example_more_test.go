package lock_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/wakuwaku-go/wakuwaku/lock"
)

// An operator's page asks whether an invoice is being finalized, through a
// read-only handle: it can't take the lock by mistake.
func ExampleLock_Held() {
	client, stop := exampleRedis()
	defer stop()
	ctx := context.Background()
	db := lock.NewDB(client)

	tok, _ := Invoices.TryLock(ctx, db, 7)
	left, held, err := Invoices.Held(ctx, db.ReadOnly(), 7)
	fmt.Println(held, left > 29*time.Second, err)
	tok.Release(ctx)
	_, held, _ = Invoices.Held(ctx, db.ReadOnly(), 7)
	fmt.Println(held)
	// Output:
	// true true <nil>
	// false
}

// A nightly job finalizes every open invoice it can get, in one round trip,
// and leaves those other replicas hold.
func ExampleLock_TryLockMany() {
	client, stop := exampleRedis()
	defer stop()
	ctx := context.Background()
	db := lock.NewDB(client)

	other, _ := Invoices.TryLock(ctx, db, 2) // another replica has invoice 2
	open := []uint64{1, 2, 3}
	toks, err := Invoices.TryLockMany(ctx, db, open)
	if err != nil {
		fmt.Println(err)
		return
	}
	for i, tok := range toks {
		if tok != nil {
			writeFinalTotals(open[i])
			fmt.Println("finalized", open[i])
		}
	}
	released, _ := lock.ReleaseMany(ctx, toks) // nil tokens are skipped
	fmt.Println(released)
	other.Release(ctx)
	// Output:
	// finalized 1
	// finalized 3
	// [true false true]
}

// A request that must finalize an invoice itself waits for the replica
// that holds it, up to its own deadline.
func ExampleLock_Lock() {
	client, stop := exampleRedis()
	defer stop()
	db := lock.NewDB(client)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()

	other, _ := Invoices.TryLock(ctx, db, 9)
	go func() {
		time.Sleep(50 * time.Millisecond) // the other replica finishes
		other.Release(context.Background())
	}()
	tok, err := Invoices.Lock(ctx, db, 9, lock.Backoff{Max: 100 * time.Millisecond})
	if err != nil {
		fmt.Println("gave up:", err)
		return
	}
	fmt.Println("got it")
	tok.Release(ctx)
	// Output: got it
}

// A fenced lock numbers its holders, and the store refuses a write whose
// number is below the last it saw: a holder that stalled past its lease
// can't overwrite the work of the next.
func ExampleFencedLock() {
	client, stop := exampleRedis()
	defer stop()
	ctx := context.Background()
	db := lock.NewDB(client)
	reports := lock.New[string]("report", time.Minute).Fenced()

	var highest uint64 // the store's own check, say a column beside the row
	store := func(fence uint64) error {
		if fence < highest {
			return errors.New("refused: a later holder wrote")
		}
		highest = fence
		return nil
	}
	tok, first, _ := reports.TryLock(ctx, db, "daily")
	tok.Release(ctx) // or its lease runs out while this holder stalls
	tok, second, _ := reports.TryLock(ctx, db, "daily")
	fmt.Println(second > first, store(second))
	fmt.Println(store(first)) // the first holder, resuming late
	tok.Release(ctx)
	// Output:
	// true <nil>
	// refused: a later holder wrote
}

// A metrics adapter counts outcomes per lock family.
func ExampleWithObserver() {
	client, stop := exampleRedis()
	defer stop()
	ctx := context.Background()
	counts := map[string]int{} // one goroutine here; a real adapter uses its metrics' counters
	db := lock.NewDB(client, lock.WithObserver(func(e lock.Event) {
		counts[e.Kind+":"+e.Namespace+" "+e.Op+" "+e.Result]++
	}))

	tok, _ := Invoices.TryLock(ctx, db, 1)
	Invoices.TryLock(ctx, db, 1)
	tok.Release(ctx)
	fmt.Println(counts)
	// Output: map[Lock:invoice lock acquired:1 Lock:invoice lock busy:1 Lock:invoice release released:1]
}
