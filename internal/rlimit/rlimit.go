// Package rlimit tells "this node is short of resources" (open files,
// memory, processes) from the other reasons a command or a store cannot be
// opened, and estimates the open files an agent needs.
package rlimit

import (
	"errors"
	"fmt"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// ErrShortOfResources is wrapped, with the errno, by an error that came of
// the node lacking a resource for the moment: trying again later may work,
// and another node may have what this one lacks.
var ErrShortOfResources = errors.New("this node is short of resources")

// resourceErrnos are the errnos of a resource exhausted rather than of a
// wrong command: too many open files (per process, system-wide), no
// memory, no process slot or a temporary shortage (fork's EAGAIN), no
// buffer space.
var resourceErrnos = []syscall.Errno{syscall.EMFILE, syscall.ENFILE, syscall.ENOMEM, syscall.EAGAIN, syscall.ENOBUFS}

// Errno is the resource errno err carries, if any.
func Errno(err error) (syscall.Errno, bool) {
	var errno syscall.Errno
	if !errors.As(err, &errno) {
		return 0, false
	}
	for _, e := range resourceErrnos {
		if errno == e {
			return errno, true
		}
	}
	return 0, false
}

// Name is an errno's symbolic name, "EMFILE", for logs and metric labels.
func Name(errno syscall.Errno) string {
	if n := unix.ErrnoName(errno); n != "" {
		return n
	}
	return fmt.Sprintf("errno%d", int(errno))
}

// Short wraps err with ErrShortOfResources when it carries a resource
// errno, and returns it as it is otherwise.
func Short(err error) error {
	if err == nil || errors.Is(err, ErrShortOfResources) {
		return err
	}
	if _, ok := Errno(err); ok {
		return &shortError{err}
	}
	return err
}

type shortError struct{ err error }

func (e *shortError) Error() string   { return ErrShortOfResources.Error() + ": " + e.err.Error() }
func (e *shortError) Unwrap() []error { return []error{ErrShortOfResources, e.err} }

// OpenFiles is how many files this process has open, and its limit
// (RLIMIT_NOFILE, the soft one: Go raises it to the hard one at start).
func OpenFiles() (open int, limit uint64, err error) {
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &rl); err != nil {
		return 0, 0, err
	}
	ents, err := os.ReadDir("/proc/self/fd")
	if errors.Is(err, syscall.EMFILE) {
		return int(rl.Cur), rl.Cur, nil // not even the directory could be opened
	}
	if err != nil {
		return 0, rl.Cur, err
	}
	return len(ents) - 1, rl.Cur, nil // less the directory being read
}

// AtFileLimit says whether this process has (nearly) all the files its
// limit allows open: then a "cannot open" from a library that hides the
// errno (SQLite's "unable to open database file") is this shortage.
func AtFileLimit() bool {
	open, limit, err := OpenFiles()
	return err == nil && uint64(open)+8 >= limit
}

// The estimate of the open files an agent needs, in one place for `run`
// and `check` and for docs/operations.md:
//
//   - the agent itself: its binary's files, the log, signals, timers and
//     a spare shim, NeedBase;
//   - the API: up to its connection cap, when it listens;
//   - each job: its command (stdout and stderr pipes, a pidfd, the shim's
//     report pipe while it starts), a health check and an exec hook at the
//     same time, and as many again while they start, NeedPerJob;
//   - each provider: its connections to the store (a pool, a watch), and
//     for SQLite the file, its journal and shared memory, NeedPerProvider.
const (
	NeedBase        = 64
	NeedPerJob      = 16
	NeedPerProvider = 16
)

// Need is the estimate for jobs and providers, with apiConns the API's
// connection cap (0 when it does not listen).
func Need(jobs, providers, apiConns int) uint64 {
	return uint64(NeedBase + apiConns + jobs*NeedPerJob + providers*NeedPerProvider)
}
