package proc

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/electd/electd/internal/syncbuf"
)

// ready fills s and waits for its spare; it returns the spare's pid.
func ready(t *testing.T, s *Spares) int {
	t.Helper()
	s.Fill()
	var pid int
	waitFor(t, 10*time.Second, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.idle != nil {
			pid = s.idle.cmd.Process.Pid
		}
		return pid != 0
	}, "the spare shim starts")
	return pid
}

// A command started through Spares runs under the spare, with its own argv,
// environment (PATH included), directory and output, and a new spare
// follows.
func TestSpareRunsCommand(t *testing.T) {
	s := NewSpares(self(t))
	t.Cleanup(s.Close)
	spare := ready(t, s)

	dir, bin := t.TempDir(), t.TempDir()
	// A program found only through the job's own PATH.
	if err := os.WriteFile(filepath.Join(bin, "hello"), []byte("#!/bin/sh\necho \"$GREETING from $(pwd) args $*\"\necho err >&2\nexit 3\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	var out, errw syncbuf.Buffer
	p, err := Start(Spec{Argv: []string{"hello", "a b", "c"}, Env: []string{"GREETING=hi", "PATH=" + bin + ":" + os.Getenv("PATH")},
		Dir: dir, Stdout: &out, Stderr: &errw, Shim: self(t), Spares: s})
	if err != nil {
		t.Fatal(err)
	}
	if p.Pid() != spare {
		t.Errorf("the command ran under shim %d, not the spare %d", p.Pid(), spare)
	}
	<-p.Done()
	if got, want := strings.TrimSpace(out.String()), "hi from "+dir+" args a b c"; got != want {
		t.Errorf("stdout %q, want %q", got, want)
	}
	if got := strings.TrimSpace(errw.String()); got != "err" {
		t.Errorf("stderr %q, want err", got)
	}
	if p.ExitCode() != 3 {
		t.Errorf("exit code %d, want 3", p.ExitCode())
	}
	if next := ready(t, s); next == spare {
		t.Error("no new spare after the first was taken")
	}
}

// A command the spare cannot start is an error from Start, as with a fresh
// shim: errors.Is tells what it was.
func TestSpareCannotStart(t *testing.T) {
	s := NewSpares(self(t))
	t.Cleanup(s.Close)
	for _, c := range []struct {
		argv  []string
		dir   string
		cause error
	}{
		{[]string{"electd-no-such-program"}, "", exec.ErrNotFound},
		{[]string{"/nonexistent/prog"}, "", os.ErrNotExist},
		{[]string{os.DevNull}, "", os.ErrPermission},
	} {
		spare := ready(t, s)
		_, err := Start(Spec{Argv: c.argv, Dir: c.dir, Shim: self(t), Spares: s})
		if !errors.Is(err, ErrCannotStart) || !errors.Is(err, c.cause) {
			t.Errorf("%v: error %v, want ErrCannotStart and %v", c.argv, err, c.cause)
		}
		waitFor(t, 10*time.Second, func() bool { return !alive(spare) }, "the spare that could not start its command exits")
	}
}

// A spare that died before it was taken (a signal reached it) does not fail
// the command: a fresh shim starts it.
func TestDeadSpareFallsBack(t *testing.T) {
	s := NewSpares(self(t))
	t.Cleanup(s.Close)
	spare := ready(t, s)
	syscall.Kill(spare, syscall.SIGTERM)
	waitFor(t, 10*time.Second, func() bool { return !alive(spare) }, "the signalled spare exits")
	p, err := Start(Spec{Argv: []string{"true"}, Shim: self(t), Spares: s})
	if err != nil {
		t.Fatalf("Start after the spare died: %v", err)
	}
	<-p.Done()
	if p.Pid() == spare || p.ExitCode() != 0 {
		t.Errorf("pid %d exit %d: want a fresh shim (not %d) and exit 0", p.Pid(), p.ExitCode(), spare)
	}
}

// Close leaves no spare running, and commands still start, under a fresh
// shim.
func TestSparesClose(t *testing.T) {
	s := NewSpares(self(t))
	spare := ready(t, s)
	s.Fill() // a fill under way when Close comes is waited for too
	s.Close()
	if alive(spare) {
		t.Errorf("spare %d still running after Close", spare)
	}
	p, err := Start(Spec{Argv: []string{"true"}, Shim: self(t), Spares: s})
	if err != nil {
		t.Fatal(err)
	}
	<-p.Done()
	if p.Pid() == spare {
		t.Error("a closed Spares gave out its spare")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.idle != nil || s.filling {
		t.Error("a closed Spares started another spare")
	}
}

// kill -9 of the agent: its idle spare dies too (parent-death signal).
func TestSpareDiesWithAgent(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "spare")
	agent := exec.Command(self(t))
	agent.Env = append(os.Environ(), "ELECTD_PROC_TEST_SPARE="+pidFile)
	if err := agent.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { agent.Process.Kill(); agent.Wait() })
	spare := readPid(t, pidFile)
	if !alive(spare) {
		t.Fatal("spare not running")
	}
	agent.Process.Signal(syscall.SIGKILL)
	agent.Wait()
	waitFor(t, 10*time.Second, func() bool { return !alive(spare) }, "the spare dies with the agent")
}

// spareAgent keeps a spare, writes its pid to pidFile and waits to be
// killed.
func spareAgent(pidFile string) int {
	os.Unsetenv("ELECTD_PROC_TEST_SPARE")
	self, _ := os.Executable()
	s := NewSpares(self)
	s.Fill()
	for range 1000 {
		s.mu.Lock()
		sp := s.idle
		s.mu.Unlock()
		if sp != nil {
			os.WriteFile(pidFile, []byte(strconv.Itoa(sp.cmd.Process.Pid)), 0o644)
			time.Sleep(10 * time.Minute)
			return 0
		}
		time.Sleep(10 * time.Millisecond)
	}
	return 1
}
