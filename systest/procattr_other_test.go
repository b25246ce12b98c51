//go:build !linux

package systest

import "syscall"

// groupDyingWithTest: a process group of its own. Without Linux's
// parent-death signal it outlives a test binary that is killed.
func groupDyingWithTest() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
