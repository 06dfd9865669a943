// Command rooms measures how a package of this module is laid out: its
// files and their lengths, the types whose methods spread over several
// files, the arrows between its files (a file uses a name that another
// declares) and how many of them run back up once the files stand on
// floors, and the path of one parameter through the package's calls.
//
//	go run ./internal/rooms ./cron                      # the package's rooms
//	go run ./internal/rooms -walk Runtime.run:a ./cron  # one parameter's path
//	go run ./internal/rooms -top                        # the module's top-level folders
//
// Test files are left out. The floors come from the file graph: each
// strongly connected set of files is laid out by a greedy order that
// keeps few arrows pointing up (Eades, Lin and Smyth's heuristic), and a
// file stands one floor above the highest file it uses along the arrows
// that point down. An arrow that runs back up is one from a file to a
// file on its floor or above.
package main

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"flag"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

func main() {
	walk := flag.String("walk", "", "follow TYPE.METHOD:PARAM or FUNC:PARAM through the package's calls")
	top := flag.Bool("top", false, "measure the module's top-level folders, by their packages' imports")
	flag.BoolVar(&why, "why", false, "name what each arrow that runs back up uses")
	flag.BoolVar(&all, "arrows", false, "list every arrow between files, with what it uses")
	flag.Parse()
	var err error
	switch {
	case *top:
		err = measureTop(os.Stdout)
	case flag.NArg() != 1:
		fmt.Fprintln(os.Stderr, "usage: rooms [-walk FUNC:PARAM] PACKAGE | rooms -top")
		os.Exit(2)
	default:
		var p *pkg
		if p, err = load(flag.Arg(0)); err == nil {
			if *walk != "" {
				err = p.walk(os.Stdout, *walk)
			} else {
				p.measure(os.Stdout)
			}
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "rooms:", err)
		os.Exit(1)
	}
}

// pkg is one type-checked package, without its tests.
type pkg struct {
	fset  *token.FileSet
	files []*ast.File
	names []string // the files' base names, in files' order
	info  *types.Info
	tpkg  *types.Package
}

// listed is what go list says of a package.
type listed struct {
	ImportPath string
	Dir        string
	GoFiles    []string
	Export     string
	Imports    []string
	Module     *struct{ Path string }
}

// goList runs go list -json with args and decodes its packages.
func goList(args ...string) ([]listed, error) {
	cmd := exec.Command("go", append([]string{"list", "-json"}, args...)...)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list: %w", err)
	}
	var ps []listed
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var p listed
		if err := dec.Decode(&p); err != nil {
			return nil, err
		}
		ps = append(ps, p)
	}
	return ps, nil
}

