//go:build !linux

package main

import "syscall"

// groupDyingWithUs: a process group of its own. Without Linux's
// parent-death signal, the child outlives a contender that is killed.
func groupDyingWithUs() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
