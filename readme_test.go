package wakuwaku_test

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/format"
	"go/parser"
	"go/token"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"unicode"
	"unicode/utf8"
)

// readmeImports are the packages the Go blocks of README.md and docs/*.md
// may use without importing them, by the name they are used under. A block
// that uses a contrib module's package (wprom, wotel) is compiled in that
// module.
var readmeImports = map[string]string{
	"context":    "context",
	"errors":     "errors",
	"fmt":        "fmt",
	"http":       "net/http",
	"log":        "log",
	"slog":       "log/slog",
	"sql":        "database/sql",
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
	"wprom":      "github.com/wakuwaku-go/wakuwaku/contrib/prometheus",
	"prometheus": "github.com/prometheus/client_golang/prometheus",
	"wotel":      "github.com/wakuwaku-go/wakuwaku/contrib/otel",
}

// readmePreamble declares the identifiers that the Go blocks use and leave
// to the reader: a block gets the declarations of those it uses and does
// not declare itself.
var readmePreamble = map[string]string{
	"buildReport":      "func buildReport(ctx context.Context, hour time.Time) error { return nil }",
	"writeFinalTotals": "func writeFinalTotals(invoice uint64) {}",
	"redisClient":      "var redisClient = redis.NewClient(&redis.Options{})",
	"b":                "var b = wakuwaku.NewServiceBuilder()",
	"Config":           "type Config struct{ CleanupSpec string }",
	"jobs":             "var jobs []cron.Job",
	"mine":             "var mine cron.Observer",
	"Cleanup": `type Cleanup struct{ every interval.Interval }

func (c *Cleanup) Interval() interval.Interval { return c.every }

func (c *Cleanup) Process(ctx context.Context, tick cron.Tick) error { return nil }`,
}

// docFiles are the Markdown files whose Go blocks the tests compile:
// README.md, then the manual's pages in docs/.
func docFiles(t *testing.T) []string {
	t.Helper()
	pages, err := filepath.Glob("docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	if len(pages) == 0 {
		t.Fatal("docs/ has no .md page")
	}
	return append([]string{"README.md"}, pages...)
}

// fence matches a fenced block of Markdown: its language, then its text.
var fence = regexp.MustCompile("(?ms)^```([a-z]*)\n(.*?)^```")

// goBlock is a Go block of a Markdown file.
type goBlock struct {
	file string // the Markdown file, such as docs/cron.md
	line int    // the line of its first line of code
	code string
}

// goBlocks returns the Go blocks of a Markdown file.
func goBlocks(t *testing.T, file string) []goBlock {
	t.Helper()
	text, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var blocks []goBlock
	for _, m := range fence.FindAllSubmatchIndex(text, -1) {
		if string(text[m[2]:m[3]]) == "go" {
			line := 1 + bytes.Count(text[:m[4]], []byte("\n"))
			blocks = append(blocks, goBlock{file: file, line: line, code: string(text[m[4]:m[5]])})
		}
	}
	return blocks
}

