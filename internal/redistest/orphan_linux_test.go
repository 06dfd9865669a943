package redistest

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// orphanHelperEnv makes TestOrphanedServerDies start a server and then die by SIGKILL, as a
// crashed test binary would.
const orphanHelperEnv = "REDISTEST_ORPHAN_HELPER"

func TestOrphanedServerDies(t *testing.T) {
	if os.Getenv(orphanHelperEnv) == "1" {
		s := Start(t)
		fmt.Printf("redistest-orphan-pid=%d\n", s.Pid())
		_ = os.Stdout.Sync()
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // not reached
	}

	cmd := exec.Command(os.Args[0], "-test.run=^TestOrphanedServerDies$", "-test.count=1")
	// The helper dies before its own cleanup, so its directories go in one we remove.
	cmd.Env = append(os.Environ(), orphanHelperEnv+"=1", "TMPDIR="+t.TempDir())
	out, _ := cmd.Output() // it fails: it was killed
	m := regexp.MustCompile(`redistest-orphan-pid=(\d+)`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("helper printed no server pid; output:\n%s", out)
	}
	pid, _ := strconv.Atoi(string(m[1]))
	deadline := time.Now().Add(5 * time.Second)
	for !gone(pid) {
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("redis-server %d outlived its killed test binary", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// gone reports whether the process has exited: it no longer exists, or it is a zombie waiting
// for whoever inherited it to reap it.
func gone(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	i := bytes.LastIndexByte(b, ')')
	return i >= 0 && i+2 < len(b) && (b[i+2] == 'Z' || b[i+2] == 'X')
}