// load parses and type-checks the package at path, its imports read from
// the compiler's export data.
func load(path string) (*pkg, error) {
	deps, err := goList("-export", "-deps", path)
	if err != nil {
		return nil, err
	}
	if len(deps) == 0 {
		return nil, fmt.Errorf("no package %s", path)
	}
	self := deps[len(deps)-1]
	exports := make(map[string]string)
	for _, d := range deps {
		exports[d.ImportPath] = d.Export
	}
	p := &pkg{fset: token.NewFileSet()}
	for _, name := range self.GoFiles {
		f, err := parser.ParseFile(p.fset, filepath.Join(self.Dir, name), nil, parser.ParseComments)
		if err != nil {
			return nil, err
		}
		p.files = append(p.files, f)
		p.names = append(p.names, name)
	}
	imp := importer.ForCompiler(p.fset, "gc", func(path string) (io.ReadCloser, error) {
		file, ok := exports[path]
		if !ok || file == "" {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(file)
	})
	p.info = &types.Info{Defs: make(map[*ast.Ident]types.Object), Uses: make(map[*ast.Ident]types.Object), Selections: make(map[*ast.SelectorExpr]*types.Selection)}
	conf := types.Config{Importer: imp}
	if p.tpkg, err = conf.Check(self.ImportPath, p.fset, p.files, p.info); err != nil {
		return nil, err
	}
	return p, nil
}

// fileOf returns the base name of the file that declares obj, "" if
// another package does.
func (p *pkg) fileOf(obj types.Object) string {
	if obj == nil || obj.Pkg() != p.tpkg || !obj.Pos().IsValid() {
		return ""
	}
	return filepath.Base(p.fset.Position(obj.Pos()).Filename)
}

// lines returns how many lines each file has.
func (p *pkg) lines() map[string]int {
	n := make(map[string]int)
	for i, f := range p.files {
		n[p.names[i]] = p.fset.Position(f.FileEnd).Line
	}
	return n
}

// all makes measure list every arrow, with the names it uses.
var all bool

// why makes measure name the names that each arrow running back up uses.
var why bool

// arrowNames returns, for each file, the files whose package-level names
// or methods it uses, how many uses each arrow stands for, and the names
// each arrow uses.
func (p *pkg) arrowNames() (map[string]map[string]int, map[[2]string]map[string]bool) {
	out := make(map[string]map[string]int)
	used := make(map[[2]string]map[string]bool)
	for i, f := range p.files {
		from := p.names[i]
		out[from] = make(map[string]int)
		ast.Inspect(f, func(n ast.Node) bool {
			id, ok := n.(*ast.Ident)
			if !ok {
				return true
			}
			obj := p.info.Uses[id]
			if obj == nil || !declaredAtTop(obj) {
				return true
			}
			if to := p.fileOf(obj); to != "" && to != from {
				out[from][to]++
				k := [2]string{from, to}
				if used[k] == nil {
					used[k] = make(map[string]bool)
				}
				used[k][obj.Name()] = true
			}
			return true
		})
	}
	return out, used
}

// declaredAtTop reports whether obj is a package-level name, a method, or
// a field of a package-level type: what a file can use of another's.
func declaredAtTop(obj types.Object) bool {
	switch o := obj.(type) {
	case *types.Func:
		return true
	case *types.Var:
		if o.IsField() {
			return true
		}
	}
	return obj.Parent() != nil && obj.Parent() == obj.Pkg().Scope()
}

// floors lays the files out on floors, and returns each file's floor
// (1 is the ground) and the arrows that run back up.
func floors(files []string, arrows map[string]map[string]int) (map[string]int, [][2]string) {
	order := feedbackOrder(files, arrows) // users before what they use
	pos := make(map[string]int)
	for i, f := range order {
		pos[f] = i
	}
	var up [][2]string
	floor := make(map[string]int)
	for i := len(order) - 1; i >= 0; i-- {
		f := order[i]
		floor[f] = 1
		for to := range arrows[f] {
			if pos[to] > i {
				floor[f] = max(floor[f], floor[to]+1)
			}
		}
	}
	for _, f := range order {
		for to := range arrows[f] {
			if pos[to] <= pos[f] || floor[to] >= floor[f] {
				up = append(up, [2]string{f, to})
			}
		}
	}
	slices.SortFunc(up, func(a, b [2]string) int { return cmp.Or(cmp.Compare(a[0], b[0]), cmp.Compare(a[1], b[1])) })
	return floor, up
}

// feedbackOrder orders the files so that few arrows point from a file to
// one before it: Eades, Lin and Smyth's greedy heuristic, which takes
// sinks to the end, sources to the front, and otherwise the file with the
// most arrows out less arrows in. Ties go by name, so the order is stable.
func feedbackOrder(files []string, arrows map[string]map[string]int) []string {
	left := make(map[string]bool)
	for _, f := range files {
		left[f] = true
	}
	in := func(f string) int {
		n := 0
		for g := range left {
			if _, ok := arrows[g][f]; ok && g != f {
				n++
			}
		}
		return n
	}
	out := func(f string) int {
		n := 0
		for g := range arrows[f] {
			if left[g] && g != f {
				n++
			}
		}
		return n
	}
	var front, back []string
	for len(left) > 0 {
		names := slices.Sorted(maps.Keys(left))
		moved := false
		for _, f := range names {
			if out(f) == 0 {
				back = append(back, f)
				delete(left, f)
				moved = true
			}
		}
		for _, f := range slices.Sorted(maps.Keys(left)) {
			if in(f) == 0 {
				front = append(front, f)
				delete(left, f)
				moved = true
			}
		}
		if moved || len(left) == 0 {
			continue
		}
		best, score := "", 0
		for _, f := range slices.Sorted(maps.Keys(left)) {
			if s := out(f) - in(f); best == "" || s > score {
				best, score = f, s
			}
		}
		front = append(front, best)
		delete(left, best)
	}
	slices.Reverse(back)
	return append(front, back...)
}

// measure prints the package's rooms.
func (p *pkg) measure(w io.Writer) {
	lines := p.lines()
	arrows, used := p.arrowNames()
	floor, up := floors(p.names, arrows)
	total, arrowCount, over := 0, 0, 0
	for _, n := range lines {
		total += n
		if n > 450 {
			over++
		}
	}
	for _, to := range arrows {
		arrowCount += len(to)
	}
	top := 0
	for _, f := range floor {
		top = max(top, f)
	}
	fmt.Fprintf(w, "%s: %d files, %d lines without tests; %d files over 450 lines; %d floors, %d arrows, %d of them run back up\n",
		p.tpkg.Path(), len(p.names), total, over, top, arrowCount, len(up))
	fmt.Fprintln(w, "\nfloors, from the top:")
	byFloor := slices.Clone(p.names)
	sort.SliceStable(byFloor, func(i, j int) bool {
		a, b := byFloor[i], byFloor[j]
		return floor[a] > floor[b] || floor[a] == floor[b] && a < b
	})
	for _, f := range byFloor {
		fmt.Fprintf(w, "  %2d  %-22s %5d lines\n", floor[f], f, lines[f])
	}
	fmt.Fprintln(w, "\narrows that run back up (from a file to one on its floor or above):")
	for _, a := range up {
		fmt.Fprintf(w, "  %s -> %s (%d uses)\n", a[0], a[1], arrows[a[0]][a[1]])
		if why {
			fmt.Fprintf(w, "      %s\n", strings.Join(slices.Sorted(maps.Keys(used[a])), " "))
		}
	}
	if all {
		fmt.Fprintln(w, "\nevery arrow, with the names it uses:")
		for _, from := range slices.Sorted(maps.Keys(arrows)) {
			for _, to := range slices.Sorted(maps.Keys(arrows[from])) {
				k := [2]string{from, to}
				fmt.Fprintf(w, "  %s -> %s: %s\n", from, to, strings.Join(slices.Sorted(maps.Keys(used[k])), " "))
			}
		}
	}
	fmt.Fprintln(w, "\ntypes with methods, by how many (and in how many files):")
	type spread struct {
		name           string
		methods, files int
	}
	var ts []spread
	scope := p.tpkg.Scope()
	for _, name := range scope.Names() {
		tn, ok := scope.Lookup(name).(*types.TypeName)
		if !ok {
			continue
		}
		named, ok := tn.Type().(*types.Named)
		if !ok || named.NumMethods() == 0 {
			continue
		}
		in := make(map[string]bool)
		for i := range named.NumMethods() {
			in[p.fileOf(named.Method(i))] = true
		}
		ts = append(ts, spread{name, named.NumMethods(), len(in)})
	}
	slices.SortStableFunc(ts, func(a, b spread) int { return cmp.Compare(b.methods, a.methods) })
	for _, t := range ts {
		if t.methods < 3 {
			break
		}
		fmt.Fprintf(w, "  %-22s %3d methods in %2d files\n", t.name, t.methods, t.files)
	}
}

// stop is one function on a parameter's path, with the parameter's name
// there and how deep in the calls it is.
type stop struct {
	fn    *types.Func
	param string
	depth int
}

// path returns the path of a parameter through the package's calls: from
// the function where, each call that passes the parameter (or an
// expression of it) on, depth first, each function once.
func (p *pkg) path(where string) ([]stop, error) {
	fn, param, ok := strings.Cut(where, ":")
	if !ok {
		return nil, fmt.Errorf("-walk %q: want FUNC:PARAM or TYPE.METHOD:PARAM", where)
	}
	decls := make(map[*types.Func]*ast.FuncDecl)
	var start *types.Func
	for _, f := range p.files {
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			obj, _ := p.info.Defs[fd.Name].(*types.Func)
			if obj == nil {
				continue
			}
			decls[obj] = fd
			if funcName(obj) == fn {
				start = obj
			}
		}
	}
	if start == nil {
		return nil, fmt.Errorf("-walk: no function %s in %s", fn, p.tpkg.Path())
	}
	seen := make(map[*types.Func]bool)
	var stops []stop
	var visit func(f *types.Func, param string, depth int)
	visit = func(f *types.Func, param string, depth int) {
		if seen[f] {
			return
		}
		seen[f] = true
		stops = append(stops, stop{f, param, depth})
		fd := decls[f]
		var pobj types.Object
		for _, fl := range append(fieldsOf(fd.Recv), fieldsOf(fd.Type.Params)...) {
			for _, n := range fl.Names {
				if n.Name == param {
					pobj = p.info.Defs[n]
				}
			}
		}
		if pobj == nil {
			return
		}
		ast.Inspect(fd.Body, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			callee := p.callee(call)
			if callee == nil || decls[callee] == nil {
				return true
			}
			cd := decls[callee]
			params := fieldNames(cd.Type.Params)
			if sel, ok := call.Fun.(*ast.SelectorExpr); ok && cd.Recv != nil && p.mentions(sel.X, pobj) {
				if names := fieldNames(cd.Recv); len(names) == 1 {
					visit(callee, names[0], depth+1)
				}
			}
			for i, arg := range call.Args {
				if i < len(params) && p.mentions(arg, pobj) {
					visit(callee, params[i], depth+1)
				}
			}
			return true
		})
	}
	visit(start, param, 0)
	return stops, nil
}

