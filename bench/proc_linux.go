package bench

import "syscall"

// dieWithParent makes a child process get SIGKILL when the process that
// started it dies, so that a crashed benchmark leaves no server behind.
func dieWithParent() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
