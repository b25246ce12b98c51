package cluster

import "syscall"

// procAttr: an agent in its own process group when group is set, killed
// when the process that started it dies.
func procAttr(group bool) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: group, Pdeathsig: syscall.SIGKILL}
}
