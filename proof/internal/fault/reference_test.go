package fault

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// porcupineModel is the lock model of kind k as a porcupine model,
// partitioned by name: the reference the suite's own search is checked
// against. Porcupine keeps a bit per operation of its partition for every
// configuration it remembers, so it is only fit for short histories.
func porcupineModel(ttl time.Duration, k LockKind) porcupine.Model {
	b := bounds{ttl: int64(ttl), slack: int64(expirySlack)}
	step := b.step(k)
	nm := porcupine.NondeterministicModel{
		Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
			byName := map[string][]porcupine.Operation{}
			var names []string
			for _, o := range history {
				n := o.Input.(Op).Name
				if _, ok := byName[n]; !ok {
					names = append(names, n)
				}
				byName[n] = append(byName[n], o)
			}
			slices.Sort(names)
			parts := make([][]porcupine.Operation, len(names))
			for i, n := range names {
				parts[i] = byName[n]
			}
			return parts
		},
		Init: func() []any { return []any{rwState{}} },
		Step: func(s, in, _ any) []any {
			var out []any
			for _, st := range step(s.(rwState), in.(Op)) {
				out = append(out, st)
			}
			return out
		},
		Equal: func(a, b any) bool { return equalState(a.(rwState), b.(rwState)) },
	}
	return nm.ToModel()
}

// referenceCheck checks h with porcupine.
func referenceCheck(h *History, ttl time.Duration, k LockKind) Result {
	ops := h.Ops()
	hist := make([]porcupine.Operation, len(ops))
	for i, o := range ops {
		hist[i] = porcupine.Operation{ClientId: int(o.Client), Input: o, Output: o.Ok, Call: o.Call, Return: ret(o)}
	}
	return Result(porcupine.CheckOperationsTimeout(porcupineModel(ttl, k), hist, time.Minute))
}

// simLock plays a lock server that runs each operation at one instant
// between its call and its return, with exact expiry, so that the history
// it produces is linearizable; mutations then make some of them not.
type simLock struct {
	ttl     int64
	w       uint64
	wEnd    int64
	readers map[uint64]int64 // hold -> end of lease
}

func (s *simLock) run(k Kind, hold uint64, at int64) bool {
	live := func(end int64) bool { return at < end }
	switch k {
	case Acquire, WriteAcquire:
		if s.w != 0 && live(s.wEnd) {
			return false
		}
		for _, end := range s.readers {
			if live(end) {
				return false
			}
		}
		s.w, s.wEnd = hold, at+s.ttl
		return true
	case Extend, Release:
		if s.w != hold || !live(s.wEnd) {
			return false
		}
		if k == Extend {
			s.wEnd = at + s.ttl
		} else {
			s.w = 0
		}
		return true
	case ReadAcquire:
		if s.w != 0 && live(s.wEnd) {
			return false
		}
		s.readers[hold] = at + s.ttl
		return true
	case ReadExtend, ReadRelease:
		end, ok := s.readers[hold]
		if !ok || !live(end) {
			delete(s.readers, hold)
			return false
		}
		if k == ReadExtend {
			s.readers[hold] = at + s.ttl
		} else {
			delete(s.readers, hold)
		}
		return true
	}
	panic("unknown kind")
}

// randomHistory returns a history of clients contending for one lock of
// kind k, each operation run by a simLock at a random instant of its
// interval; with mutate, one result is flipped. Some operations return an
// error, having taken effect or not.
func randomHistory(rng *rand.Rand, k LockKind, ttl time.Duration, clients, perClient int, unknownEvery int, mutate bool) *History {
	ms := int64(time.Millisecond)
	type plan struct {
		op   Op
		exec int64
	}
	var plans []plan
	hold := uint64(0)
	for c := range clients {
		t := rng.Int64N(20) * ms
		var mine uint64
		var mineRead bool
		for range perClient {
			t += rng.Int64N(40) * ms
			if rng.IntN(10) == 0 {
				t += int64(ttl) // let a lease lapse
			}
			d := rng.Int64N(8)*ms + rng.Int64N(ms)
			o := Op{Client: int32(c), Name: "n", Call: t, Return: t + d}
			switch {
			case mine == 0:
				hold++
				mine, o.Hold = hold, hold
				mineRead = k == RWLock && rng.IntN(2) == 0
				o.Kind = Acquire
				if k == RWLock {
					o.Kind = WriteAcquire
					if mineRead {
						o.Kind = ReadAcquire
					}
				}
			case rng.IntN(2) == 0:
				o.Hold, o.Kind = mine, Extend
				if mineRead {
					o.Kind = ReadExtend
				}
			default:
				o.Hold, o.Kind = mine, Release
				if mineRead {
					o.Kind = ReadRelease
				}
				mine = 0
			}
			plans = append(plans, plan{o, t + rng.Int64N(d+1)})
			t += d
		}
	}
	slices.SortFunc(plans, func(a, b plan) int { return int(a.exec - b.exec) })
	sim := &simLock{ttl: int64(ttl), readers: map[uint64]int64{}}
	var ops []Op
	for _, p := range plans {
		o := p.op
		if unknownEvery > 0 && rng.IntN(unknownEvery) == 0 {
			o.Err = "i/o timeout"
			if rng.IntN(2) == 0 {
				sim.run(o.Kind, o.Hold, p.exec)
			}
		} else {
			o.Ok = sim.run(o.Kind, o.Hold, p.exec)
		}
		ops = append(ops, o)
	}
	if mutate {
		i := rng.IntN(len(ops))
		if ops[i].Err == "" {
			ops[i].Ok = !ops[i].Ok
		}
	}
	h := &History{}
	h.Add(ops...)
	return h
}

// TestSearchAgreesWithPorcupine checks the suite's search against
// porcupine, on random short histories of both kinds of lock, legal ones
// and ones with a flipped result.
func TestSearchAgreesWithPorcupine(t *testing.T) {
	const ttl = 100 * time.Millisecond
	rng := rand.New(rand.NewPCG(1, uint64(time.Now().UnixNano())))
	lim := Limits{Memory: 64 << 20, Time: time.Minute}
	for _, k := range []LockKind{Lock, RWLock} {
		counts := map[string]int{}
		for i := range Pick(1500, 15000) {
			mutate := i%2 == 1
			h := randomHistory(rng, k, ttl, 2+rng.IntN(3), 2+rng.IntN(5), 15, mutate)
			want := referenceCheck(h, ttl, k)
			got := h.Linearizable(ttl, k, lim)
			counts[fmt.Sprintf("mutated %v, %s", mutate, want)]++
			if got.Result != want {
				var b strings.Builder
				for _, o := range h.Ops() {
					fmt.Fprintf(&b, "\n\t%v", o)
				}
				t.Fatalf("kind %d: search says %v, porcupine %s, on:%s", k, got, want, b.String())
			}
			if !mutate && got.Result != Ok {
				t.Fatalf("kind %d: a history the simulated server produced is %v", k, got)
			}
		}
		t.Logf("kind %d: %v", k, counts)
	}
}
