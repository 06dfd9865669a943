package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/wakuwaku-go/wakuwaku/internal/redistest"
	"github.com/wakuwaku-go/wakuwaku/lock"
)

// TestRelease releases each kind of lock key, and refuses every other key
// under the library's prefixes, saying what it is; without -force it
// deletes nothing and says what -force would delete.
func TestRelease(t *testing.T) {
	srv := redistest.Start(t)
	ctx := t.Context()
	rdb := srv.Client(t)
	db := lock.NewDB(rdb)
	invoices := lock.New[int]("invoice", time.Minute)
	fenced := lock.New[int]("ledger", time.Minute).Fenced()
	catalog := lock.NewRW[string]("catalog", 30*time.Second)
	if tok, err := invoices.TryLock(ctx, db, 42); err != nil || tok == nil {
		t.Fatal(tok, err)
	}
	if tok, _, err := fenced.TryLock(ctx, db, 7); err != nil || tok == nil {
		t.Fatal(tok, err)
	}
	for range 2 {
		if tok, err := catalog.TryRead(ctx, db, "books"); err != nil || tok == nil {
			t.Fatal(tok, err)
		}
	}
	if tok, err := catalog.TryWrite(ctx, db, "maps"); err != nil || tok == nil {
		t.Fatal(tok, err)
	}
	startReport(t, srv, 1)
	invoiceKey := invoices.Key(42)
	ledgerKey := lock.New[int]("ledger", time.Minute).Key(7)
	mapsWriter, _ := catalog.Keys("maps")
	_, booksReaders := catalog.Keys("books")
	leaseKey := lock.New[string]("cron", time.Minute).Key("hourly-report")
	recordKey := "@@wakuwaku-cron:{" + leaseKey + "}"
	hashKey := invoices.Key(43)
	rdb.HSet(ctx, hashKey, "f", "v")
	token := func(key string) string {
		t.Helper()
		v, err := rdb.Get(ctx, key).Result()
		if err != nil {
			t.Fatalf("GET %s = %v", key, err)
		}
		return fmt.Sprintf("%x", v)
	}
	exists := func(key string) bool {
		t.Helper()
		n, err := rdb.Exists(ctx, key).Result()
		if err != nil {
			t.Fatal(err)
		}
		return n == 1
	}

	for _, tc := range []struct {
		name   string
		args   []string
		code   int
		want   string // in stdout if 0, else in stderr's one line
		gone   string // a key that must be gone afterwards
		stayed string // a key that must still be there
	}{
		{"a Lock without -force", []string{"release", invoiceKey}, 0,
			"not released without -force (its holder may still think it holds it): the lock 42 in namespace invoice held by token " + token(invoiceKey) + ", with ", "", invoiceKey},
		{"a Lock, -force after the key", []string{"release", invoiceKey, "-force"}, 0,
			"released the lock 42 in namespace invoice held by token " + token(invoiceKey) + ", with ", invoiceKey, ""},
		{"a Lock no longer held", []string{"release", "-force", invoiceKey}, 1,
			"the lock 42 in namespace invoice is not held: no key", "", ""},
		{"an RwLock's writer", []string{"release", "-force", mapsWriter}, 0,
			"released the write lock of maps in namespace catalog (an RwLock) held by token " + token(mapsWriter) + ", with ", mapsWriter, ""},
		{"an RwLock's readers", []string{"release", "-force", booksReaders}, 0,
			"removed the 2 readers of books in namespace catalog (an RwLock): token ", booksReaders, ""},
		{"a FencedLock's lock", []string{"release", "-force", ledgerKey}, 0,
			"released the lock 7 in namespace ledger held by token ", ledgerKey, ""},
		{"a FencedLock's counter", []string{"release", "-force", "@@wakuwaku-entity:LockFence:{" + ledgerKey + "}"}, 1,
			`is a FencedLock's counter, not a lock: deleting it could hand a later holder a smaller fencing number; release its lock "` + ledgerKey + `" instead`, "", "@@wakuwaku-entity:LockFence:{" + ledgerKey + "}"},
		{"a job's record", []string{"release", "-force", recordKey}, 1,
			"is the record of the cron job hourly-report, not a lock", "", recordKey},
		{"a key of a Lock's shape that holds a hash", []string{"release", "-force", hashKey}, 1,
			"holds a hash, not a lock's token: refusing to touch it", "", hashKey},
		{"the runtime's lease", []string{"release", "-force", leaseKey}, 0,
			"released the lock hourly-report in namespace cron (the cron runtime's lease of the job hourly-report) held by token ", leaseKey, ""},
		{"an RwLock key of neither role", []string{"release", "-force", "@@wakuwaku-entity:RwLock:{catalog:maps}:x"}, 1,
			"is not an RwLock's key: they end in }:w (the writer) or }:r (the readers)", "", ""},
		{"a Lock key without a namespace", []string{"release", "-force", "@@wakuwaku-entity:Lock:invoice"}, 1,
			"is not a Lock's key: no valid namespace in it", "", ""},
		{"another kind", []string{"release", "-force", "@@wakuwaku-entity:Semaphore:x:y"}, 1,
			`kind "Semaphore", want Lock or RwLock`, "", ""},
		{"a key of someone else's", []string{"release", "-force", "session:42"}, 1,
			`"session:42" is not a lock's key`, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errs := wakuwaku(t, srv, tc.args...)
			got := out
			if tc.code != 0 {
				got = errs
			}
			if code != tc.code || !strings.Contains(got, tc.want) || strings.Count(got, "\n") != 1 {
				t.Errorf("wakuwaku %q = %d, stdout %q, stderr %q; want %d and one line with %q", tc.args, code, out, errs, tc.code, tc.want)
			}
			if tc.gone != "" && exists(tc.gone) {
				t.Errorf("%s is still there", tc.gone)
			}
			if tc.stayed != "" && !exists(tc.stayed) {
				t.Errorf("%s is gone", tc.stayed)
			}
		})
	}
	if tok, err := catalog.TryWrite(ctx, db, "books"); err != nil || tok == nil {
		t.Errorf("TryWrite(books) after its readers were removed = %v, %v; want the lock", tok, err)
	}
}
