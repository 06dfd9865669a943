package fault

import (
	"bytes"
	"fmt"
	"os"
	"syscall"
)

// sysProcAttr makes the kernel kill a child when the thread that started it
// dies, so that a crashed test binary leaves no children behind. (Go retires
// a thread only when a goroutine exits locked to it, which the suite never
// does.)
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// procStopped reports whether the process is stopped ('T' in
// /proc/<pid>/stat), so that Pause and Resume return once the signal took
// effect.
func procStopped(pid int) (bool, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false, err
	}
	// The command name is in parentheses and may hold anything.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return false, fmt.Errorf("fault: unexpected /proc/%d/stat: %q", pid, b)
	}
	return b[i+2] == 'T' || b[i+2] == 't', nil
}
