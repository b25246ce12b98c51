package proc

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/electd/electd/internal/rlimit"
)

// startError is why the command name did not start: a resource this node
// lacks for the moment (too many open files, no memory, no process slot:
// rlimit.ErrShortOfResources, not ErrCannotStart, since trying again may
// work), or ErrCannotStart.
func startError(name string, err error) error {
	if _, ok := rlimit.Errno(err); ok {
		return fmt.Errorf("%w: cannot start %q: %w", rlimit.ErrShortOfResources, name, err)
	}
	return fmt.Errorf("%w %q: %w", ErrCannotStart, name, err)
}

// cldExited is waitid's si_code for a child that exited by itself (not by a
// signal).
const cldExited = 1

// shimReportTimeout bounds how long Start waits for the shim to say whether
// the command started: a shim that hangs must not hang the agent.
const shimReportTimeout = 10 * time.Second

// Process is a started command and its process group.
type Process struct {
	cmd  *exec.Cmd
	pgid int
	shim bool
	done chan struct{}

	// sigMu keeps the group leader from being reaped while a signal is on
	// its way: until then its pid, which is also the group's id, cannot be
	// reused by another process.
	sigMu  sync.Mutex
	reaped bool

	mu       sync.Mutex
	signaled bool
	err      error // from Wait
}

// Start starts spec in a new process group. With a shim it returns once the
// shim has started the command, so a signal sent to the group at once
// reaches the command; if the command cannot start, it returns why.
func Start(spec Spec) (*Process, error) {
	if len(spec.Argv) == 0 || spec.Argv[0] == "" {
		return nil, fmt.Errorf("%w: empty command", ErrCannotStart)
	}
	name := spec.Argv[0]
	if err := checkDir(spec.Dir); err != nil {
		return nil, startError(name, err)
	}
	if spec.Umask != nil && spec.Shim == "" {
		// The umask is the whole process's: only a shim can set one for its
		// command alone.
		return nil, fmt.Errorf("%w %q: a umask needs the shim", ErrCannotStart, name)
	}
	env := append(os.Environ(), spec.Env...)
	if sp := spec.Spares.take(spec); sp != nil {
		p, err := sp.run(spec, env)
		switch {
		case err == nil:
			return p, nil
		case !errors.Is(err, errSpareGone):
			return nil, startError(name, err)
		} // else a fresh shim, as if there were no spare
	}
	var cmd *exec.Cmd
	var report, reportW *os.File
	if spec.Shim != "" {
		var err error
		if report, reportW, err = os.Pipe(); err != nil {
			return nil, startError(name, err)
		}
		defer report.Close()
		// The shim finds the command by PATH itself, as exec.Command would,
		// and starts it in spec.Dir.
		cmd = exec.Command(spec.Shim, spec.Argv...)
		cmd.Args[0] = shimTitle(spec.Name)
		cmd.Env = append(env, envShim+"=1", envShimParent+"="+strconv.Itoa(os.Getpid()), envShimDir+"="+spec.Dir, envShimAs+"="+encodeAs(spec.User, spec.Umask))
		cmd.ExtraFiles = []*os.File{reportW} // fd 3 in the shim
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	} else {
		cmd = exec.Command(name, spec.Argv[1:]...)
		cmd.Env, cmd.Dir = env, spec.Dir
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL, Credential: spec.User}
	}
	cmd.Stdout, cmd.Stderr = spec.Stdout, spec.Stderr
	// A grandchild that keeps the output pipe open must not hold up Wait.
	cmd.WaitDelay = time.Second
	err := cmd.Start()
	if reportW != nil {
		reportW.Close() // the shim holds the only write end: EOF when it is done
	}
	if err != nil {
		if spec.Shim != "" {
			err = fmt.Errorf("shim %s: %w", spec.Shim, err)
		}
		return nil, startError(name, err)
	}
	p := &Process{cmd: cmd, pgid: cmd.Process.Pid, shim: spec.Shim != "", done: make(chan struct{})}
	go p.wait()
	if report != nil {
		if err := readReport(report); err != nil {
			p.Kill()
			return nil, startError(name, err)
		}
	}
	return p, nil
}

// checkDir makes a missing or wrong Dir an error that names it: exec's own
// check is skipped when SysProcAttr is set, and the child's failed chdir then
// reads as if the program were missing.
func checkDir(dir string) error {
	if dir == "" {
		return nil
	}
	fi, err := os.Stat(dir)
	switch {
	case err != nil:
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return &os.PathError{Op: "chdir", Path: dir, Err: err}
	case !fi.IsDir():
		return &os.PathError{Op: "chdir", Path: dir, Err: syscall.ENOTDIR}
	}
	return nil
}

var errNoReport = errors.New("the shim exited before starting the command")

// readReport waits for the shim's one report: nil once the command runs in
// the group, or why it could not start.
func readReport(r *os.File) error {
	r.SetReadDeadline(time.Now().Add(shimReportTimeout))
	b, err := io.ReadAll(r)
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		return fmt.Errorf("the shim did not report within %s", shimReportTimeout)
	case err != nil:
		return fmt.Errorf("read the shim's report: %w", err)
	case len(b) == 0:
		return errNoReport
	}
	return decodeReport(string(b))
}

// wait waits for the group leader to exit without reaping it, so its pid
// (the group id) cannot be reused; kills whatever is left of the group; and
// only then reaps. Leftovers of a finished command never outlive it.
func (p *Process) wait() {
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, p.pgid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if err != unix.EINTR {
			break
		}
	}
	syscall.Kill(-p.pgid, syscall.SIGKILL)
	// SIGKILL is delivered asynchronously: Done means the group is gone,
	// not merely signalled. A shim that exited by itself has already seen
	// everything the command started gone (as their subreaper, it exits only
	// once it has no child left), so there is nothing to wait for, and no
	// need to read every process on the machine on each stop. A shim that
	// was killed, or a command started without one, may have left
	// processes in the group.
	if !p.shim || info.Code != cldExited {
		waitGroupGone(p.pgid, 5*time.Second)
	}
	p.sigMu.Lock()
	p.reaped = true
	p.sigMu.Unlock()
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
	for _, st := range scan() {
		if st.running && st.pgrp == pgid && st.pid != pgid {
			return true
		}
	}
	return false
}

// Alive reports whether process pid is running: it exists and is not a
// zombie (dead, not yet reaped by whoever inherited it).
func Alive(pid int) bool {
	st, ok := readStat(pid)
	return ok && st.running
}

// Pid is the process id of the group leader (the shim, or the command).
func (p *Process) Pid() int { return p.pgid }

// Done is closed once the command has exited and its group is gone; under
// the shim, everything the command started is gone too.
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

// Signal sends sig to the whole process group (no-op once it has exited).
// The shim passes it on to the processes that left the group.
func (p *Process) Signal(sig syscall.Signal) {
	p.sigMu.Lock()
	defer p.sigMu.Unlock()
	if p.reaped {
		return
	}
	p.mu.Lock()
	p.signaled = true
	p.mu.Unlock()
	if sig == syscall.SIGKILL && p.shim {
		// The shim cannot catch SIGKILL, and killed first it would hand the
		// processes that left its group to init. It is their subreaper: while
		// it lives, they are all found below it.
		killTree(p.pgid, time.Second)
	}
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
// and returns once the command is gone (Done). It reports whether SIGKILL was
// needed.
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

// Kill SIGKILLs the group (under the shim, everything the command started)
// and waits until the command is gone.
func (p *Process) Kill() {
	p.Signal(syscall.SIGKILL)
	<-p.done
}
