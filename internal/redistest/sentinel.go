package redistest

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/redis/go-redis/v9"
)

// SentinelMaster is the name under which a Sentinel started by
// StartSentinel monitors its master.
const SentinelMaster = "wakuwaku"

// Sentinel is a Redis Sentinel process (redis-server --sentinel) that
// monitors one master, so that tests can reach it through a failover
// client as a service in a Sentinel group does. It is stopped by the test's
// cleanup.
type Sentinel struct {
	*Server
}

// StartSentinel starts a Sentinel on a free loopback port that monitors
// master under the name SentinelMaster, with a quorum of one, and returns
// once the Sentinel answers and knows the master's address.
func StartSentinel(tb testing.TB, master *Server) *Sentinel {
	tb.Helper()
	dir := tb.TempDir()
	conf := filepath.Join(dir, "sentinel.conf")
	// Sentinel rewrites its configuration file, so it must be writable.
	body := fmt.Sprintf("sentinel monitor %s 127.0.0.1 %d 1\nsentinel down-after-milliseconds %s 5000\n",
		SentinelMaster, master.port, SentinelMaster)
	if err := os.WriteFile(conf, []byte(body), 0o644); err != nil {
		tb.Fatalf("redistest: %v", err)
	}
	s := &Server{
		bin: serverBinary(tb),
		dir: dir,
		// The configuration file must come first.
		args: []string{conf, "--sentinel", "--bind", "127.0.0.1", "--daemonize", "no", "--dir", dir, "--logfile", ""},
	}
	tb.Cleanup(s.stop)
	s.mu.Lock()
	err := s.start(true)
	s.mu.Unlock()
	if err != nil {
		tb.Fatalf("%v", err)
	}
	addr, err := s.adminClient().Do(tb.Context(), "SENTINEL", "get-master-addr-by-name", SentinelMaster).StringSlice()
	if err != nil || len(addr) != 2 || addr[1] != fmt.Sprint(master.port) {
		tb.Fatalf("redistest: the sentinel on %s does not know its master %s: %v, %v", s.Addr(), master.Addr(), addr, err)
	}
	return &Sentinel{Server: s}
}

// FailoverClient returns a go-redis failover client that finds the master
// through the Sentinel, closed at cleanup.
func (s *Sentinel) FailoverClient(tb testing.TB) *redis.Client {
	tb.Helper()
	c := redis.NewFailoverClient(&redis.FailoverOptions{
		MasterName:    SentinelMaster,
		SentinelAddrs: []string{s.Addr()},
	})
	tb.Cleanup(func() { c.Close() })
	return c
}
