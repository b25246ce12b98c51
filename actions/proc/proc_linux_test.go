package proc

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The test binary doubles as the shim; as a stand-in agent that the tests
// kill -9 (ELECTD_PROC_TEST_AGENT names a pid file, ELECTD_PROC_TEST_SCRIPT
// the command, ELECTD_PROC_TEST_UID its uid and gid; ELECTD_PROC_TEST_SPARE: one that keeps a spare shim); and as a command that leaves its process group
// (ELECTD_PROC_TEST_SETPGID=1: setpgid(0, 0), then exec its arguments).
func TestMain(m *testing.M) {
	MaybeShim()
	if os.Getenv("ELECTD_PROC_TEST_SETPGID") == "1" {
		os.Exit(setpgidExec(os.Args[1:]))
	}
	if f := os.Getenv("ELECTD_PROC_TEST_SPARE"); f != "" {
		os.Exit(spareAgent(f))
	}
	if f := os.Getenv("ELECTD_PROC_TEST_AGENT"); f != "" {
		os.Exit(fakeAgent(f, os.Getenv("ELECTD_PROC_TEST_SCRIPT")))
	}
	os.Exit(m.Run())
}

// fakeAgent starts `sh -c script pidFile self` under the shim, then waits
// to be killed. The default script's grandchild writes its pid to pidFile.
func fakeAgent(pidFile, script string) int {
	// The command runs this binary again (setpgid): not as an agent.
	os.Unsetenv("ELECTD_PROC_TEST_AGENT")
	os.Unsetenv("ELECTD_PROC_TEST_SCRIPT")
	self, _ := os.Executable()
	if script == "" {
		script = `sleep 600 & echo $! > "$0"; wait`
	}
	spec := Spec{Argv: []string{"sh", "-c", script, pidFile, self}, Shim: self}
	if id, err := strconv.Atoi(os.Getenv("ELECTD_PROC_TEST_UID")); err == nil {
		// The command runs as this uid and gid (user_test.go).
		spec.User = &syscall.Credential{Uid: uint32(id), Gid: uint32(id)}
	}
	_, err := Start(spec)
	if err != nil {
		return 1
	}
	time.Sleep(10 * time.Minute)
	return 0
}

func setpgidExec(argv []string) int {
	os.Unsetenv("ELECTD_PROC_TEST_SETPGID")
	path, err := exec.LookPath(argv[0])
	if err == nil {
		err = syscall.Setpgid(0, 0)
	}
	if err == nil {
		err = syscall.Exec(path, argv, os.Environ())
	}
	fmt.Fprintln(os.Stderr, err)
	return 1
}

