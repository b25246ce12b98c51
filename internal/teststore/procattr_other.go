//go:build !linux

package teststore

import "syscall"

// procAttr: a store in its own process group. Without Linux's parent-death
// signal, a store outlives a test binary that is killed.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