// entries returns how many times the path enters each file: a file
// counts again each time the path comes back to it from another.
func (p *pkg) entries(stops []stop) map[string]int {
	entries := make(map[string]int)
	last := ""
	for _, s := range stops {
		if file := p.fileOf(s.fn); file != last {
			entries[file]++
			last = file
		}
	}
	return entries
}

// walk prints the path of a parameter (see path), with the files it
// enters.
func (p *pkg) walk(w io.Writer, where string) error {
	stops, err := p.path(where)
	if err != nil {
		return err
	}
	entries := p.entries(stops)
	files := make(map[string]bool)
	for _, s := range stops {
		file := p.fileOf(s.fn)
		files[file] = true
		fmt.Fprintf(w, "%s%s(%s)  %s\n", strings.Repeat("  ", s.depth), funcName(s.fn), s.param, file)
	}
	fmt.Fprintf(w, "\n%d stops in %d files; entered:", len(stops), len(files))
	for _, f := range slices.Sorted(maps.Keys(entries)) {
		fmt.Fprintf(w, " %s %d,", f, entries[f])
	}
	fmt.Fprintln(w)
	return nil
}

// callee returns the function or method of the package that call calls,
// nil for a call of anything else.
func (p *pkg) callee(call *ast.CallExpr) *types.Func {
	var id *ast.Ident
	switch f := ast.Unparen(call.Fun).(type) {
	case *ast.Ident:
		id = f
	case *ast.SelectorExpr:
		id = f.Sel
	default:
		return nil
	}
	fn, _ := p.info.Uses[id].(*types.Func)
	if fn == nil || fn.Pkg() != p.tpkg {
		return nil
	}
	return fn.Origin()
}

