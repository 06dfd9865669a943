package cron

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestListenerPanicCrashes checks that a panic in one of the leased jobs'
// own goroutines, raised while it holds the runtime's lock, crashes the
// process as a panic does, instead of leaving its deferred workEnded
// waiting for that lock for good. The panic runs in a child process.
func TestListenerPanicCrashes(t *testing.T) {
	if os.Getenv("WAKUWAKU_TEST_LISTENER_PANIC") == "1" {
		var mu sync.Mutex
		l := &leasedJobs{mu: &mu}
		mu.Lock()
		func() {
			defer l.workEnded()
			panic("a listener's bug")
		}()
		return
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestListenerPanicCrashes$", "-test.timeout=5m")
	cmd.Env = append(os.Environ(), "WAKUWAKU_TEST_LISTENER_PANIC=1")
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("the child still ran after 30 s: the panic hung it\n%s", out)
	}
	var exit *exec.ExitError
	if !errors.As(err, &exit) || !strings.Contains(string(out), "panic: a listener's bug") {
		t.Fatalf("the child ended with %v, want the panic\n%s", err, out)
	}
}
