package fault

import (
	"sync"
	"time"
)

// Resource is the protected resource of the suite: a row per name with a
// version column, which is what the lock package's documentation tells users
// to fence with. A holder reads the version when it takes the lock
// ([Resource.Enter]) and every write carries the version it read; the write
// is refused if the version moved, and bumps it otherwise.
//
// The resource also knows which hold entered last for each name, which the
// version alone doesn't tell: a write from any other hold is stale, since its
// lock was taken over by a holder that has already read the row. Only an
// Enter that arrives within its hold's lease counts (see [Resource.Enter]),
// so that the order of Enters is the order in which the lock changed hands. It counts
// stale writes refused and accepted. A stale write can only be accepted if
// the newer holder has not written yet; fencing then still keeps the row
// consistent (the newer holder's write is refused), but the lock failed to
// keep the stale holder out. Its methods are safe for concurrent use.
type Resource struct {
	mu      sync.Mutex
	rows    map[string]*row
	figures ResourceFigures
}

type row struct {
	version uint64
	latest  uint64 // the hold that entered last, in time
}

// ResourceFigures counts the writes a resource received.
type ResourceFigures struct {
	Enters int64 // holders that read a row, their Enter in time
	// EntersLate counts the Enters refused because they arrived after their
	// hold's lease deadline: the hold may have lost the lock before the
	// resource heard of it, so it can't be told the latest.
	EntersLate    int64
	Accepted      int64 // writes whose version matched
	Refused       int64 // writes whose version had moved
	StaleAccepted int64 // writes accepted from a hold that was not the last to enter
	StaleRefused  int64 // writes refused from such a hold
	// StaleLive counts the stale writes that arrived before their writer's
	// lease deadline (as the writer gave it): a holder overtaken while its
	// lease was live, which the lock must never allow.
	StaleLive int64
	// StaleAfter counts the stale writes that arrived at or after their
	// writer's lease deadline: a writer that stalled between its check and
	// its write, which only fencing can stop. Stale writes that gave no
	// deadline are in neither count.
	StaleAfter int64
	// StaleLate is the shortest time by which a stale write arrived after
	// its writer's lease deadline, among those that gave one; 0 if none did.
	StaleLate time.Duration
}

// NewResource returns an empty resource: every row starts at version 0.
func NewResource() *Resource {
	return &Resource{rows: map[string]*row{}}
}

func (r *Resource) row(name string) *row {
	w := r.rows[name]
	if w == nil {
		w = &row{}
		r.rows[name] = w
	}
	return w
}

// Enter records that hold took the lock called name, with a lease that
// lasts until deadline on the suite's clock (see [LeaseDeadline]), and
// returns the row's version, which its writes must carry, and true.
//
// An Enter that arrives at or after its deadline is refused (false) and
// counted in EntersLate: a child's Enter crosses the link, which can delay
// it past the end of the hold's lease, and by then a newer holder may have
// taken the lock and entered. Taking the late Enter would make the hold that
// lost the lock the latest, and the current holder's writes stale. A hold
// whose Enter was refused must not write. An Enter that arrives in time
// cannot come after the Enter of a holder that overtook it, unless the lock
// let that holder in before the deadline.
func (r *Resource) Enter(name string, hold uint64, deadline int64) (uint64, bool) {
	now := Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	w := r.row(name)
	if now >= deadline {
		r.figures.EntersLate++
		return 0, false
	}
	w.latest = hold
	r.figures.Enters++
	return w.version, true
}

// Write is hold's write to the row called name, made with the version it
// read. It reports whether the write was accepted, and the version to carry
// in the hold's next write: the row's new version if it was, the one given
// if it was not (a refused holder learns nothing it could overwrite with).
func (r *Resource) Write(name string, hold, version uint64) (bool, uint64) {
	return r.WriteBy(name, hold, version, 0)
}

// WriteBy is Write from a holder whose lease, by its own account, lasts until
// deadline on the suite's clock (see [WallDeadline]); 0 if it doesn't say.
// The deadline only tells the figures why a stale write was stale.
func (r *Resource) WriteBy(name string, hold, version uint64, deadline int64) (bool, uint64) {
	now := Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	w := r.row(name)
	stale := w.latest != hold
	if stale && deadline != 0 {
		if late := time.Duration(now - deadline); late < 0 {
			r.figures.StaleLive++
		} else {
			r.figures.StaleAfter++
			if r.figures.StaleAfter == 1 || late < r.figures.StaleLate {
				r.figures.StaleLate = late
			}
		}
	}
	if version != w.version {
		r.figures.Refused++
		if stale {
			r.figures.StaleRefused++
		}
		return false, version
	}
	w.version++
	r.figures.Accepted++
	if stale {
		r.figures.StaleAccepted++
	}
	return true, w.version
}

// Figures returns the counts so far.
func (r *Resource) Figures() ResourceFigures {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.figures
}
