package proc

import (
	"errors"
	"io"
	"os/exec"
	"syscall"
)

// Spec is one command to start.
type Spec struct {
	Argv []string
	Env  []string // KEY=VALUE added to the agent's environment
	Dir  string
	// Stdout and Stderr receive the command's output; nil discards it.
	Stdout, Stderr io.Writer
	// Shim is the path of an executable that calls MaybeShim first thing
	// (the electd binary; a test binary whose TestMain does). Empty starts
	// the command directly: it then gets SIGKILL when the agent dies, but
	// its own children do not, and those that leave its group outlive it.
	Shim string
	// Name is what ps shows the shim as, after "electd-shim": the job's name.
	Name string
	// Spares, when it keeps spares of Shim, gives the command a shim
	// started ahead of it (spare.go).
	Spares *Spares
	// User, when not nil, is who the command runs as (its uid, gid and
	// supplementary groups); nil runs it as the agent's user. Switching
	// needs root, or CAP_SETUID and CAP_SETGID (and CAP_KILL for the agent
	// to signal it). The shim stays the agent's user (user.go).
	User *syscall.Credential
	// Umask, when not nil, is the command's umask; it needs the shim.
	Umask *uint32
}

// ErrCannotStart is wrapped by every error from Start, together with its
// cause, so that errors.Is tells "cannot run here" from the rest:
// os.ErrNotExist for a missing program or Dir, exec.ErrNotFound for a name
// not found in PATH, os.ErrPermission for a file without the x bit or a
// directory as the program.
var ErrCannotStart = errors.New("proc: cannot start")

// ExitCode turns an error from exec's Wait into a shell-style exit code.
func ExitCode(err error) int {
	if err == nil {
		return 0
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ee.ExitCode()
	}
	return -1
}
