package main

import (
	"fmt"
	"maps"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go/types"
)

// room is one room of cron/ROOMS.md: its number, in reading order, and
// its files.
type room struct {
	n      int
	title  string
	files  []string
	mayUse string // the text of its "- may use:" item
}

var (
	roomHeading = regexp.MustCompile(`^## (\d+)\. (.+)$`)
	goFile      = regexp.MustCompile("`([a-z_]+\\.go)`")
	boundRow    = regexp.MustCompile(`^\| (.+?) \| (?:at most )?(\d+) \|$`)
)

// readRooms reads the rooms and the figures' bounds of a ROOMS.md: a
// room's files are the Go files its "- files:" item names, on that line
// and the indented lines that go on from it.
func readRooms(text string) ([]room, map[string]int) {
	var rooms []room
	bounds := make(map[string]int)
	inFiles := false
	for line := range strings.Lines(text) {
		line = strings.TrimRight(line, "\n")
		if m := roomHeading.FindStringSubmatch(line); m != nil {
			n, _ := strconv.Atoi(m[1])
			rooms = append(rooms, room{n: n, title: m[2]})
			inFiles = false
			continue
		}
		if m := boundRow.FindStringSubmatch(line); m != nil {
			b, _ := strconv.Atoi(m[2])
			bounds[m[1]] = b
			continue
		}
		if rest, ok := strings.CutPrefix(line, "- may use:"); ok && len(rooms) > 0 {
			rooms[len(rooms)-1].mayUse = strings.ToLower(rest)
		}
		switch {
		case strings.HasPrefix(line, "- files:"):
			inFiles = true
		case strings.HasPrefix(line, "  ") && inFiles:
		default:
			inFiles = false
		}
		if inFiles && len(rooms) > 0 {
			for _, m := range goFile.FindAllStringSubmatch(line, -1) {
				r := &rooms[len(rooms)-1]
				r.files = append(r.files, m[1])
			}
		}
	}
	return rooms, bounds
}

// TestCronRooms checks cron/ROOMS.md against the code: every file of the
// package is in one room, no file uses a file of a room after its own,
// and the figures keep within the bounds the page states.
func TestCronRooms(t *testing.T) {
	text, err := os.ReadFile("../../cron/ROOMS.md")
	if err != nil {
		t.Fatal(err)
	}
	p, err := load("../../cron")
	if err != nil {
		t.Fatal(err)
	}
	rooms, bounds := readRooms(string(text))
	if len(rooms) < 2 {
		t.Fatalf("ROOMS.md has %d rooms, want its sections read", len(rooms))
	}
	for _, problem := range checkRooms(p, rooms, bounds) {
		t.Error(problem)
	}

	// Each check finds the fault planted for it.
	planted := func(what string, rooms []room, bounds map[string]int, want string) {
		t.Helper()
		problems := checkRooms(p, rooms, bounds)
		if !slices.ContainsFunc(problems, func(s string) bool { return strings.Contains(s, want) }) {
			t.Errorf("%s: the check did not find it; problems: %q", what, problems)
		}
	}
	moved := slices.Clone(rooms) // runtime.go in the first room
	moved[0].files = append(slices.Clone(moved[0].files), "runtime.go")
	last := &moved[len(moved)-1]
	last.files = slices.DeleteFunc(slices.Clone(last.files), func(f string) bool { return f == "runtime.go" })
	planted("the scheduler's file moved to the first room", moved, bounds, "a room after its own")
	narrow := slices.Clone(rooms) // the replica side may use words only
	for i := range narrow {
		if narrow[i].title == "The replica side" {
			narrow[i].mayUse = "words"
		}
	}
	planted("the replica side may use words only", narrow, bounds, "does not name")
	dropped := slices.Clone(rooms)
	dropped[0].files = dropped[0].files[1:]
	planted("a file in no room", dropped, bounds, "in no room")
	tight := maps.Clone(bounds)
	tight["`Runtime`'s methods"] = 3
	tight["files that hold them"] = 1
	tight["files over 450 lines"] = -1
	planted("Runtime with at most 3 methods", rooms, tight, "Runtime has")
	planted("Runtime in one file", rooms, tight, "Runtime's methods are in")
	planted("fewer than no file over 450 lines", rooms, tight, "files over 450 lines")
	tight["stops on one run's path (`-walk Runtime.run:a`)"] = 5
	tight["times that path enters one file"] = 1
	planted("a path of 5 stops", rooms, tight, "one run's path has")
	planted("a path that enters each file once", rooms, tight, "one run's path enters")
}

