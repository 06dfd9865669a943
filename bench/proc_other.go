//go:build !linux

package bench

import "syscall"

func dieWithParent() *syscall.SysProcAttr { return nil }
