package redistest

import (
	"bytes"
	"fmt"
	"os"
	"syscall"
)

// ChildProcAttr makes the kernel kill a child process (a server, a test's own child) when the
// thread that started it dies, so a test binary that crashes or is killed leaves nothing running. (Go does not retire
// its threads unless a goroutine exits while locked to one, which this package never does.)
func ChildProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// ProcessStopped reports whether the process is in the stopped state ('T' in /proc/<pid>/stat),
// so Pause and Resume can return only once the signal has taken effect.
func ProcessStopped(pid int) (bool, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false, err
	}
	// The command name is in parentheses and may hold anything, so look after the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return false, fmt.Errorf("redistest: unexpected /proc/%d/stat: %q", pid, b)
	}
	state := b[i+2]
	return state == 'T' || state == 't', nil
}
