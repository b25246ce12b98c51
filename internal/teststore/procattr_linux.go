package teststore

import "syscall"

// procAttr: a store in its own process group, killed when the test that
// started it dies.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
