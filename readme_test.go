package wakuwaku_test

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/format"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
)

// readmeImports are the packages README.md's Go blocks may use without
// importing them, by the name they are used under.
var readmeImports = map[string]string{
	"context":    "context",
	"errors":     "errors",
	"fmt":        "fmt",
	"http":       "net/http",
	"log":        "log",
	"slog":       "log/slog",
	"os":         "os",
	"signal":     "os/signal",
	"syscall":    "syscall",
	"time":       "time",
	"redis":      "github.com/redis/go-redis/v9",
	"wakuwaku":   "github.com/wakuwaku-go/wakuwaku",
	"cron":       "github.com/wakuwaku-go/wakuwaku/cron",
	"statuspage": "github.com/wakuwaku-go/wakuwaku/cron/statuspage",
	"crontest":   "github.com/wakuwaku-go/wakuwaku/crontest",
	"synctest":   "testing/synctest",
	"testing":    "testing",
	"interval":   "github.com/wakuwaku-go/wakuwaku/interval",
	"lock":       "github.com/wakuwaku-go/wakuwaku/lock",
}

// readmePreamble declares the identifiers that README.md's Go blocks use
// and leave to the reader: a block gets the declarations of those it uses
// and does not declare itself.
var readmePreamble = map[string]string{
	"buildReport":      "func buildReport(ctx context.Context, hour time.Time) error { return nil }",
	"writeFinalTotals": "func writeFinalTotals(invoice uint64) {}",
	"redisClient":      "var redisClient = redis.NewClient(&redis.Options{})",
	"b":                "var b = wakuwaku.NewServiceBuilder()",
	"Config":           "type Config struct{ CleanupSpec string }",
	"Cleanup": `type Cleanup struct{ every interval.Interval }

func (c *Cleanup) Interval() interval.Interval { return c.every }

func (c *Cleanup) Process(ctx context.Context, tick cron.Tick) error { return nil }`,
}

// TestReadmeStart checks the top of README.md: the two set-up commands come
// first, then how to add the module to one's own, and the license it
// points to is there.
func TestReadmeStart(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	gomod, err := os.ReadFile("go.mod")
	if err != nil {
		t.Fatal(err)
	}
	module := regexp.MustCompile(`(?m)^module (\S+)$`).FindSubmatch(gomod)
	if module == nil {
		t.Fatal("go.mod has no module line")
	}
	sh := regexp.MustCompile("(?ms)^```sh\n(.*?)^```").FindAllSubmatchIndex(readme, 2)
	if len(sh) < 2 {
		t.Fatalf("README.md has %d sh blocks, want the set-up commands and go get", len(sh))
	}
	if title := strings.TrimSpace(string(readme[:sh[0][0]])); strings.Contains(title, "\n") {
		t.Errorf("README.md starts with %q before the set-up commands, want only its title", title)
	}
	setup := strings.Split(strings.TrimSpace(string(readme[sh[0][2]:sh[0][3]])), "\n")
	if len(setup) != 2 || !strings.HasPrefix(setup[0], "go run ./examples/hourlyreport -duration 10s") || !strings.HasPrefix(setup[1], "./scripts/test") {
		t.Errorf("README.md's first commands = %q, want go run ./examples/hourlyreport -duration 10s and ./scripts/test", setup)
	}
	if got, want := strings.TrimSpace(string(readme[sh[1][2]:sh[1][3]])), "go get "+string(module[1]); got != want {
		t.Errorf("README.md's second sh block = %q, want %q", got, want)
	}
	license, err := os.ReadFile("LICENSE")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"MIT License", "Copyright (c) 2026 the wakuwaku for Go authors", "Permission is hereby granted, free of charge"} {
		if !bytes.Contains(license, []byte(want)) {
			t.Errorf("LICENSE does not say %q", want)
		}
	}
}

// TestReadmeCompiles writes every Go block of README.md into a package of
// its own in a temporary directory of this module, completing the blocks
// that are fragments (imports, the preamble's helpers, top-level statements
// wrapped in a function), and runs go vet and staticcheck on them all.
func TestReadmeCompiles(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?ms)^```go\n(.*?)^```").FindAllSubmatchIndex(readme, -1)
	if len(blocks) == 0 {
		t.Fatal("README.md has no ```go block")
	}
	// A directory whose name starts with "_" is not matched by ./..., so
	// the rest of the gate never sees it, and it is inside the module, so
	// that the blocks' imports resolve.
	dir, err := os.MkdirTemp(".", "_readme")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	var pkgs []string
	lines := map[string]int{} // package directory → line of its block in README.md
	for i, m := range blocks {
		line := 1 + bytes.Count(readme[:m[2]], []byte("\n"))
		src, err := completeSnippet(string(readme[m[2]:m[3]]))
		if err != nil {
			t.Errorf("README.md:%d: %v", line, err)
			continue
		}
		pkg := filepath.Join(dir, fmt.Sprintf("block%d", i+1))
		if err := os.Mkdir(pkg, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(pkg, "readme.go"), src, 0o644); err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, "./"+filepath.ToSlash(pkg))
		lines[filepath.ToSlash(pkg)] = line
	}
	if len(pkgs) == 0 {
		return
	}
	// One go vet and one staticcheck over every block, at once.
	var wg sync.WaitGroup
	for _, tool := range [][]string{
		{"vet"},
		{"tool", "-modfile=tools.mod", "staticcheck"},
	} {
		wg.Go(func() {
			out, err := exec.Command("go", append(tool, pkgs...)...).CombinedOutput()
			if err != nil {
				t.Errorf("go %s on README.md's Go blocks: %v\n%s", strings.Join(tool, " "), err, annotate(out, lines))
			}
		})
	}
	wg.Wait()
}

