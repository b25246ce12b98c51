//go:build !linux

package proc

import (
	"fmt"
	"runtime"
	"syscall"
	"time"
)

// Elsewhere than on Linux electd cannot supervise a command as it promises
// (a subreaper, the parent-death signal, waitid and /proc find and stop
// every process the command started): Start refuses, and the rest of the
// package does nothing, so that the packages above it build and can be
// tested on the platform.

var errNotLinux = fmt.Errorf("%w: electd runs commands on Linux only, not on %s", ErrCannotStart, runtime.GOOS)

// Start refuses: see above.
func Start(spec Spec) (*Process, error) { return nil, errNotLinux }

// Process is a started command; Start never returns one here.
type Process struct{}

func (p *Process) Pid() int                                          { return 0 }
func (p *Process) Done() <-chan struct{}                             { return nil }
func (p *Process) Err() error                                        { return errNotLinux }
func (p *Process) ExitCode() int                                     { return -1 }
func (p *Process) Signal(sig syscall.Signal)                         {}
func (p *Process) Signaled() bool                                    { return false }
func (p *Process) Stop(sig syscall.Signal, grace time.Duration) bool { return false }
func (p *Process) Kill()                                             {}

// Alive reports whether process pid exists.
func Alive(pid int) bool { return pid > 0 && syscall.Kill(pid, 0) != syscall.ESRCH }

// MaybeShim returns: there is no shim here.
func MaybeShim() {}

// Spares keeps no spare shims here.
type Spares struct{}

func NewSpares(path string) *Spares { return &Spares{} }
func (s *Spares) Fill()             {}
func (s *Spares) Close()            {}
func (s *Spares) Waiting() int      { return 0 }