// mayUse reports whether room i's "may use" item names room j, one before
// it, by its title, or says "every room before it".
func mayUse(rooms []room, i, j int) bool {
	u := rooms[i].mayUse
	return strings.Contains(u, "every room before it") || strings.Contains(u, strings.ToLower(rooms[j].title))
}

// checkRooms checks rooms and bounds against the package p, and returns
// the problems it finds.
func checkRooms(p *pkg, rooms []room, bounds map[string]int) []string {
	var problems []string
	errorf := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	roomOf := make(map[string]int)
	for i, r := range rooms {
		if r.n != i+1 {
			errorf("room %q is numbered %d, want %d", r.title, r.n, i+1)
		}
		for _, f := range r.files {
			if prev, ok := roomOf[f]; ok {
				errorf("%s is in rooms %d and %d", f, prev+1, i+1)
			}
			roomOf[f] = i
		}
	}
	for _, f := range p.names {
		if _, ok := roomOf[f]; !ok {
			errorf("%s is in no room of ROOMS.md", f)
		}
	}
	for f := range roomOf {
		if !slices.Contains(p.names, f) {
			errorf("ROOMS.md names %s, which the package does not have", f)
		}
	}
	arrows, used := p.arrowNames()
	for from, tos := range arrows {
		for to := range tos {
			rf, okf := roomOf[from]
			rt, okt := roomOf[to]
			if okf && okt && rt < rf && !mayUse(rooms, rf, rt) {
				errorf("%s (room %d) uses %s (room %d), which its \"may use\" does not name", from, rf+1, to, rt+1)
			}
			if okf && okt && rt > rf {
				names := slices.Sorted(func(yield func(string) bool) {
					for n := range used[[2]string{from, to}] {
						if !yield(n) {
							return
						}
					}
				})
				errorf("%s (room %d) uses %s (room %d), a room after its own: %s", from, rf+1, to, rt+1, strings.Join(names, " "))
			}
		}
	}
	want := func(figure string) int {
		b, ok := bounds[figure]
		if !ok {
			errorf("ROOMS.md states no bound for %q", figure)
			return 1 << 30
		}
		return b
	}
	var over []string
	for f, n := range p.lines() {
		if n > 450 {
			over = append(over, fmt.Sprintf("%s (%d)", f, n))
		}
	}
	if b := want("files over 450 lines"); len(over) > b {
		errorf("%d files over 450 lines %v, want at most %d", len(over), over, b)
	}
	_, up := floors(p.names, arrows)
	if b := want("arrows that run back up"); len(up) > b {
		errorf("%d arrows run back up (%v), want at most %d", len(up), up, b)
	}
	named := p.tpkg.Scope().Lookup("Runtime").Type().(*types.Named)
	in := make(map[string]bool)
	for i := range named.NumMethods() {
		in[p.fileOf(named.Method(i))] = true
	}
	if b := want("`Runtime`'s methods"); named.NumMethods() > b {
		errorf("Runtime has %d methods, want at most %d", named.NumMethods(), b)
	}
	if b := want("files that hold them"); len(in) > b {
		errorf("Runtime's methods are in %d files, want at most %d", len(in), b)
	}
	stops, err := p.path("Runtime.run:a")
	if err != nil {
		errorf("%v", err)
		return problems
	}
	if b := want("stops on one run's path (`-walk Runtime.run:a`)"); len(stops) > b {
		errorf("one run's path has %d stops, want at most %d", len(stops), b)
	}
	most := want("times that path enters one file")
	for f, n := range p.entries(stops) {
		if n > most {
			errorf("one run's path enters %s %d times, want at most %d", f, n, most)
		}
	}
	return problems
}
