package proc

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"syscall"
)

// The environment that tells an electd binary to act as the shim.
const (
	envShim       = "ELECTD_SHIM"
	envShimParent = "ELECTD_SHIM_PARENT"
)

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

// shim runs argv as a child in its own process group (the shim leads it),
// passing signals through by group membership: a group signal from the
// agent reaches the command directly. SIGTERM also arrives when the agent
// dies (the parent-death signal); then the shim kills the whole group.
func shim(argv []string) int {
	parent, _ := strconv.Atoi(os.Getenv(envShimParent))
	os.Unsetenv(envShim)
	os.Unsetenv(envShimParent)

	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT,
		syscall.SIGUSR1, syscall.SIGUSR2)
	orphaned := func() bool { return os.Getppid() != parent }
	if orphaned() { // the agent died before the signal handler was in place
		return 1
	}
	if len(argv) == 0 {
		fmt.Fprintln(os.Stderr, "electd shim: no command")
		return 127
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = nil, os.Stdout, os.Stderr
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "electd: cannot start %q: %v\n", argv[0], err)
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
			return 127
		}
		return 126
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	for {
		select {
		case <-sigs:
			if orphaned() {
				syscall.Kill(0, syscall.SIGKILL) // the whole group, the shim with it
			}
			// Otherwise the agent signalled the group: the command got it too.
		case err := <-done:
			return ExitCode(err)
		}
	}
}
