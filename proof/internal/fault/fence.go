package fault

import "sync"

// FencedResource is a protected resource that fences with the numbers of a
// lock.FencedLock instead of a version it keeps itself: it remembers the
// highest number that reached each name, and refuses a write that carries a
// lower one, from a holder whose lock a later holder has taken and used.
// Its methods are safe for concurrent use.
type FencedResource struct {
	mu      sync.Mutex
	highest map[string]uint64
	figures FencedFigures
}

// FencedFigures counts the writes a FencedResource received.
type FencedFigures struct {
	Accepted int64 // writes whose number was not below the highest seen
	Refused  int64 // writes whose number was below it
}

// NewFencedResource returns a resource that has seen no number.
func NewFencedResource() *FencedResource {
	return &FencedResource{highest: map[string]uint64{}}
}

// Write accepts the write of the holder numbered fence to name, and records
// the number, unless a higher number has written to name already. A holder
// may write any number of times with its own number.
func (r *FencedResource) Write(name string, fence uint64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if fence < r.highest[name] {
		r.figures.Refused++
		return false
	}
	r.highest[name] = fence
	r.figures.Accepted++
	return true
}

// Figures returns the counts so far.
func (r *FencedResource) Figures() FencedFigures {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.figures
}