// TestReadmeStart checks the top of README.md: the two set-up commands come
// first, the install lines (the library, each contrib module, the CLI) are
// the next commands, and the license it points to is there.
func TestReadmeStart(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	gomod, err := os.ReadFile("go.mod")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^module (\S+)$`).FindSubmatch(gomod)
	if m == nil {
		t.Fatal("go.mod has no module line")
	}
	module := string(m[1])
	sh := regexp.MustCompile("(?ms)^```sh\n(.*?)^```").FindAllSubmatchIndex(readme, 2)
	if len(sh) < 2 {
		t.Fatalf("README.md has %d sh blocks, want the set-up commands and the install lines", len(sh))
	}
	if title := strings.TrimSpace(string(readme[:sh[0][0]])); strings.Contains(title, "\n") {
		t.Errorf("README.md starts with %q before the set-up commands, want only its title", title)
	}
	setup := strings.Split(strings.TrimSpace(string(readme[sh[0][2]:sh[0][3]])), "\n")
	if len(setup) != 2 || !strings.HasPrefix(setup[0], "go run ./examples/hourlyreport -duration 10s") || !strings.HasPrefix(setup[1], "./scripts/test") {
		t.Errorf("README.md's first commands = %q, want go run ./examples/hourlyreport -duration 10s and ./scripts/test", setup)
	}

	// The install lines: the library first, then every contrib module (a
	// directory of contrib/ with a go.mod), then the command-line tool.
	want := []string{"go get " + module}
	mods, err := filepath.Glob("contrib/*/go.mod")
	if err != nil {
		t.Fatal(err)
	}
	if len(mods) == 0 {
		t.Error("no contrib/*/go.mod: the install lines can't be checked against the contrib modules")
	}
	for _, mod := range mods {
		want = append(want, "go get "+module+"/"+filepath.ToSlash(filepath.Dir(mod)))
	}
	want = append(want, "go install "+module+"/cmd/wakuwaku@latest")
	var got []string
	for _, l := range strings.Split(strings.TrimSpace(string(readme[sh[1][2]:sh[1][3]])), "\n") {
		command, _, _ := strings.Cut(l, "#")
		got = append(got, strings.Join(strings.Fields(command), " "))
	}
	if len(got) == 0 || got[0] != want[0] || !slices.Equal(slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(want))) {
		t.Errorf("README.md's second sh block = %q, want %q (the library's line first)", got, want)
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

// TestDocsCompile writes every Go block of README.md and docs/*.md into a
// package of its own in a temporary directory of the module it needs (this
// one, or a contrib module for a block that uses one), completing the blocks
// that are fragments (imports, the preamble's helpers, top-level statements
// wrapped in a function), and runs go vet and staticcheck on them all. Each
// block must also be laid out as gofmt lays it out.
func TestDocsCompile(t *testing.T) {
	type module struct {
		pkgs  []string
		where map[string]string // package directory → the block's file and line
	}
	modules := map[string]*module{} // module directory → its blocks
	for _, file := range docFiles(t) {
		blocks := goBlocks(t, file)
		if file == "README.md" && len(blocks) == 0 {
			t.Error("README.md has no ```go block")
		}
		for _, b := range blocks {
			where := fmt.Sprintf("%s:%d", b.file, b.line)
			if err := checkGofmt(b.code); err != nil {
				t.Errorf("%s: %v", where, err)
			}
			src, err := completeSnippet(b.code, b.file)
			if err != nil {
				t.Errorf("%s: %v", where, err)
				continue
			}
			dir, err := moduleOf(src)
			if err != nil {
				t.Errorf("%s: %v", where, err)
				continue
			}
			mod := modules[dir]
			if mod == nil {
				mod = &module{where: map[string]string{}}
				modules[dir] = mod
			}
			// A directory whose name starts with "_" is not matched by
			// ./..., so the rest of the gate never sees it, and it is
			// inside the module, so that the blocks' imports resolve.
			tmp, err := os.MkdirTemp(dir, "_readme")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = os.RemoveAll(tmp) })
			pkg, err := filepath.Rel(dir, tmp)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(tmp, "readme.go"), src, 0o644); err != nil {
				t.Fatal(err)
			}
			pkg = "./" + filepath.ToSlash(pkg)
			mod.pkgs = append(mod.pkgs, pkg)
			mod.where[strings.TrimPrefix(pkg, "./")] = where
		}
	}
	tools, err := filepath.Abs("tools.mod")
	if err != nil {
		t.Fatal(err)
	}
	// One go vet and one staticcheck per module over its blocks, the two
	// at once, one module after the other (the machine runs other tests).
	for _, dir := range slices.Sorted(maps.Keys(modules)) {
		mod := modules[dir]
		var wg sync.WaitGroup
		for _, tool := range [][]string{
			{"vet"},
			{"tool", "-modfile=" + tools, "staticcheck"},
		} {
			wg.Go(func() {
				cmd := exec.Command("go", append(tool, mod.pkgs...)...)
				cmd.Dir = dir
				out, err := cmd.CombinedOutput()
				if err != nil {
					t.Errorf("go %s in %s on the Go blocks: %v\n%s", strings.Join(tool, " "), dir, err, annotate(out, mod.where))
				}
			})
		}
		wg.Wait()
	}
}

