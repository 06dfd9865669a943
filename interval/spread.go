package interval

import (
	"fmt"
	"time"
)

// spread is a policy with calendar slots whose jobs' runs start at an
// offset into each slot, each job its own ([Interval.WithSpread]). It
// answers every question as its policy does: only [Interval.Due] differs.
type spread struct {
	slotPolicy
	max time.Duration
}

func (s spread) String() string { return s.slotPolicy.String() + ", spread " + s.max.String() }

// checkLease refuses a lease whose TTL is not longer than the spread, as
// its policy's would, and also: the lease of a slot ends ttl after the
// slot's start ([Slot.LeaseEnd]), and a job whose offset is that far into
// the slot would be due after every claim of it is over, in every slot.
// It asks the spread itself, not the job's own offset, so that whether a
// config works does not hang on the job's name.
func (s spread) checkLease(ttl time.Duration) error {
	if err := s.slotPolicy.checkLease(ttl); err != nil {
		return err
	}
	if s.max >= ttl {
		return fmt.Errorf("interval: spread %v is not shorter than the lease TTL %v: a job due that far into its slot would find its lease over", s.max, ttl)
	}
	return nil
}

// WithSpread returns i for jobs whose runs start spread over the first max
// of each slot rather than all at its start: each job at an offset of its
// own, derived from its name, so the same on every replica and in every
// slot ([Interval.Due]). Ten thousand jobs on "@hourly" with a spread of
// ten minutes start about 17 a second from :00 to :10, rather than ten
// thousand at :00, and each still runs once per slot. A run's Tick says
// when it was due, its slot's start plus the offset, and its slot, which is
// the slot's key as without spread.
//
// The spread applies to a Cron policy's slots; the startup run is not
// spread, and neither are the duration policies (AtLeast and the others),
// whose slots are their replica's own: WithSpread returns them unchanged.
// A max of 0 or less returns i without spread. WithSpread on an Interval
// with a spread replaces it. A lease taken at its ticks must be longer than
// max ([Interval.CheckLease]).
func (i Interval) WithSpread(max time.Duration) Interval {
	base := i.p
	if s, ok := base.(spread); ok {
		base = s.slotPolicy
	}
	sp, ok := base.(slotPolicy)
	if !ok {
		return i
	}
	if max <= 0 {
		i.p = sp
		return i
	}
	i.p = spread{sp, max}
	return i
}

// Due returns when the run of the job named job is due in the slot that
// starts at start: start itself, or, for an Interval [Interval.WithSpread],
// start plus the job's offset in that slot. The offset is a whole number
// of milliseconds below the spread and below the slot's length, from a
// hash of job: jobs of one name have one offset wherever they run, and
// jobs of many names spread evenly.
func (i Interval) Due(job string, start time.Time) time.Time {
	s, ok := i.p.(spread)
	if !ok {
		return start
	}
	span := s.max
	if next, ok := s.nextSlot(start); ok {
		span = min(span, next.Start.Sub(start))
	}
	ms := uint64(span / time.Millisecond)
	if ms == 0 {
		return start
	}
	return start.Add(time.Duration(hashName(job)%ms) * time.Millisecond)
}

// hashName is FNV-1a of name, mixed by a 64-bit finalizer so that names
// that differ in their last byte ("job-1", "job-2") land far apart.
func hashName(name string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(name); i++ {
		h ^= uint64(name[i])
		h *= 1099511628211
	}
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	return h
}
