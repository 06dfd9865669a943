package lock_test

import (
	"sync/atomic"

	"github.com/wakuwaku-go/wakuwaku/lock"
)

var observedEvents atomic.Int64

// observedDb is a Db on the answering client whose observer counts events.
func observedDb() lock.Db {
	return lock.NewDb(answering{}, lock.WithObserver(func(lock.Event) { observedEvents.Add(1) }))
}