// annotate adds, to each line of a tool's output that names a block's
// package, the line of README.md the block starts at.
func annotate(out []byte, lines map[string]int) string {
	var b strings.Builder
	for _, l := range strings.SplitAfter(string(out), "\n") {
		for pkg, line := range lines {
			if strings.Contains(l, pkg+"/") || strings.HasSuffix(strings.TrimSpace(l), pkg) {
				fmt.Fprintf(&b, "[README.md:%d] ", line)
				break
			}
		}
		b.WriteString(l)
	}
	return b.String()
}

// completeSnippet makes a Go source file of one README.md block. The block
// may omit its package clause and imports, use the preamble's identifiers,
// and hold statements at top level, which go into a function.
func completeSnippet(block string) ([]byte, error) {
	var decls, stmts []string
	depth := 0
	inStmt := false
	for _, l := range strings.SplitAfter(block, "\n") {
		trimmed := strings.TrimSpace(l)
		if depth == 0 && !inStmt {
			switch {
			case strings.HasPrefix(trimmed, "import "), strings.HasPrefix(trimmed, "package "):
				continue // computed below
			case trimmed == "", strings.HasPrefix(trimmed, "//"),
				regexp.MustCompile(`^(func|type|var|const)\b`).MatchString(trimmed):
			default:
				inStmt = true
			}
		}
		depth += strings.Count(l, "{") + strings.Count(l, "(") - strings.Count(l, "}") - strings.Count(l, ")")
		if inStmt {
			stmts = append(stmts, l)
			inStmt = depth > 0
		} else {
			decls = append(decls, l)
		}
	}

	body := strings.Join(decls, "")
	if len(stmts) > 0 {
		// A variable a statement declares is the reader's to use: use it.
		init := "func init() {\n" + strings.Join(stmts, "") + "}\n"
		f, err := parseSnippet(init, nil)
		if err != nil {
			return nil, err
		}
		for _, s := range f.Decls[0].(*ast.FuncDecl).Body.List {
			if a, ok := s.(*ast.AssignStmt); ok && a.Tok == token.DEFINE {
				for _, lhs := range a.Lhs {
					if id, ok := lhs.(*ast.Ident); ok && id.Name != "_" {
						init = strings.TrimSuffix(init, "}\n") + "\t_ = " + id.Name + "\n}\n"
					}
				}
			}
		}
		body += "\n" + init
	}

	// The block's declarations are the reader's to use too; in package
	// main only main is called, so refer to every other one.
	f, err := parseSnippet(body, nil)
	if err != nil {
		return nil, err
	}
	var refs []string
	isMain := false
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			switch {
			case d.Recv != nil, d.Name.Name == "init":
			case d.Name.Name == "main":
				isMain = true
			default:
				refs = append(refs, "var _ = "+d.Name.Name)
			}
		case *ast.GenDecl:
			for _, s := range d.Specs {
				switch s := s.(type) {
				case *ast.TypeSpec:
					refs = append(refs, "var _ *"+s.Name.Name)
				case *ast.ValueSpec:
					for _, n := range s.Names {
						if n.Name != "_" {
							refs = append(refs, "var _ = "+n.Name)
						}
					}
				}
			}
		}
	}
	if len(refs) > 0 {
		body += "\n" + strings.Join(refs, "\n") + "\n"
	}

	added := map[string]bool{}
	for {
		f, err := parseSnippet(body, nil)
		if err != nil {
			return nil, err
		}
		var more []string
		for _, id := range f.Unresolved {
			if decl, ok := readmePreamble[id.Name]; ok && !added[id.Name] {
				added[id.Name] = true
				more = append(more, decl)
			}
		}
		if len(more) == 0 {
			break
		}
		slices.Sort(more)
		body += "\n// The README leaves these to the reader.\n\n" + strings.Join(more, "\n\n") + "\n"
	}

	var imports []string
	f, err = parseSnippet(body, nil)
	if err != nil {
		return nil, err
	}
	for _, id := range f.Unresolved {
		if path, ok := readmeImports[id.Name]; ok && !slices.Contains(imports, path) {
			imports = append(imports, path)
		}
	}
	slices.Sort(imports)
	name := "snippet"
	if isMain {
		name = "main"
	}
	header := "// Package " + name + " is a Go block of README.md.\npackage " + name + "\n"
	if len(imports) > 0 {
		header += "\nimport (\n\t\"" + strings.Join(imports, "\"\n\t\"") + "\"\n)\n"
	}
	src := header + "\n" + body
	if _, err := parseSnippet(src, &header); err != nil {
		return nil, err
	}
	out, err := format.Source([]byte(src))
	if err != nil {
		return nil, fmt.Errorf("%v in\n%s", err, src)
	}
	return out, nil
}

// parseSnippet parses src, as a whole file when header is not nil, and as
// the body of one otherwise.
func parseSnippet(src string, header *string) (*ast.File, error) {
	if header == nil {
		src = "package snippet\n" + src
	}
	f, err := parser.ParseFile(token.NewFileSet(), "readme.go", src, parser.ParseComments)
	if err != nil {
		return nil, fmt.Errorf("%v in\n%s", err, src)
	}
	return f, nil
}
