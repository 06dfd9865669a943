//go:build !linux

package fault

import (
	"errors"
	"syscall"
)

// sysProcAttr: children can't be tied to the test process's life here; the
// test's cleanup still kills them.
func sysProcAttr() *syscall.SysProcAttr { return nil }

// procStopped can't observe a process's state here, so Pause and Resume
// return right after sending the signal.
func procStopped(int) (bool, error) { return false, errors.New("fault: process state not observable") }
