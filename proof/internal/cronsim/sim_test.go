package cronsim

import (
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"maps"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

var (
	seedFlag    = flag.Int64("sim.seed", -1, "replay this one seed, print its trace with -v, and shrink it if it fails")
	fromFlag    = flag.Int64("sim.from", 0, "the first seed of the range")
	seedsFlag   = flag.Int("sim.seeds", 0, "how many seeds to run from -sim.from (default: a handful, 100,000 with -sim.long)")
	longFlag    = flag.Bool("sim.long", false, "the long mode: 100,000 seeds unless -sim.seeds says otherwise")
	spanFlag    = flag.Duration("sim.span", defaultSpan, "how long each seed's simulated run lasts")
	allFlag     = flag.Bool("sim.all", false, "go on past the first failing seed: list every failing seed, and report the first of each invariant")
	ignoreFlag  = flag.String("sim.ignore", "", "invariants not to check, comma-separated (such as I4,I8)")
	coverFlag   = flag.Bool("sim.cover", false, "print how many seeds reached each knob, fault and protocol path (see Paths)")
	digestFlag  = flag.String("sim.digests", "", "write to this file a digest of each seed's trace (as -sim.seed -v prints it), one line a seed")
	noOpsFlag   = flag.Bool("sim.noops", false, "leave the everyday operations (graceful shutdowns, deploys, Replace in a spread window, a restart mid-run) out of the scenarios, as they were before the simulator had them")
	againstFlag = flag.String("sim.against", "", "compare each seed's trace digest with this file's, which -sim.digests wrote: a refactoring's proof that behaviour is unchanged")
)

// citedSeeds are the seeds that cron/PROTOCOL.md, RELIABILITY.md and this
// package cite, each for the failure it found once: TestSimulate runs
// them beside its range (but under -race, and with -sim.seed), so that
// what they found stays fixed.
var citedSeeds = []int64{803, 1928, 3886, 17919, 17975, 19170, 21393, 23650, 31831, 38401, 40511, 42740, 60661, 62370, 78647,
	82042, 85574, 86016, 86995, 667, 9753, 10346, 10478, 12733, 51048, 51132, 1002801, 1007772, 1008185, 1009168,
	2005375, 2007051, 3001870, 3002553, 3002861, 3002930, 3003256, 3006521, 3007384, 4001036, 6003879, 6005933,
	6008014, 6008885, 6009650, 6011226, 7008787, 8009346}

// coverSeeds is how many seeds a range with -sim.all needs for every path
// of Paths to be owed a seed that reaches it: CI's.
const coverSeeds = 500

// defaultSpan is how long a seed's simulated run lasts unless -sim.span
// says otherwise: 8 hours, which puts 500 seeds (0.2 s of CPU each) within
// a minute on two cores.
const defaultSpan = 8 * time.Hour

// shrinkBudget bounds the simulations that shrinking a failure runs.
const shrinkBudget = 400

// seedsFlagOr returns how many seeds of the range TestSimulate runs.
func seedsFlagOr() *int {
	n := seeds()
	return &n
}

// seeds returns how many seeds TestSimulate runs.
func seeds() int {
	switch {
	case *seedsFlag > 0:
		return *seedsFlag
	case *longFlag:
		return 100_000
	case raceEnabled:
		return 3 // a handful: a seed takes several times longer under -race
	}
	return 8
}

func ignored() []string {
	if *ignoreFlag == "" {
		return nil
	}
	return strings.Split(*ignoreFlag, ",")
}

// seedResult is what one seed came to.
type seedResult struct {
	index      int // in the range
	sc         *Scenario
	violations []Violation
	runs       int
	cover      []string
	digest     string // of the trace, with -sim.digests or -sim.against
}

// TestSimulate runs the seeds of the range (or the one -sim.seed names),
// each a simulated run of leased jobs on three replicas through the faults
// its seed draws, and checks the invariants after each (see the package
// documentation). A failure is reported with its seed, its index in the
// range, and its shrunk scenario and trace; -sim.seed replays it.
func TestSimulate(t *testing.T) {
	NoOps = *noOpsFlag
	// The simulation allocates much (go-redis, miniredis, and a Lua state
	// per script call with WAKUWAKU_CRONTEST_LUA=fresh): collecting
	// garbage less often saves a share of its time.
	t.Cleanup(func() { debug.SetGCPercent(debug.SetGCPercent(400)) }) // sets 400 now, restores at the end
	if *seedFlag >= 0 {
		replay(t, *seedFlag)
		return
	}
	n := seeds()
	var list []int64 // the seeds to run: the range, then the cited ones outside it
	for k := range int64(n) {
		list = append(list, *fromFlag+k)
	}
	if !raceEnabled {
		for _, s := range citedSeeds {
			if s < *fromFlag || s >= *fromFlag+int64(n) {
				list = append(list, s)
			}
		}
	}
	n = len(list)
	began := time.Now()
	results := make([]*seedResult, n)
	var next atomic.Int64
	var firstFail atomic.Int64 // the lowest failing index so far, n if none
	var done, failed atomic.Int64
	firstFail.Store(int64(n))
	t.Run("seeds", func(t *testing.T) {
		for w := range runtime.GOMAXPROCS(0) {
			t.Run(fmt.Sprint("worker-", w), func(t *testing.T) {
				t.Parallel()
				for {
					k := next.Add(1) - 1
					if k >= int64(n) || !*allFlag && k > firstFail.Load() {
						return
					}
					o := simulate(t, k, list[k])
					results[k] = o
					if len(o.violations) > 0 {
						failed.Add(1)
						failure(list[k], o.violations[0])
					}
					progress(done.Add(1), n, failed.Load(), began)
					for len(o.violations) > 0 {
						f := firstFail.Load()
						if k >= f || firstFail.CompareAndSwap(f, k) {
							break
						}
					}
				}
			})
		}
	})
	report(t, results, time.Since(began))
	digests(t, list, results)
}

// digests writes the trace digest of each seed that ran to -sim.digests'
// file, one "seed digest" line each, in the order of the range, and
// compares them with -sim.against's. A seed that drew a crowd may replay
// differently by milliseconds (see genCrowd, TestDeterministic): its
// line says so, and a difference in it is counted, not failed.
func digests(t *testing.T, list []int64, results []*seedResult) {
	if *digestFlag == "" && *againstFlag == "" {
		return
	}
	var b strings.Builder
	got := make(map[int64]string)
	crowd := make(map[int64]bool)
	for k, o := range results {
		if o == nil {
			continue
		}
		got[list[k]] = o.digest
		line := fmt.Sprintf("%d %s", list[k], o.digest)
		if o.sc.Crowd > 0 {
			crowd[list[k]] = true
			line += " crowd"
		}
		b.WriteString(line + "\n")
	}
	if *digestFlag != "" {
		if err := os.WriteFile(*digestFlag, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("cronsim: wrote the trace digests of %d seeds to %s", len(got), *digestFlag)
	}
	if *againstFlag == "" {
		return
	}
	want, err := os.ReadFile(*againstFlag)
	if err != nil {
		t.Fatal(err)
	}
	var same, differ, crowds, missing int
	for line := range strings.Lines(string(want)) {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		seed, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			t.Fatalf("%s: %q is not a seed's line", *againstFlag, line)
		}
		d, ok := got[seed]
		switch {
		case !ok:
			missing++
		case d == f[1]:
			same++
		case crowd[seed]:
			crowds++
		default:
			differ++
			t.Errorf("cronsim: seed %d's trace differs from %s's (replay it with -sim.seed=%d -v on both builds)", seed, *againstFlag, seed)
		}
	}
	t.Logf("cronsim: trace digests against %s: %d the same, %d different, %d of crowds different (not failed), %d not run here", *againstFlag, same, differ, crowds, missing)
	if same == 0 {
		t.Errorf("cronsim: no seed of %s ran here with the same trace", *againstFlag)
	}
}

// progressEvery is how many seeds a range of more than progressEvery runs
// between its progress lines.
const progressEvery = 1000

// progress prints a line to the standard error, with -v, each time
// progressEvery more seeds of a long range are done: a run of hours says
// how far it is, and what a stopped run got to.
func progress(done int64, n int, failed int64, began time.Time) {
	if !testing.Verbose() || n <= progressEvery || done%progressEvery != 0 {
		return
	}
	fmt.Fprintf(os.Stderr, "cronsim: %d of %d seeds from %d done, %d failing, after %v\n",
		done, n, *fromFlag, failed, time.Since(began).Round(time.Second))
}

// failure prints a line to the standard error, with -v, for a seed of a
// range of more than progressEvery seeds that failed, as it fails: a run
// of hours names its failing seeds before it ends.
func failure(seed int64, v Violation) {
	if !testing.Verbose() || *seedsFlagOr() <= progressEvery {
		return
	}
	fmt.Fprintf(os.Stderr, "cronsim: seed %d fails: %s (%s)\n", seed, v.Invariant, v.Rule)
}

// simulate runs the seed at index k of the range.
func simulate(t *testing.T, k, seed int64) *seedResult {
	sc := Generate(seed, *spanFlag)
	h := Simulate(t, sc)
	o := &seedResult{index: int(k), sc: sc, violations: Check(sc, h, ignored()...), runs: len(h.Runs), cover: Cover(sc, h)}
	if *digestFlag != "" || *againstFlag != "" {
		o.digest = digest(h)
	}
	return o
}

// digest returns a digest of h's trace, as -sim.seed -v prints it.
func digest(h *History) string {
	sum := sha256.Sum256([]byte(traceAll(h)))
	return hex.EncodeToString(sum[:12])
}

// report sums up the range, and reports its first failure (with -sim.all,
// the first failure of each invariant), shrunk.
func report(t *testing.T, results []*seedResult, took time.Duration) {
	var ran, runs int
	var faults [numEventKinds]int
	var failing []*seedResult
	for _, o := range results {
		if o == nil {
			continue // not run: an earlier seed failed
		}
		ran++
		runs += o.runs
		for _, e := range o.sc.Events {
			faults[e.Kind]++
		}
		if len(o.violations) > 0 {
			failing = append(failing, o)
		}
	}
	var kinds []string
	for k, c := range faults {
		kinds = append(kinds, fmt.Sprintf("%v %d", EventKind(k), c))
	}
	reached := make(map[string]int)
	for _, o := range results {
		if o != nil {
			for _, p := range o.cover {
				reached[p]++
			}
		}
	}
	var unreached []string
	for _, p := range Paths {
		if reached[p] == 0 {
			unreached = append(unreached, p)
		}
	}
	t.Logf("cronsim: %d seeds from %d and %d cited, %s each (%.0f simulated hours), %d runs; events: %s; paths reached: %d of %d; failing seeds: %d; took %v on %d workers",
		min(ran, *seedsFlagOr()), *fromFlag, max(ran-*seedsFlagOr(), 0), short(*spanFlag), float64(ran)*spanFlag.Hours(), runs, strings.Join(kinds, ", "),
		len(Paths)-len(unreached), len(Paths), len(failing), took.Round(time.Millisecond), runtime.GOMAXPROCS(0))
	if *coverFlag {
		var b strings.Builder
		extra := slices.Sorted(maps.Keys(reached))
		extra = slices.DeleteFunc(extra, func(p string) bool { return slices.Contains(Paths, p) })
		for _, p := range append(slices.Clone(Paths), extra...) {
			fmt.Fprintf(&b, "\n  %-55s %5d", p, reached[p])
		}
		t.Logf("cronsim: seeds that reached each path, of %d:%s", ran, b.String())
	}
	if *allFlag && ran >= coverSeeds && len(unreached) > 0 {
		t.Errorf("cronsim: no seed of %d reached %s: the simulator no longer drives them (see Paths)", ran, strings.Join(unreached, "; "))
	}
	if len(failing) == 0 {
		return
	}
	// The first failing seed of each invariant, by index in the range.
	type first struct {
		o *seedResult
		v Violation
		n int // failing seeds
	}
	var invs []string
	firsts := make(map[string]*first)
	for _, o := range failing {
		seen := make(map[string]bool)
		for _, v := range o.violations {
			if seen[v.Invariant] {
				continue
			}
			seen[v.Invariant] = true
			if f := firsts[v.Invariant]; f != nil {
				f.n++
				continue
			}
			firsts[v.Invariant] = &first{o: o, v: v, n: 1}
			invs = append(invs, v.Invariant)
		}
	}
	slices.Sort(invs)
	if *allFlag {
		for _, o := range failing {
			seen := make(map[string]bool)
			for _, v := range o.violations {
				if !seen[v.Invariant] {
					seen[v.Invariant] = true
					t.Logf("seed %d: %v", o.sc.Seed, v)
				}
			}
		}
		var sum []string
		for _, inv := range invs {
			f := firsts[inv]
			sum = append(sum, fmt.Sprintf("%s: %d seeds, first seed %d (the %s)", inv, f.n, f.o.sc.Seed, ordinal(f.o.index+1)))
		}
		t.Logf("cronsim: invariants broken: %s", strings.Join(sum, "; "))
	} else {
		o := failing[0]
		invs, firsts = []string{o.violations[0].Invariant}, map[string]*first{o.violations[0].Invariant: {o: o, v: o.violations[0]}}
	}
	for _, inv := range invs {
		f := firsts[inv]
		t.Errorf("seed %d, the %s of the range from %d (found after %d seeds), breaks %s (%s):\n%s",
			f.o.sc.Seed, ordinal(f.o.index+1), *fromFlag, f.o.index+1, inv, f.v.Rule, explain(t, f.o.sc, f.v))
	}
}

// replay runs one seed, logs its trace, and reports its violations,
// shrinking the first.
func replay(t *testing.T, seed int64) {
	sc := Generate(seed, *spanFlag)
	h := Simulate(t, sc)
	t.Logf("%v\n%s", sc, h.Trace("", false))
	vs := Check(sc, h, ignored()...)
	for _, v := range vs {
		t.Logf("%v", v)
	}
	if len(vs) > 0 {
		t.Errorf("seed %d breaks %s (%s):\n%s", seed, vs[0].Invariant, vs[0].Rule, explain(t, sc, vs[0]))
	}
}

// explain shrinks a failing scenario and says how to replay it, what is
// left of it, what happened to its job, and how the invariant broke.
func explain(t *testing.T, sc *Scenario, v Violation) string {
	replay := fmt.Sprintf("replay: go test -run 'TestSimulate$' ./proof/internal/cronsim/ -sim.seed=%d", sc.Seed)
	if *spanFlag != defaultSpan {
		replay += fmt.Sprintf(" -sim.span=%v", *spanFlag)
	}
	if raceEnabled {
		// Shrinking takes up to shrinkBudget simulations, each several
		// times slower under the race detector: the replay shrinks.
		return fmt.Sprintf("%s (it shrinks the failure)\n%v\n%v\n", replay, sc, v)
	}
	fails := func(c *Scenario) (Violation, bool) {
		for _, w := range Check(c, Simulate(t, c), ignored()...) {
			if w.Invariant == v.Invariant && w.Rule == v.Rule && w.Job == v.Job {
				return w, true
			}
		}
		return Violation{}, false
	}
	small, sv, runs := Shrink(sc, v, fails, shrinkBudget)
	h := Simulate(t, small)
	var b strings.Builder
	fmt.Fprintf(&b, "%s\nshrunk in %d simulations from %d events and %d plans to:\n%v\n%s%v\n",
		replay, runs, len(sc.Events), len(sc.atoms())-len(sc.Events), small, h.Trace(sv.Job, false), sv)
	return b.String()
}

// ordinal spells n as "1st", "2nd", "3rd", "4th", ...
func ordinal(n int) string {
	suffix := "th"
	if n%100 < 11 || n%100 > 13 {
		switch n % 10 {
		case 1:
			suffix = "st"
		case 2:
			suffix = "nd"
		case 3:
			suffix = "rd"
		}
	}
	return fmt.Sprint(n, suffix)
}

// TestDeterministic runs two seeds (or the range that -sim.from and
// -sim.seeds give) twice each: a seed gives the same history, to the
// nanosecond, both times.
func TestDeterministic(t *testing.T) {
	n := 2
	if *seedsFlag > 0 {
		n = *seedsFlag
	}
	crowds := 0
	defer func() {
		if crowds > 0 {
			t.Logf("%d seeds of %d drew a crowd, whose replays may differ by milliseconds (see genCrowd): not compared", crowds, n)
		}
	}()
	for seed := *fromFlag; seed < *fromFlag+int64(n); seed++ {
		sc := Generate(seed, *spanFlag)
		if sc.Crowd > 0 {
			crowds++
			continue
		}
		first := traceAll(Simulate(t, sc))
		second := traceAll(Simulate(t, sc))
		if first != second {
			a, b := strings.Split(first, "\n"), strings.Split(second, "\n")
			for i := range min(len(a), len(b)) {
				if a[i] != b[i] {
					t.Errorf("seed %d: the histories of two runs differ at line %d:\n%s\n%s", seed, i+1, a[i], b[i])
					break
				}
			}
			if len(a) != len(b) {
				t.Errorf("seed %d: the histories of two runs have %d and %d lines", seed, len(a), len(b))
			}
		}
		if strings.Count(first, "\n") < 50 {
			t.Errorf("seed %d: a history of %d lines, want a busy one", seed, strings.Count(first, "\n"))
		}
	}
}

func traceAll(h *History) string { return h.Trace("", true) }

// TestDdmin checks that delta debugging finds the two atoms of fifty that
// a failure needs, and the empty set when it needs none.
func TestDdmin(t *testing.T) {
	atoms := make([]int, 50)
	for i := range atoms {
		atoms[i] = i
	}
	var mu sync.Mutex
	calls := 0
	got := ddmin(atoms, func(as []int) bool {
		mu.Lock()
		calls++
		mu.Unlock()
		return slices.Contains(as, 17) && slices.Contains(as, 42)
	})
	if !slices.Equal(got, []int{17, 42}) {
		t.Errorf("ddmin = %v, want [17 42]", got)
	}
	if calls > 100 {
		t.Errorf("ddmin took %d tests, want at most 100", calls)
	}
	if got := ddmin(atoms, func([]int) bool { return true }); len(got) != 0 {
		t.Errorf("ddmin of a failure that needs nothing = %v, want []", got)
	}
}
