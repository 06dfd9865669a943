//go:build !linux

package redistest

import (
	"errors"
	"syscall"
)

// sysProcAttr returns no attributes: only Linux can tie a child's life to its parent's.
func sysProcAttr() *syscall.SysProcAttr { return nil }

// errNoProcState tells the caller that the process state can't be read on this platform.
var errNoProcState = errors.New("redistest: process state is not available on this platform")

// procStopped can't observe the process state outside Linux.
func procStopped(int) (bool, error) { return false, errNoProcState }
