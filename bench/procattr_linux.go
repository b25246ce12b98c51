package main

import "syscall"

// groupDyingWithUs: a process group of its own, and SIGKILL when this
// process dies.
func groupDyingWithUs() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
