//go:build !linux

package cluster

import "syscall"

// procAttr: an agent in its own process group when group is set. Without
// Linux's parent-death signal, an agent outlives a harness that is killed.
func procAttr(group bool) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: group}
}
