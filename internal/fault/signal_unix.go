//go:build unix

package fault

import "syscall"

// Pause and Resume use job-control signals, which only Unix has.
var (
	sigStop = syscall.SIGSTOP
	sigCont = syscall.SIGCONT
)