// mentions reports whether expr uses obj.
func (p *pkg) mentions(expr ast.Expr, obj types.Object) bool {
	found := false
	ast.Inspect(expr, func(n ast.Node) bool {
		if id, ok := n.(*ast.Ident); ok && p.info.Uses[id] == obj {
			found = true
		}
		return !found
	})
	return found
}

func fieldsOf(fl *ast.FieldList) []*ast.Field {
	if fl == nil {
		return nil
	}
	return fl.List
}

// fieldNames returns the names of a parameter list, one a parameter ("_"
// for an unnamed one).
func fieldNames(fl *ast.FieldList) []string {
	var names []string
	for _, f := range fieldsOf(fl) {
		if len(f.Names) == 0 {
			names = append(names, "_")
		}
		for _, n := range f.Names {
			names = append(names, n.Name)
		}
	}
	return names
}

// funcName is Type.Method for a method, the name for a function.
func funcName(f *types.Func) string {
	sig := f.Type().(*types.Signature)
	if r := sig.Recv(); r != nil {
		t := r.Type()
		if ptr, ok := t.(*types.Pointer); ok {
			t = ptr.Elem()
		}
		if named, ok := t.(*types.Named); ok {
			return named.Obj().Name() + "." + f.Name()
		}
	}
	return f.Name()
}

// measureTop prints the module's top-level folders as rooms: an arrow
// from one folder to another for each import between their packages
// (tests left out), laid out on floors as a package's files are.
func measureTop(w io.Writer) error {
	ps, err := goList("./...")
	if err != nil {
		return err
	}
	root, err := moduleRoot()
	if err != nil {
		return err
	}
	module := ""
	folderOf := make(map[string]string) // import path → top-level folder
	for _, p := range ps {
		if p.Module != nil {
			module = p.Module.Path
		}
		rel, err := filepath.Rel(root, p.Dir)
		if err != nil {
			return err
		}
		top, _, _ := strings.Cut(filepath.ToSlash(rel), "/")
		if top == "." {
			top = "(root)"
		}
		folderOf[p.ImportPath] = top
	}
	arrows := make(map[string]map[string]int)
	var folders []string
	for _, p := range ps {
		from := folderOf[p.ImportPath]
		if arrows[from] == nil {
			arrows[from] = make(map[string]int)
			folders = append(folders, from)
		}
		for _, imp := range p.Imports {
			if to, ok := folderOf[imp]; ok && to != from {
				arrows[from][to]++
			}
		}
	}
	slices.Sort(folders)
	floor, up := floors(folders, arrows)
	n := 0
	for _, to := range arrows {
		n += len(to)
	}
	fmt.Fprintf(w, "%s: %d top-level folders with packages, %d arrows, %d of them run back up\n", module, len(folders), n, len(up))
	sort.SliceStable(folders, func(i, j int) bool { return floor[folders[i]] > floor[folders[j]] })
	for _, f := range folders {
		fmt.Fprintf(w, "  %2d  %s\n", floor[f], f)
	}
	for _, a := range up {
		fmt.Fprintf(w, "  back up: %s -> %s (%d imports)\n", a[0], a[1], arrows[a[0]][a[1]])
	}
	return nil
}

// moduleRoot returns the main module's directory.
func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", err
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Scan()
	return filepath.Dir(strings.TrimSpace(sc.Text())), nil
}
