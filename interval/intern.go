package interval

import (
	"runtime"
	"sync"
	"weak"
)

// specs is the cache of parsed field specs, by their text: a service that
// reads one spec per job from a database parses each text once, and its
// jobs share one policy, as jobs that share a package-level Interval do.
// It holds the specs weakly: a spec that no Interval uses any more is
// collected, and its entry removed.
var specs = specCache{m: make(map[string]weak.Pointer[cronSpec])}

type specCache struct {
	mu sync.Mutex
	m  map[string]weak.Pointer[cronSpec]
}

// lookup returns the policy of spec if a live one is cached. An "@every"
// spec's policy is a small value that compares equal by itself, and is not
// cached.
func (c *specCache) lookup(spec string) slotPolicy {
	c.mu.Lock()
	defer c.mu.Unlock()
	if w, ok := c.m[spec]; ok {
		if p := w.Value(); p != nil {
			return p
		}
	}
	return nil
}

// keep caches p, just parsed from spec, and returns the policy to use: p,
// or the one another goroutine cached first.
func (c *specCache) keep(spec string, p slotPolicy) slotPolicy {
	cs, ok := p.(*cronSpec)
	if !ok {
		return p
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if w, ok := c.m[spec]; ok {
		if q := w.Value(); q != nil {
			return q
		}
	}
	key := cs.spec // parse's copy of spec
	c.m[key] = weak.Make(cs)
	runtime.AddCleanup(cs, c.forget, key)
	return cs
}

// forget removes spec's entry once its policy was collected, unless a new
// one took its place meanwhile.
func (c *specCache) forget(spec string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if w, ok := c.m[spec]; ok && w.Value() == nil {
		delete(c.m, spec)
	}
}
