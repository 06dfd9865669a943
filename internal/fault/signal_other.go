//go:build !unix

package fault

import "syscall"

// Without job-control signals Pause and Resume fail: os.Process.Signal refuses these values.
var (
	sigStop = syscall.Signal(-1)
	sigCont = syscall.Signal(-1)
)