func self(t *testing.T) string {
	t.Helper()
	p, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func alive(pid int) bool { return Alive(pid) }

func waitFor(t *testing.T, within time.Duration, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, within)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func readPid(t *testing.T, path string) int {
	t.Helper()
	var pid int
	waitFor(t, 10*time.Second, func() bool {
		b, err := os.ReadFile(path)
		if err != nil {
			return false
		}
		pid, err = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil && pid > 0
	}, "the grandchild writes its pid")
	return pid
}

func TestExitCodesAndOutput(t *testing.T) {
	for _, shim := range []string{"", self(t)} {
		for _, tc := range []struct {
			name string
			argv []string
			code int
		}{
			{"zero", []string{"sh", "-c", "echo hello; exit 0"}, 0},
			{"three", []string{"sh", "-c", "echo hello; exit 3"}, 3},
			{"signal", []string{"sh", "-c", "echo hello; kill -USR1 $$"}, 128 + int(syscall.SIGUSR1)},
		} {
			t.Run(tc.name+map[bool]string{true: "/shim", false: "/direct"}[shim != ""], func(t *testing.T) {
				var out bytes.Buffer
				p, err := Start(Spec{Argv: tc.argv, Stdout: &out, Shim: shim, Env: []string{"X=1"}})
				if err != nil {
					t.Fatal(err)
				}
				<-p.Done()
				if got := p.ExitCode(); got != tc.code {
					t.Errorf("exit code %d, want %d", got, tc.code)
				}
				if out.String() != "hello\n" {
					t.Errorf("output %q, want %q", out.String(), "hello\n")
				}
			})
		}
	}
}

// A command that cannot start is an error from Start, with a cause that
// errors.Is can test, never a process that exits 127: the agent must tell
// "cannot run here" from "ran and failed".
func TestCannotStart(t *testing.T) {
	dir := t.TempDir()
	noExec := filepath.Join(dir, "no-x-bit")
	if err := os.WriteFile(noExec, []byte("#!/bin/sh\nexit 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, shim := range []string{"", self(t)} {
		for _, tc := range []struct {
			name  string
			spec  Spec
			cause error
		}{
			{"missing file", Spec{Argv: []string{"/nonexistent/electd-test"}}, os.ErrNotExist},
			{"not in PATH", Spec{Argv: []string{"electd-test-no-such-program"}}, exec.ErrNotFound},
			{"no x bit", Spec{Argv: []string{noExec}}, os.ErrPermission},
			{"a directory", Spec{Argv: []string{dir}}, os.ErrPermission},
			{"missing dir", Spec{Argv: []string{"true"}, Dir: "/nonexistent/electd-test-dir"}, os.ErrNotExist},
			{"dir is a file", Spec{Argv: []string{"true"}, Dir: noExec}, syscall.ENOTDIR},
		} {
			t.Run(tc.name+map[bool]string{true: "/shim", false: "/direct"}[shim != ""], func(t *testing.T) {
				spec := tc.spec
				spec.Shim = shim
				p, err := Start(spec)
				if err == nil {
					<-p.Done()
					t.Fatalf("Start succeeded; the command exited %d", p.ExitCode())
				}
				if p != nil {
					t.Error("Start returned a process with its error")
				}
				if !errors.Is(err, ErrCannotStart) || !errors.Is(err, tc.cause) {
					t.Errorf("error %q: want one that wraps ErrCannotStart and %v", err, tc.cause)
				}
				if !strings.Contains(err.Error(), spec.Argv[0]) || !strings.Contains(err.Error(), spec.Dir) {
					t.Errorf("error %q does not name the program (and the dir)", err)
				}
				t.Log(err)
			})
		}
	}
}

// Stop signals the whole group: a grandchild that ignores nothing dies with
// the stop signal, and one that ignores it is killed after the grace.
func TestStopKillsGroup(t *testing.T) {
	for _, shim := range []string{"", self(t)} {
		dir := t.TempDir()
		pidFile := filepath.Join(dir, "pid")
		// The grandchild ignores SIGTERM; the shell waits for it.
		p, err := Start(Spec{
			Argv: []string{"sh", "-c", `trap '' TERM; sh -c 'trap "" TERM; sleep 600' & echo $! > "$0"; wait`, pidFile},
			Shim: shim,
		})
		if err != nil {
			t.Fatal(err)
		}
		gc := readPid(t, pidFile)
		start := time.Now()
		if killed := p.Stop(syscall.SIGTERM, 300*time.Millisecond); !killed {
			t.Error("Stop did not need SIGKILL for a group that ignores SIGTERM")
		}
		if time.Since(start) < 300*time.Millisecond {
			t.Error("Stop returned before the grace")
		}
		if alive(gc) {
			t.Errorf("grandchild %d survived Stop (shim=%v)", gc, shim != "")
		}
		if !p.Signaled() {
			t.Error("Signaled() is false after Stop")
		}
	}
}

// When the command exits, whatever it left behind in its group goes too,
// by the time Done is closed: with the shim, which does not return before
// its subtree is gone, and without it, where Done waits for the group.
func TestLeftoversKilledOnExit(t *testing.T) {
	for _, shim := range []string{"", self(t)} {
		pidFile := filepath.Join(t.TempDir(), "pid")
		p, err := Start(Spec{Argv: []string{"sh", "-c", `sleep 600 & echo $! > "$0"`, pidFile}, Shim: shim})
		if err != nil {
			t.Fatal(err)
		}
		<-p.Done()
		gc := readPid(t, pidFile)
		if alive(gc) {
			syscall.Kill(gc, syscall.SIGKILL)
			t.Errorf("the leftover grandchild %d was running when Done was closed (shim=%v)", gc, shim != "")
		}
		if p.ExitCode() != 0 {
			t.Errorf("exit code %d, want 0 (shim=%v)", p.ExitCode(), shim != "")
		}
	}
}

// kill -9 of the agent: the shim notices (parent-death signal) and kills the
// group, grandchildren included.
func TestAgentDeathKillsGroup(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "pid")
	agent := exec.Command(self(t))
	agent.Env = append(os.Environ(), "ELECTD_PROC_TEST_AGENT="+pidFile)
	if err := agent.Start(); err != nil {
		t.Fatal(err)
	}
	gc := readPid(t, pidFile)
	if !alive(gc) {
		t.Fatal("grandchild not running")
	}
	agent.Process.Signal(syscall.SIGKILL)
	agent.Wait()
	waitFor(t, 10*time.Second, func() bool { return !alive(gc) }, "the grandchild dies with the agent")
}
