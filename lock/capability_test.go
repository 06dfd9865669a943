package lock_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/wakuwaku-go/wakuwaku/lock"
)

// refusing is a client that fails the test if a command reaches it.
type refusing struct{ t *testing.T }

func (r refusing) Process(_ context.Context, cmd redis.Cmder) error {
	r.t.Errorf("command sent: %v", cmd.Args())
	return errors.New("refusing")
}

func TestOnly(t *testing.T) {
	ctx := t.Context()
	reports := lock.New[string]("report", time.Minute)
	shops := lock.NewRW[string]("catalog", time.Minute)
	sameKeys := lock.New[int]("invoice", time.Second) // another Go type, the same keys as invoices
	db := lock.NewDB(refusing{t}).Only(invoices, shops)

	tests := []struct {
		name string
		op   func() error
	}{
		{"Lock not listed", func() error { _, err := reports.TryLock(ctx, db, "x"); return err }},
		{"RWLock read not listed", func() error { _, err := catalog.TryRead(ctx, db.Only(invoices), "x"); return err }},
		{"RWLock write not listed", func() error { _, err := catalog.TryWrite(ctx, db.Only(), "x"); return err }},
		{"narrowing never widens", func() error { _, err := reports.TryLock(ctx, db.Only(reports), "x"); return err }},
		{"same namespace, other kind", func() error {
			_, err := lock.NewRW[uint64]("invoice", time.Second).TryWrite(ctx, db, 1)
			return err
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.op(); !errors.Is(err, lock.ErrNotPermitted) {
				t.Errorf("error = %v, want ErrNotPermitted", err)
			}
		})
	}
	for _, e := range []lock.Entity{invoices, shops, sameKeys, catalog} {
		if !db.Permits(e) {
			t.Errorf("Permits(%v) = false, want true", e)
		}
	}
	if db.Permits(reports) || db.Only().Permits(invoices) {
		t.Error("Permits = true for a lock not listed")
	}
}

// TestReadOnlyDoesNotCompile builds a snippet that passes a ReadOnlyDB to
// each lock operation and expects the compiler to refuse every call, and the
// same snippet with a DB, which must compile.
func TestReadOnlyDoesNotCompile(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed for this test: %v", err)
	}
	const snippet = `package lock

import (
	"context"
	"time"
)

func readOnlySnippet(ctx context.Context, db DBTYPE) {
	l := New[string]("a", time.Second)
	rw := NewRW[string]("b", time.Second)
	_, _ = l.TryLock(ctx, db, "x")
	_, _ = rw.TryRead(ctx, db, "x")
	_, _ = rw.TryWrite(ctx, db, "x")
}
`
	build := func(dbType string) (string, error) {
		dir := t.TempDir()
		src := filepath.Join(dir, "snippet.go")
		if err := os.WriteFile(src, []byte(strings.ReplaceAll(snippet, "DBTYPE", dbType)), 0o644); err != nil {
			t.Fatal(err)
		}
		here, _ := filepath.Abs("zz_snippet.go")
		overlay, _ := json.Marshal(map[string]any{"Replace": map[string]string{here: src}})
		ov := filepath.Join(dir, "overlay.json")
		if err := os.WriteFile(ov, overlay, 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := exec.CommandContext(t.Context(), gobin, "build", "-overlay", ov, "-o", os.DevNull, ".").CombinedOutput()
		return string(out), err
	}
	if out, err := build("DB"); err != nil {
		t.Fatalf("the snippet with a DB does not compile: %v\n%s", err, out)
	}
	out, err := build("ReadOnlyDB")
	if err == nil {
		t.Fatal("the snippet passing a ReadOnlyDB to lock operations compiles, want it refused")
	}
	if n := strings.Count(out, "cannot use db (variable of struct type ReadOnlyDB) as DB value"); n != 3 {
		t.Errorf("compiler refused %d of 3 calls; output:\n%s", n, out)
	}
}
