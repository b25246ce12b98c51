package proc

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
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
	// its own children do not.
	Shim string
}

// Process is a started command and its process group.
type Process struct {
	cmd  *exec.Cmd
	pgid int
	done chan struct{}

	mu       sync.Mutex
	signaled bool
	err      error // from Wait
}

// Start starts spec in a new process group.
func Start(spec Spec) (*Process, error) {
	if len(spec.Argv) == 0 || spec.Argv[0] == "" {
		return nil, errors.New("proc: empty command")
	}
	var cmd *exec.Cmd
	env := append(os.Environ(), spec.Env...)
	if spec.Shim != "" {
		// The shim finds the command by PATH itself, as exec.Command would.
		cmd = exec.Command(spec.Shim, spec.Argv...)
		cmd.Env = append(env, envShim+"=1", envShimParent+"="+strconv.Itoa(os.Getpid()))
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	} else {
		cmd = exec.Command(spec.Argv[0], spec.Argv[1:]...)
		cmd.Env = env
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	}
	cmd.Dir = spec.Dir
	cmd.Stdout, cmd.Stderr = spec.Stdout, spec.Stderr
	// A grandchild that keeps the output pipe open must not hold up Wait.
	cmd.WaitDelay = time.Second
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("proc: start %q: %w", spec.Argv[0], err)
	}
	p := &Process{cmd: cmd, pgid: cmd.Process.Pid, done: make(chan struct{})}
	go p.wait()
	return p, nil
}

// wait waits for the group leader to exit without reaping it, so its pid
// (the group id) cannot be reused; kills whatever is left of the group; and
// only then reaps. Leftovers of a finished command never outlive it.
func (p *Process) wait() {
	for {
		var info unix.Siginfo
		err := unix.Waitid(unix.P_PID, p.pgid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if err != unix.EINTR {
			break
		}
	}
	syscall.Kill(-p.pgid, syscall.SIGKILL)
	// SIGKILL is delivered asynchronously: Done means the group is gone,
	// not merely signalled.
	waitGroupGone(p.pgid, 5*time.Second)
	err := p.cmd.Wait()
	p.mu.Lock()
	p.err = err
	p.mu.Unlock()
	close(p.done)
}

// waitGroupGone waits until no live process other than the (unreaped)
// leader is left in process group pgid.
func waitGroupGone(pgid int, within time.Duration) {
	deadline := time.Now().Add(within)
	for groupAlive(pgid) && time.Now().Before(deadline) {
		time.Sleep(2 * time.Millisecond)
	}
}

// groupAlive reports whether a process of group pgid, other than its
// leader, is still running (zombies do no work and do not count).
func groupAlive(pgid int) bool {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return false
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == pgid {
			continue
		}
		if running, pgrp := stat(pid); running && pgrp == pgid {
			return true
		}
	}
	return false
}

// Alive reports whether process pid is running: it exists and is not a
// zombie (dead, not yet reaped by whoever inherited it).
func Alive(pid int) bool {
	running, _ := stat(pid)
	return running
}

// stat reads /proc/PID/stat: whether the process runs (exists, not a
// zombie) and its process group.
func stat(pid int) (running bool, pgrp int) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false, 0
	}
	// pid (comm) state ppid pgrp ...; comm may hold spaces and parentheses.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return false, 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 3 || f[0] == "Z" || f[0] == "X" {
		return false, 0
	}
	pgrp, _ = strconv.Atoi(f[2])
	return true, pgrp
}

// Pid is the process id of the group leader (the shim, or the command).
func (p *Process) Pid() int { return p.pgid }

// Done is closed once the command has exited and its group is gone.
func (p *Process) Done() <-chan struct{} { return p.done }

// Err is the command's exit status: nil for exit 0, an *exec.ExitError
// otherwise. Valid once Done is closed.
func (p *Process) Err() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// ExitCode is the exit code, 128+N for a death by signal N, -1 while running.
func (p *Process) ExitCode() int {
	select {
	case <-p.done:
	default:
		return -1
	}
	return ExitCode(p.Err())
}

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

// Signal sends sig to the whole process group (no-op once it has exited).
func (p *Process) Signal(sig syscall.Signal) {
	select {
	case <-p.done:
		return
	default:
	}
	p.mu.Lock()
	p.signaled = true
	p.mu.Unlock()
	syscall.Kill(-p.pgid, sig)
}

// Signaled reports whether the agent signalled the group (a stop it asked
// for, not a failure of the command).
func (p *Process) Signaled() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.signaled
}

// Stop sends sig to the group, waits up to grace, then SIGKILLs the group,
// and returns once the command is gone. It reports whether SIGKILL was needed.
func (p *Process) Stop(sig syscall.Signal, grace time.Duration) (killed bool) {
	p.Signal(sig)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-p.done:
		return false
	case <-t.C:
	}
	p.Kill()
	return true
}

// Kill SIGKILLs the group and waits until the command is gone.
func (p *Process) Kill() {
	p.Signal(syscall.SIGKILL)
	<-p.done
}
