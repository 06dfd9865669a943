// Package redistest is the test rig every test in this module uses to talk to Redis.
//
// Start runs a real redis-server process on a free loopback port, and StartCluster runs a
// Redis Cluster of real cluster-enabled processes with every hash slot assigned. Both stop
// their processes and remove their working directories through tb.Cleanup, and the processes
// are started so that they die with the test binary even if it crashes (on Linux). Lock
// semantics are tested against these real servers, because only a real server has real
// expiry, scripting, cluster redirections and faults: Server.Pause, Server.Kill,
// Server.Restart and Cluster.MigrateSlot let a test cause those faults on purpose.
//
// A typical test:
//
//	func TestLockSurvivesPause(t *testing.T) {
//		srv := redistest.Start(t)
//		client := srv.Client(t)
//		// ... take a lock through client ...
//		srv.Pause(t) // commands now time out
//		// ... check what the holder does ...
//		srv.Resume(t)
//	}
//
// StartTLS runs a server that speaks TLS only, with certificates the rig makes for the test
// (a client certificate too), and Server.SetUser makes an ACL user, for the tests of least
// privilege and of encrypted connections. CommandStats reads what the server ran, and what it
// refused.
//
// Mini starts an embedded miniredis for quick unit tests that need no real server.
//
// The real servers need the redis-server binary on PATH. When it is missing, Start and
// StartCluster fail the test (they never skip it) with a message that says how to install it:
//
//	apt-get update && apt-get install -y redis-server
//
// Nothing in this package is safe to use outside tests: every function takes a testing.TB
// and reports failures through it.
package redistest
