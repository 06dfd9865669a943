package lock_test

import (
	"sync/atomic"

	"github.com/wakuwaku-go/wakuwaku/lock"
)

var observedEvents atomic.Int64

// observedDB is a DB on the answering client whose observer counts events.
func observedDB() lock.DB {
	return lock.NewDB(answering{}, lock.WithObserver(func(lock.Event) { observedEvents.Add(1) }))
}
