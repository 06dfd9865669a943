package otel

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// cronReasons returns the Reason constants of the cron package this module
// builds with, read from its source, by name: so that a reason the runtime
// adds fails this test until it has a label.
func cronReasons(t *testing.T) map[string]string {
	t.Helper()
	out, err := exec.Command("go", "list", "-f", "{{.Dir}}", "github.com/wakuwaku-go/wakuwaku/cron").Output()
	if err != nil {
		t.Fatalf("go list the cron package: %v", err)
	}
	dir := strings.TrimSpace(string(out))
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no Go files in %s: %v", dir, err)
	}
	reasons := map[string]string{}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, 0)
		if err != nil {
			t.Fatalf("parsing %s: %v", name, err)
		}
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST {
				continue
			}
			for _, spec := range g.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, n := range vs.Names {
					if !strings.HasPrefix(n.Name, "Reason") || i >= len(vs.Values) {
						continue
					}
					lit, ok := vs.Values[i].(*ast.BasicLit)
					if !ok || lit.Kind != token.STRING {
						t.Fatalf("cron.%s is not a string literal: read it some other way", n.Name)
					}
					reasons[n.Name], _ = strconv.Unquote(lit.Value)
				}
			}
		}
	}
	if len(reasons) < 9 {
		t.Fatalf("found %d Reason constants in %s, want at least the 9 this adapter knows: %v", len(reasons), dir, reasons)
	}
	return reasons
}

// TestReasonLabels checks that every reason the runtime gives has a label
// of its own, short and distinct, and that any other reason is other.
func TestReasonLabels(t *testing.T) {
	word := regexp.MustCompile(`^[a-z]+(_[a-z]+)*$`)
	seen := map[string]string{}
	for name, reason := range cronReasons(t) {
		l := reasonLabel(reason)
		switch {
		case l == reasonOther:
			t.Errorf("cron.%s (%q) has no label: add one to reasonLabels, and to the package doc (as the Prometheus adapter does)", name, reason)
		case !word.MatchString(l):
			t.Errorf("cron.%s has the label %q, want lower-case words joined by _", name, l)
		case seen[l] != "":
			t.Errorf("cron.%s and cron.%s share the label %q", name, seen[l], l)
		}
		seen[l] = name
	}
	if len(reasonLabels) != len(seen) {
		t.Errorf("reasonLabels has %d entries, the cron package %d reasons: a label for a reason that is gone?", len(reasonLabels), len(seen))
	}
	for _, own := range []string{"", "outside business hours", "lease held by another replica!"} {
		if l := reasonLabel(own); l != reasonOther {
			t.Errorf("reasonLabel(%q) = %q, want %q", own, l, reasonOther)
		}
	}
}
