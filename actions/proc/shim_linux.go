package proc

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The environment that tells an electd binary to act as the shim.
const (
	envShim       = "ELECTD_SHIM"
	envShimParent = "ELECTD_SHIM_PARENT"
	envShimDir    = "ELECTD_SHIM_DIR"
	envShimAs     = "ELECTD_SHIM_AS"    // who the command runs as (user.go)
	envShimSpare  = "ELECTD_SHIM_SPARE" // a spare: the command comes on specFd (spare.go)
)

// reportFd is where the shim tells Start whether the command started;
// specFd is where a spare reads its command.
const (
	reportFd = 3
	specFd   = 4
)

// leftoverWait is how long the shim, once the command has exited, waits
// to learn it has no child left before it looks for leftovers in /proc.
const leftoverWait = 5 * time.Millisecond

// forwarded are the signals the shim catches and passes on to the processes
// that left its group: every stop_signal but the uncatchable KILL and STOP,
// CHLD (its own children send it) and URG (the Go runtime uses it).
// Caught, none of them ends or stops the shim.
var forwarded = []os.Signal{
	syscall.SIGHUP, syscall.SIGINT, syscall.SIGQUIT, syscall.SIGILL, syscall.SIGTRAP,
	syscall.SIGABRT, syscall.SIGBUS, syscall.SIGFPE, syscall.SIGUSR1, syscall.SIGSEGV,
	syscall.SIGUSR2, syscall.SIGPIPE, syscall.SIGALRM, syscall.SIGTERM, syscall.SIGCONT,
	syscall.SIGTSTP, syscall.SIGTTIN, syscall.SIGTTOU, syscall.SIGXCPU, syscall.SIGXFSZ,
	syscall.SIGVTALRM, syscall.SIGPROF, syscall.SIGWINCH, syscall.SIGIO, syscall.SIGSYS,
}

// MaybeShim must be the first thing main (and the TestMain of a test binary
// given as Spec.Shim) calls. In an ordinary run it returns at once. When
// the process was started as a shim it runs the command in os.Args[1:] and
// exits with the command's exit code, never returning.
func MaybeShim() {
	if os.Getenv(envShim) != "1" {
		return
	}
	os.Exit(shim(os.Args[1:]))
}

// shim runs argv as a child in its own process group (the shim leads it)
// and sees that nothing the command starts outlives it:
//   - it is a child subreaper, so the command's orphans, even those that
//     left the group (setsid, setpgid), are re-parented to it, not to init;
//   - a signal from the agent reaches the group directly; the shim passes it
//     on to its descendants outside the group (found by walking the tree
//     below it, not every process on the machine);
//   - when the command exits, the shim kills every descendant left, and
//     exits only once they are gone;
//   - when the agent dies, the parent-death signal (SIGTERM) arrives and the
//     shim kills every descendant, then the group and itself.
func shim(argv []string) int {
	// Close-on-exec at once: the command must not hold the report pipe open,
	// or Start would wait for its EOF.
	syscall.CloseOnExec(reportFd)
	report := os.NewFile(reportFd, "electd-shim-report")
	parent, _ := strconv.Atoi(os.Getenv(envShimParent))
	dir := os.Getenv(envShimDir)
	spare := os.Getenv(envShimSpare) == "1"
	as := os.Getenv(envShimAs)
	for _, k := range []string{envShim, envShimParent, envShimDir, envShimSpare, envShimAs} {
		os.Unsetenv(k)
	}

	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, forwarded...)
	orphaned := func() bool { return os.Getppid() != parent }
	if orphaned() { // the agent died before the signal handler was in place
		return 1
	}
	if spare {
		// The first command Go starts checks once whether pidfds work, by
		// starting a child of its own (a fork, 0.5-1 ms): a spare does it
		// now, while it waits, rather than when its command must start.
		if p, err := os.FindProcess(os.Getpid()); err == nil {
			p.Release()
		}
		var name string
		var env []string
		var ok bool
		placeholder := ""
		if len(argv) == 1 {
			placeholder = argv[0]
		}
		if name, dir, as, argv, env, ok = waitSpec(sigs); !ok {
			return 0 // discarded, or signalled before it had a command
		}
		setTitle(placeholder, name)
		// The command's environment becomes the shim's, as it is for a
		// shim started with its command: PATH finds the program.
		os.Clearenv()
		for _, kv := range env {
			if k, v, ok := strings.Cut(kv, "="); ok {
				os.Setenv(k, v)
			}
		}
	}
	if !spare {
		setTitle("", "") // comm: its argv[0] already names the job
	}
	cmd, err := startCommand(argv, dir, as)
	if err != nil {
		fmt.Fprint(report, encodeReport(err))
		return 127
	}
	self, group := os.Getpid(), syscall.Getpgrp()
	// onSignal handles a signal from the agent. The command and everything
	// still in the group got it too, unless it came before the command
	// existed.
	onSignal := func(sig os.Signal, commandGotIt bool) {
		if orphaned() {
			// The agent died (this is its parent-death signal): nobody is left
			// to stop the work, so end it all, the shim last.
			killTree(self, 5*time.Second)
			syscall.Kill(0, syscall.SIGKILL)
			return
		}
		if !commandGotIt {
			cmd.Process.Signal(sig)
		}
		for _, st := range below(self) {
			if st.pgrp != group {
				syscall.Kill(st.pid, sig.(syscall.Signal))
			}
		}
	}
	exited, reaped := make(chan int, 1), make(chan struct{})
	go reap(cmd.Process.Pid, exited, reaped)
	// Start did not return yet, so these did not come from a stop: forward
	// them anyway (one that came in while the command was being forked may
	// reach it twice).
	for pending := true; pending; {
		select {
		case sig := <-sigs:
			onSignal(sig, false)
		default:
			pending = false
		}
	}
	fmt.Fprint(report, encodeReport(nil))
	report.Close()

	for {
		select {
		case sig := <-sigs:
			onSignal(sig, true)
		case code := <-exited:
			// What the command left behind goes with it: Done means that
			// everything it started is gone. A shim with no child left has
			// no descendant at all (the kernel re-parents a dying process's
			// children to the subreaper before its parent can reap it), so
			// in the usual case there is nothing to look for.
			select {
			case <-reaped:
				return code
			case <-time.After(leftoverWait):
			}
			killTree(self, 5*time.Second)
			select {
			case <-reaped:
				return code
			case <-time.After(5 * time.Second):
			}
			// A descendant survives SIGKILL (stuck in the kernel): the shim
			// cannot vouch that everything is gone, and says so by ending
			// with its group by a signal, not an exit code. The agent then
			// waits for the group itself (Process.wait).
			syscall.Kill(0, syscall.SIGKILL)
			return code
		}
	}
}

