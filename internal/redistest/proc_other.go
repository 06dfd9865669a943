//go:build !linux

package redistest

import (
	"errors"
	"syscall"
)

// ChildProcAttr returns no attributes: only Linux can tie a child's life to its parent's.
func ChildProcAttr() *syscall.SysProcAttr { return nil }

// errNoProcState tells the caller that the process state can't be read on this platform.
var errNoProcState = errors.New("redistest: process state is not available on this platform")

// ProcessStopped can't observe the process state outside Linux.
func ProcessStopped(int) (bool, error) { return false, errNoProcState }
