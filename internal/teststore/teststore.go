// Package teststore starts the real stores that tests run against — extra
// redis-servers, etcd, Azurite, the Datastore emulator, FerretDB, nats-servers — as child
// processes on free loopback ports, and stops them with the test.
//
// Every store has a Start*Proc function that returns an error and leaves
// stopping the process to its caller (a TestMain, the benchmark, a test that
// restarts the store from a goroutine); the Start* functions that take a
// testing.TB are thin wrappers that fail the test on error and stop the
// process when it ends.
//
// Every process runs in its own process group and gets SIGKILL when the test
// binary dies (Linux parent-death signal), so an interrupted `go test` leaves
// nothing behind. scripts/services.sh installs the programs; a test whose
// program is missing fails with a message that says to run it.
package teststore

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Proc is one started store process.
type Proc struct {
	Name    string
	LogPath string
	cmd     *exec.Cmd
	done    chan struct{}
	once    sync.Once
}

// FreePort returns a loopback TCP port that was free a moment ago.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// MustFreePort is FreePort for tests.
func MustFreePort(t testing.TB) int {
	t.Helper()
	p, err := FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// portOrFree is port, or a free port when port is 0.
func portOrFree(port int) (int, error) {
	if port != 0 {
		return port, nil
	}
	return FreePort()
}

// SkipShort skips t under -short (`make test-short`, the fast suite), which
// runs no store server and no agent: what names what t would have needed.
// Every testing.TB wrapper that starts a store calls it, and so do the
// helpers that reach the shared PostgreSQL and MySQL servers and the ones
// that start agents (internal/cluster).
func SkipShort(t testing.TB, what string) {
	t.Helper()
	if testing.Short() {
		t.Skipf("needs %s: skipped under -short", what)
	}
}

// started is the end of every testing.TB wrapper: it fails t on err, and
// stops p when t ends.
func started(t testing.TB, p *Proc, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
}

// talkTo is a ready check's conversation: it dials addr, bounds the
// connection by ctx's deadline, and lets talk judge the server's answer.
func talkTo(ctx context.Context, addr string, talk func(c net.Conn) error) error {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
	}
	return talk(c)
}

// RepoRoot is the directory holding go.mod.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("teststore: no go.mod above the working directory")
		}
		dir = parent
	}
}

// Tool finds a program on PATH or in the project's .cache (where
// scripts/services.sh installs what the machine image lacks). rel is tried
// under .cache, e.g. "bin/ferretdb" or "azurite/node_modules/.bin/azurite-blob".
func Tool(name, rel string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	if root, err := RepoRoot(); err == nil && rel != "" {
		p := filepath.Join(root, ".cache", rel)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("teststore: %s is not installed: run scripts/services.sh (make test does)", name)
}

// Start runs argv in its own process group with output to dir/name.log.
func Start(name, dir string, argv ...string) (*Proc, error) {
	logPath := filepath.Join(dir, name+".log")
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = procAttr()
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("teststore: start %s: %w", name, err)
	}
	p := &Proc{Name: name, LogPath: logPath, cmd: cmd, done: make(chan struct{})}
	go func() { cmd.Wait(); logf.Close(); close(p.done) }()
	return p, nil
}

// Pid is the process id (and process group id) of the store.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Exited is closed when the process has exited.
func (p *Proc) Exited() <-chan struct{} { return p.done }

// Signal sends sig to the store's whole process group.
func (p *Proc) Signal(sig syscall.Signal) error { return syscall.Kill(-p.Pid(), sig) }

// Stop kills the process group and waits for the process. Safe to call twice.
func (p *Proc) Stop() {
	p.once.Do(func() {
		p.Signal(syscall.SIGKILL)
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
		}
	})
}

// Log returns what the process wrote so far, for failure messages.
func (p *Proc) Log() string {
	b, _ := os.ReadFile(p.LogPath)
	return string(b)
}

// WaitReady polls ready until it returns nil, the process exits, or within passes.
func (p *Proc) WaitReady(within time.Duration, ready func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	var last error
	for {
		attempt, cancelAttempt := context.WithTimeout(ctx, time.Second)
		last = ready(attempt)
		cancelAttempt()
		if last == nil {
			return nil
		}
		select {
		case <-p.done:
			return fmt.Errorf("teststore: %s exited before it was ready: %v\n%s", p.Name, last, p.Log())
		case <-ctx.Done():
			return fmt.Errorf("teststore: %s not ready within %s: %v\n%s", p.Name, within, last, p.Log())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// DialReady is a ready check that succeeds once addr accepts TCP connections.
func DialReady(addr string) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return err
		}
		return c.Close()
	}
}

// Addr is "127.0.0.1:port".
func Addr(port int) string { return "127.0.0.1:" + strconv.Itoa(port) }

// DBDir is a directory of the test's own for a database file (SQLite),
// removed when t ends: on /dev/shm where there is one (a tmpfs), else
// t.TempDir(). On disk, a commit's fsync stalled for seconds while other
// packages of make test built packages and images, and the agents' renewals
// timed out; what the tests check does not depend on the disk.
func DBDir(t testing.TB) string {
	t.Helper()
	if d, err := os.MkdirTemp("/dev/shm", "electd-test-"); err == nil {
		t.Cleanup(func() { os.RemoveAll(d) })
		return d
	}
	return t.TempDir()
}
