package systest

import "syscall"

// groupDyingWithTest: a process group of its own, SIGKILLed when the test
// binary dies.
func groupDyingWithTest() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
