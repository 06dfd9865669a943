package lock_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/wakuwaku-go/wakuwaku/lock"
)

// exampleRedis starts an embedded Redis for the examples; a service passes
// its own go-redis client to lock.NewDB instead.
func exampleRedis() (*redis.Client, func()) {
	m, err := miniredis.Run()
	if err != nil {
		log.Fatal(err)
	}
	c := redis.NewClient(&redis.Options{Addr: m.Addr()})
	return c, func() { c.Close(); m.Close() }
}

// Invoices is declared once, at package level: at most one replica finalizes
// an invoice at a time.
var Invoices = lock.New[uint64]("invoice", 30*time.Second)

// finalizeInvoice finalizes invoice unless another replica is doing it, and
// reports whether it did.
func finalizeInvoice(ctx context.Context, db lock.DB, invoice uint64) (bool, error) {
	token, err := Invoices.TryLock(ctx, db, invoice)
	if err != nil {
		return false, err
	}
	if token == nil {
		return false, nil // someone else is finalizing it
	}
	writeFinalTotals(invoice)
	released, err := token.Release(ctx)
	if err != nil {
		return true, err
	}
	if !released {
		// The lease ran out before the release: another holder may have
		// run at the same time. Fence the write (see the package docs).
		log.Printf("invoice %d: lease ran out during finalization", invoice)
	}
	return true, nil
}

func writeFinalTotals(uint64) {}

// A replica finalizes an invoice; a second replica, trying while the first
// holds the lock, finds it busy.
func Example_finalizeInvoice() {
	client, stop := exampleRedis()
	defer stop()
	ctx := context.Background()
	db := lock.NewDB(client)

	done, err := finalizeInvoice(ctx, db, 1042)
	fmt.Println("finalized:", done, err)

	held, _ := Invoices.TryLock(ctx, db, 1043) // another replica holds 1043
	done, err = finalizeInvoice(ctx, db, 1043)
	fmt.Println("finalized while held elsewhere:", done, err)
	held.Release(ctx)
	// Output:
	// finalized: true <nil>
	// finalized while held elsewhere: false <nil>
}

// Catalog lets any number of exports read a shop's catalog at once, or one
// reprice rewrite it alone.
var Catalog = lock.NewRW[string]("catalog", 10*time.Second)

func export(ctx context.Context, db lock.DB, shop string) (bool, error) {
	read, err := Catalog.TryRead(ctx, db, shop)
	if err != nil || read == nil {
		return false, err // nil token: a writer holds it
	}
	// … read the catalog; other readers may do the same …
	_, err = read.Release(ctx)
	return true, err
}

func reprice(ctx context.Context, db lock.DB, shop string) (bool, error) {
	write, err := Catalog.TryWrite(ctx, db, shop)
	if err != nil || write == nil {
		return false, err // nil token: a writer or a reader holds it
	}
	// … rewrite the catalog alone …
	_, err = write.Release(ctx)
	return true, err
}

// Exports share a shop's catalog; a reprice waits for them to finish.
func Example_catalog() {
	client, stop := exampleRedis()
	defer stop()
	ctx := context.Background()
	db := lock.NewDB(client)

	reading, _ := Catalog.TryRead(ctx, db, "tokyo") // an export in progress
	ok, _ := export(ctx, db, "tokyo")
	fmt.Println("second export:", ok)
	ok, _ = reprice(ctx, db, "tokyo")
	fmt.Println("reprice during the export:", ok)
	reading.Release(ctx)
	ok, _ = reprice(ctx, db, "tokyo")
	fmt.Println("reprice after it:", ok)
	// Output:
	// second export: true
	// reprice during the export: false
	// reprice after it: true
}

// WhileHeld keeps extending a lease while work that may outlive its TTL runs,
// and cancels the work if the lease is lost.
func ExampleWhileHeld() {
	client, stop := exampleRedis()
	defer stop()
	ctx := context.Background()
	db := lock.NewDB(client)
	rebuilds := lock.New[string]("rebuild", time.Minute)

	token, err := rebuilds.TryLock(ctx, db, "search-index")
	if err != nil || token == nil {
		return
	}
	defer token.Release(ctx)
	n, err := lock.WhileHeld(ctx, token, func(ctx context.Context) (int, error) {
		// … a rebuild that checks ctx and stops when it ends …
		return 1234, ctx.Err()
	})
	fmt.Println(n, err)
	// Output: 1234 <nil>
}

// A DB narrowed with Only refuses every other lock before sending anything.
func ExampleDB_Only() {
	client, stop := exampleRedis()
	defer stop()
	ctx := context.Background()
	billing := lock.NewDB(client).Only(Invoices)

	_, err := Catalog.TryWrite(ctx, billing, "tokyo")
	fmt.Println(err)
	// Output: lock: not permitted by this DB: RwLock:catalog
}

// This example checks at startup that Redis answers, so that a service
// whose Redis is unreachable exits at once with the reason instead of
// starting jobs whose every lease will fail.
func ExampleDB_Ping() {
	client, done := exampleRedis()
	defer done()
	db := lock.NewDB(client)

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := db.Ping(ctx); err != nil {
		log.Fatal(err) // "lock: ping redis: dial tcp …: connect: connection refused"
	}
	fmt.Println("redis answers")
	// Output: redis answers
}