// startCommand starts argv in dir as the shim's child, in the shim's group,
// as the user and with the umask that as says (encodeAs).
func startCommand(argv []string, dir, as string) (*exec.Cmd, error) {
	if len(argv) == 0 {
		return nil, errors.New("no command")
	}
	cred, umask, err := decodeAs(as)
	if err != nil {
		return nil, err
	}
	if umask != nil {
		// The shim starts nothing else, and creates no file: its umask is
		// its command's.
		syscall.Umask(int(*umask))
	}
	lowerSwitchCaps()
	// Orphans among the command's descendants are re-parented to the shim
	// rather than to init, so the shim can find them all and kill them.
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return nil, fmt.Errorf("become a child subreaper: %w", err)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = dir
	if cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = nil, os.Stdout, os.Stderr
	return cmd, cmd.Start()
}

// reap reaps every child of the shim, the command and the orphans
// re-parented to it, and sends the command's exit code (128+N for signal
// N) to exited. It returns, closing reaped, when the shim has no child left.
func reap(command int, exited chan<- int, reaped chan<- struct{}) {
	defer close(reaped)
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, 0, nil)
		switch {
		case err == unix.EINTR:
		case err != nil:
			return // ECHILD
		case pid == command && ws.Signaled():
			exited <- 128 + int(ws.Signal())
		case pid == command:
			exited <- ws.ExitStatus()
		}
	}
}

// The shim's report is "ok", or why the command could not start:
// "<cause> <message>", the cause being one that errors.Is can test once
// Start has decoded it.
func encodeReport(err error) string {
	var errno syscall.Errno
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, exec.ErrNotFound):
		return "notfound " + err.Error()
	case errors.Is(err, exec.ErrDot):
		return "dot " + err.Error()
	case errors.As(err, &errno):
		return "errno:" + strconv.Itoa(int(errno)) + " " + err.Error()
	}
	return "other " + err.Error()
}

func decodeReport(s string) error {
	if s == "ok" {
		return nil
	}
	kind, msg, _ := strings.Cut(s, " ")
	e := &reportedError{msg: msg}
	switch {
	case kind == "notfound":
		e.cause = exec.ErrNotFound
	case kind == "dot":
		e.cause = exec.ErrDot
	case strings.HasPrefix(kind, "errno:"):
		n, _ := strconv.Atoi(strings.TrimPrefix(kind, "errno:"))
		e.cause = syscall.Errno(n)
	}
	return e
}

// reportedError is why the shim could not start the command, as it said.
type reportedError struct {
	msg   string
	cause error // nil when the shim's error had none errors.Is knows
}

func (e *reportedError) Error() string { return e.msg }
func (e *reportedError) Unwrap() error { return e.cause }