// moduleOf returns the directory of the module a completed block is
// compiled in: a contrib module's if it imports that module's package, this
// module's otherwise.
func moduleOf(src []byte) (string, error) {
	f, err := parseSnippet(string(src), new(string))
	if err != nil {
		return "", err
	}
	dir := "."
	for _, imp := range f.Imports {
		path := strings.Trim(imp.Path.Value, `"`)
		contrib, ok := strings.CutPrefix(path, "github.com/wakuwaku-go/wakuwaku/contrib/")
		if !ok {
			continue
		}
		name, _, _ := strings.Cut(contrib, "/")
		d := filepath.Join("contrib", name)
		if dir != "." && dir != d {
			return "", fmt.Errorf("the block uses two contrib modules, %s and %s: split it", dir, d)
		}
		dir = d
	}
	return dir, nil
}

// annotate adds, to each line of a tool's output that names a block's
// package, the Markdown file and line the block starts at.
func annotate(out []byte, where map[string]string) string {
	var b strings.Builder
	for _, l := range strings.SplitAfter(string(out), "\n") {
		for pkg, w := range where {
			if strings.Contains(l, pkg+"/") || strings.HasSuffix(strings.TrimSpace(l), pkg) {
				fmt.Fprintf(&b, "[%s] ", w)
				break
			}
		}
		b.WriteString(l)
	}
	return b.String()
}

// isFile reports whether a block is a whole Go file: its first line that is
// not blank or a comment is a package clause.
func isFile(block string) bool {
	for _, l := range strings.Split(block, "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "//") {
			continue
		}
		return strings.HasPrefix(l, "package ")
	}
	return false
}

// splitSnippet splits a block that is not a whole file into its
// declarations and its top-level statements, leaving out import lines.
func splitSnippet(block string) (decls, stmts []string) {
	depth := 0
	inStmt, inImport := false, false
	for _, l := range strings.SplitAfter(block, "\n") {
		trimmed := strings.TrimSpace(l)
		if inImport {
			inImport = trimmed != ")"
			continue
		}
		if depth == 0 && !inStmt {
			switch {
			case strings.HasPrefix(trimmed, "import ("):
				inImport = true
				continue
			case strings.HasPrefix(trimmed, "import "), strings.HasPrefix(trimmed, "package "):
				continue // computed by completeSnippet
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
	return decls, stmts
}

// checkGofmt returns an error, with gofmt's layout, if a block is not laid
// out as gofmt lays it out. A fragment's declarations and statements are
// checked apart, as gofmt would lay out each in a file.
func checkGofmt(block string) error {
	parts := []string{block}
	if !isFile(block) {
		decls, stmts := splitSnippet(block)
		parts = []string{strings.Join(decls, ""), strings.Join(stmts, "")}
	}
	for _, part := range parts {
		if strings.TrimSpace(part) == "" {
			continue
		}
		out, err := format.Source([]byte(part))
		if err != nil {
			return fmt.Errorf("gofmt: %v in\n%s", err, part)
		}
		if string(out) != part {
			return fmt.Errorf("not as gofmt lays it out; gofmt gives\n%s", out)
		}
	}
	return nil
}

// completeSnippet makes a Go source file of one block of a Markdown file.
// A whole file is taken as it is. Any other block may omit its package
// clause and imports, use the preamble's identifiers, and hold statements
// at top level, which go into a function.
func completeSnippet(block, file string) ([]byte, error) {
	if isFile(block) {
		if _, err := parseSnippet(block, new(string)); err != nil {
			return nil, err
		}
		return []byte(block), nil
	}
	decls, stmts := splitSnippet(block)

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
		body += "\n// The page leaves these to the reader.\n\n" + strings.Join(more, "\n\n") + "\n"
	}

	var imports []string
	importNames := map[string]string{} // import path → the name the block uses
	f, err = parseSnippet(body, nil)
	if err != nil {
		return nil, err
	}
	for _, id := range f.Unresolved {
		if path, ok := readmeImports[id.Name]; ok && !slices.Contains(imports, path) {
			imports = append(imports, path)
			importNames[path] = id.Name
		}
	}
	slices.Sort(imports)
	name := "snippet"
	if isMain {
		name = "main"
	}
	header := "// Package " + name + " is a Go block of " + file + ".\npackage " + name + "\n"
	if len(imports) > 0 {
		header += "\nimport (\n"
		for _, path := range imports {
			// The name a block uses may not be the package's own (wprom).
			header += "\t"
			if name := importNames[path]; name != path[strings.LastIndex(path, "/")+1:] {
				header += name + " "
			}
			header += fmt.Sprintf("%q\n", path)
		}
		header += ")\n"
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

// TestDocsLinks checks the relative links of README.md, docs/*.md,
// BENCHMARKS.md and RELIABILITY.md: each names a file or directory of the
// repository and, when it has a #fragment into a Markdown file, one of that
// file's headings, as GitHub makes anchors of them.
func TestDocsLinks(t *testing.T) {
	files := append(docFiles(t), "BENCHMARKS.md", "RELIABILITY.md")
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	anchors := map[string]map[string]string{} // Markdown file → its sections by anchor
	anchorsOf := func(file string) map[string]string {
		if a, ok := anchors[file]; ok {
			return a
		}
		a := mdSections(t, file)
		anchors[file] = a
		return a
	}
	for _, file := range files {
		text, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		// Links in code blocks are code, not links.
		for _, m := range link.FindAllSubmatch(fence.ReplaceAll(text, nil), -1) {
			target := string(m[1])
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			path, fragment, _ := strings.Cut(target, "#")
			if path == "" {
				path = file
			} else {
				path = filepath.Join(filepath.Dir(file), path)
			}
			if _, err := os.Stat(path); err != nil {
				t.Errorf("%s links to %s: %v", file, target, err)
				continue
			}
			if fragment == "" || !strings.HasSuffix(path, ".md") {
				continue
			}
			if _, ok := anchorsOf(path)[fragment]; !ok {
				t.Errorf("%s links to %s: %s has no heading with the anchor %q", file, target, path, fragment)
			}
		}
	}
}

// mdSections returns the sections of a Markdown file by the anchors GitHub
// gives their headings (numbered when a heading repeats): each section is
// its heading's line and the text after it, up to the next heading of the
// same or a higher level. Fenced blocks are left out, so a line of a code
// block that starts with # is not a heading.
func mdSections(t *testing.T, file string) map[string]string {
	t.Helper()
	text, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	type heading struct {
		level  int
		anchor string
		start  int
	}
	prose := string(fence.ReplaceAll(text, nil))
	var headings []heading
	seen := map[string]bool{}
	start := 0
	for _, l := range strings.SplitAfter(prose, "\n") {
		line := strings.TrimSuffix(l, "\n")
		if h, ok := strings.CutPrefix(strings.TrimLeft(line, "#"), " "); ok && strings.HasPrefix(line, "#") {
			slug := headingAnchor(h)
			for n := 1; seen[slug]; n++ { // GitHub numbers repeated headings
				slug = fmt.Sprintf("%s-%d", headingAnchor(h), n)
			}
			seen[slug] = true
			level := len(line) - len(strings.TrimLeft(line, "#"))
			headings = append(headings, heading{level: level, anchor: slug, start: start})
		}
		start += len(l)
	}
	sections := map[string]string{}
	for i, h := range headings {
		end := len(prose)
		for _, next := range headings[i+1:] {
			if next.level <= h.level {
				end = next.start
				break
			}
		}
		sections[h.anchor] = prose[h.start:end]
	}
	return sections
}

// readmeComparison is the anchor of README.md's comparison with the other
// ways to run a job once per slot.
const readmeComparison = "why-this-and-not-"

// figure matches a number as the README and the reports write it: digits,
// with thousands separated by commas and a decimal part after a point.
var figure = regexp.MustCompile(`\d+(?:[.,]\d+)*`)

// figures returns the numbers of a text that are figures, with their
// offsets: those not glued to a letter or another number on either side,
// which are names (robfig/cron v3, p99, a commit e5900e5) or durations
// written as code (4s).
func figures(text string) (nums []string, at []int) {
	for _, m := range figure.FindAllStringIndex(text, -1) {
		before, _ := utf8.DecodeLastRuneInString(text[:m[0]])
		after, _ := utf8.DecodeRuneInString(text[m[1]:])
		if isWordRune(before) || before == '.' || before == ',' || isWordRune(after) {
			continue
		}
		nums = append(nums, text[m[0]:m[1]])
		at = append(at, m[0])
	}
	return nums, at
}

func isWordRune(r rune) bool { return r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) }

// readmeUnits splits a section of README.md into the units a figure and
// its link must share: each cell of a table (its header row included), each
// item of a list with its continuation lines, and each other paragraph. The
// section's heading is left out.
func readmeUnits(section string) []string {
	var units []string
	var cur []string
	flush := func() {
		if len(cur) > 0 {
			units = append(units, strings.Join(cur, "\n"))
			cur = nil
		}
	}
	lines := strings.Split(section, "\n")
	for _, l := range lines[1:] {
		trimmed := strings.TrimSpace(l)
		switch {
		case trimmed == "":
			flush()
		case strings.HasPrefix(trimmed, "|"):
			flush()
			if strings.Trim(trimmed, "|-: ") == "" {
				continue // the row under the header
			}
			for _, cell := range strings.Split(strings.Trim(trimmed, "|"), "|") {
				units = append(units, strings.TrimSpace(cell))
			}
		case strings.HasPrefix(trimmed, "- "), strings.HasPrefix(trimmed, "* "), regexp.MustCompile(`^\d+\. `).MatchString(trimmed):
			flush()
			cur = append(cur, trimmed)
		default:
			cur = append(cur, trimmed)
		}
	}
	flush()
	return units
}

// mdLink matches a Markdown link: its text, then its target.
var mdLink = regexp.MustCompile(`\[([^\]]*)\]\(([^)\s]+)\)`)

// codeSpan matches a Markdown code span.
var codeSpan = regexp.MustCompile("`[^`]*`")

// TestReadmeFigures checks that every figure of README.md's comparison is
// in the report it links to, as the report writes it.
//
// The rule: the section is README.md's "Why this and not …", up to its next
// heading of level 2 or 1. It is split into units: a table cell, a list item
// (with its continuation lines), a paragraph. In each unit, code spans and
// links' targets are blanked out (code names settings, such as `Attempts: 3`
// and `WithSpread(4s)`, not measurements); every number left is a figure:
// digits with optional thousands commas and decimals (8.39, 1,257, 0.08,
// 10,000), not glued to a letter (v3, p99, e5900e5) or another number; a
// range 698 to 867 or 0.70–0.87 is two figures. A figure's source is the
// first link to a section of BENCHMARKS.md or RELIABILITY.md (a #fragment)
// that ends after it in its unit, or else the last such link before it;
// links elsewhere don't count. The figure must appear in that section (its
// heading and text up to the next heading of the same or a higher level,
// code blocks left out) as the same string, itself not glued to a letter or
// another number there: 1,257 does not match 1257, 0.08 does not match
// 10.08 or 0.085, and 8 does not match 8.39. A unit with a figure and no
// such link fails. So a figure copied from the wrong case (the burst without
// Redis where the leased case over Redis was meant) fails when the cases are
// in different sections, as they are; small counts (0, 3, 10) are found in
// almost any section, and are only as good as the link the writer chose.
func TestReadmeFigures(t *testing.T) {
	section, ok := mdSections(t, "README.md")[readmeComparison]
	if !ok {
		t.Fatalf("README.md has no section with the anchor %q", readmeComparison)
	}
	reports := map[string]map[string]string{}
	checked := 0
	for _, unit := range readmeUnits(section) {
		type source struct {
			target, file, anchor string
			end                  int
		}
		var sources []source
		masked := []byte(unit)
		blank := func(from, to int) {
			for i := from; i < to; i++ {
				masked[i] = ' '
			}
		}
		for _, m := range codeSpan.FindAllStringIndex(unit, -1) {
			blank(m[0], m[1])
		}
		for _, m := range mdLink.FindAllStringSubmatchIndex(unit, -1) {
			blank(m[4]-1, m[1]) // the target and its parentheses
			target := unit[m[4]:m[5]]
			file, anchor, _ := strings.Cut(target, "#")
			if (file == "BENCHMARKS.md" || file == "RELIABILITY.md") && anchor != "" {
				sources = append(sources, source{target: target, file: file, anchor: anchor, end: m[1]})
			}
		}
		nums, at := figures(string(masked))
		for i, num := range nums {
			checked++
			if len(sources) == 0 {
				t.Errorf("README.md's comparison gives %s in %q without a link to the BENCHMARKS.md or RELIABILITY.md section it comes from", num, unit)
				continue
			}
			src := sources[len(sources)-1]
			for _, s := range sources {
				if s.end > at[i] {
					src = s
					break
				}
			}
			if reports[src.file] == nil {
				reports[src.file] = mdSections(t, src.file)
			}
			text, ok := reports[src.file][src.anchor]
			if !ok {
				t.Errorf("README.md's comparison links %s to %s, which has no such section", num, src.target)
				continue
			}
			if found, _ := figures(text); !slices.Contains(found, num) {
				t.Errorf("README.md's comparison says %s in %q, but its source %s does not have %s", num, unit, src.target, num)
			}
		}
	}
	if checked == 0 {
		t.Error("README.md's comparison has no figure: the test would check nothing")
	}
}

// TestReadmeTable checks that the table of README.md's comparison fits a
// screen: each cell is one short sentence of 20 words at most, and holds no
// figure (the figures are in the list below the table, each with its
// source).
func TestReadmeTable(t *testing.T) {
	section, ok := mdSections(t, "README.md")[readmeComparison]
	if !ok {
		t.Fatalf("README.md has no section with the anchor %q", readmeComparison)
	}
	rows := 0
	for _, l := range strings.Split(section, "\n") {
		l = strings.TrimSpace(l)
		if !strings.HasPrefix(l, "|") || strings.Trim(l, "|-: ") == "" {
			continue
		}
		rows++
		for _, cell := range strings.Split(strings.Trim(l, "|"), "|") {
			cell = strings.TrimSpace(cell)
			if n := len(strings.Fields(cell)); n > 20 {
				t.Errorf("README.md's comparison table has a cell of %d words, want 20 at most: %q", n, cell)
			}
			if nums, _ := figures(codeSpan.ReplaceAllString(cell, "")); len(nums) > 0 {
				t.Errorf("README.md's comparison table has %q in a cell, want its figures in the list below: %q", nums, cell)
			}
		}
	}
	if rows < 2 {
		t.Errorf("README.md's comparison has %d table rows, want a header and the rows", rows)
	}
}

// headingAnchor returns the anchor GitHub gives a Markdown heading: in lower
// case, without punctuation, spaces made hyphens.
func headingAnchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-', r == '_', unicode.IsLetter(r), unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

func TestHeadingAnchor(t *testing.T) {
	for heading, want := range map[string]string{
		"What a lease can't guarantee":                          "what-a-lease-cant-guarantee",
		"Job records: one run at a time, retries, catch-up":     "job-records-one-run-at-a-time-retries-catch-up",
		"Idle: 100,000 jobs waiting":                            "idle-100000-jobs-waiting",
		"A leased run's protocol (job records)":                 "a-leased-runs-protocol-job-records",
		"Autopipelined: go-redis's AutoPipeliner as the client": "autopipelined-go-rediss-autopipeliner-as-the-client",
		"Testing a job: `crontest`":                             "testing-a-job-crontest",
		"Why this and not …":                                    "why-this-and-not-",
	} {
		if got := headingAnchor(heading); got != want {
			t.Errorf("headingAnchor(%q) = %q, want %q", heading, got, want)
		}
	}
}

// TestDocsNameTheRustCrate checks that README.md and docs/*.md name the
// Rust crate they speak of, never "the seed", which a reader can't look up.
func TestDocsNameTheRustCrate(t *testing.T) {
	seed := regexp.MustCompile(`(?i)\bthe seed\b`)
	for _, file := range docFiles(t) {
		text, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, loc := range seed.FindAllIndex(text, -1) {
			t.Errorf("%s:%d says %q: name the Rust wakuwaku crate instead", file, 1+bytes.Count(text[:loc[0]], []byte("\n")), text[loc[0]:loc[1]])
		}
	}
}

// TestTestedRedisVersions keeps the README's list of tested servers in step
// with the version matrix in RELIABILITY.md: each server the README names
// (by vendor, major and minor) has a row there, every row is named, and
// every cell of a named row passed.
func TestTestedRedisVersions(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`tested on (Redis[^;]*);`).FindSubmatch(readme)
	if m == nil {
		t.Fatal("README.md says nothing of the form \"tested on Redis …;\"")
	}
	claimed := map[string]bool{}
	vendor := ""
	for _, w := range strings.FieldsFunc(string(m[1]), func(r rune) bool { return r == ' ' || r == ',' || r == '\n' }) {
		switch {
		case w == "Redis" || w == "Valkey":
			vendor = w
		case regexp.MustCompile(`^\d+\.\d+$`).MatchString(w):
			claimed[vendor+" "+w] = true
		}
	}

	rel, err := os.ReadFile("RELIABILITY.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(rel), "\n## Redis versions\n")
	if !ok {
		t.Fatal("RELIABILITY.md has no section \"## Redis versions\"")
	}
	if i := strings.Index(section, "\n## "); i >= 0 {
		section = section[:i]
	}
	row := regexp.MustCompile(`^\| (Redis|Valkey) (\d+\.\d+)\.\d+ \|(.*)\|$`)
	matrix := map[string]bool{}
	for line := range strings.Lines(section) {
		r := row.FindStringSubmatch(strings.TrimSpace(line))
		if r == nil {
			continue
		}
		server := r[1] + " " + r[2]
		matrix[server] = true
		for _, cell := range strings.Split(r[3], "|") {
			if !strings.HasPrefix(strings.TrimSpace(cell), "ok") {
				t.Errorf("RELIABILITY.md's version matrix: %s has a cell %q, not ok", server, strings.TrimSpace(cell))
			}
		}
	}
	if len(matrix) == 0 {
		t.Fatal("RELIABILITY.md's section \"Redis versions\" has no row of the matrix")
	}
	if !maps.Equal(claimed, matrix) {
		t.Errorf("README.md says it is tested on %v, RELIABILITY.md's version matrix has rows for %v", slices.Sorted(maps.Keys(claimed)), slices.Sorted(maps.Keys(matrix)))
	}
}

// TestTestingCostFigures checks that the figures of docs/testing.md's
// "What a crontest test costs", from its first link to BENCHMARKS.md on,
// are in the BENCHMARKS.md section that link names, as it writes them: the
// cost model users size their tests by can't drift from the run that
// measured it. (The part before the link is arithmetic on the schedule.)
func TestTestingCostFigures(t *testing.T) {
	const anchor = "what-a-crontest-test-costs"
	section, ok := mdSections(t, "docs/testing.md")[anchor]
	if !ok {
		t.Fatalf("docs/testing.md has no section with the anchor %q", anchor)
	}
	link := regexp.MustCompile(`\]\(\.\./BENCHMARKS\.md#([^)]+)\)`).FindStringSubmatchIndex(section)
	if link == nil {
		t.Fatal("docs/testing.md's cost section links no BENCHMARKS.md section")
	}
	source := section[link[2]:link[3]]
	report, ok := mdSections(t, "BENCHMARKS.md")[source]
	if !ok {
		t.Fatalf("docs/testing.md's cost section links BENCHMARKS.md#%s, which has no such section", source)
	}
	text := mdLink.ReplaceAllString(section[link[0]:], "[$1]")
	text = codeSpan.ReplaceAllString(text, "")
	inReport, _ := figures(report)
	nums, _ := figures(text)
	for _, num := range nums {
		if !slices.Contains(inReport, num) {
			t.Errorf("docs/testing.md's cost section says %s, which BENCHMARKS.md#%s does not", num, source)
		}
	}
	if len(nums) < 10 {
		t.Errorf("docs/testing.md's cost section has %d figures after its link, want its cost model and table", len(nums))
	}
}
