package proc

import (
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// nobody is the credential of the user nobody, for tests that switch users;
// they are skipped unless the test runs as root.
func nobody(t *testing.T) *syscall.Credential {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("switching users needs root: run this test as root to cover it")
	}
	u, err := user.Lookup("nobody")
	if err != nil {
		t.Skipf("no user nobody here: %v", err)
	}
	uid, _ := strconv.ParseUint(u.Uid, 10, 32)
	gid, _ := strconv.ParseUint(u.Gid, 10, 32)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
}

// sharedDir is a directory that every user can write to (t.TempDir's
// parent is root's alone).
func sharedDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "electd-proc-user-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	return dir
}

// A command with a User and a Umask runs as that user with that umask,
// under a fresh shim and under a spare (the shim stays the agent's user),
// and its stop still reaches it: the agent signals a group whose command is
// another user's.
func TestUserAndUmask(t *testing.T) {
	cred := nobody(t)
	run := func(t *testing.T, s *Spares) {
		dir := sharedDir(t)
		umask := uint32(0o027)
		p, err := Start(Spec{
			Argv:   []string{"sh", "-c", `echo $$ > "$0/pid"; id -u > "$0/uid"; echo x > "$0/file"; exec sleep 600`, dir},
			Env:    []string{"GORACE=atexit_sleep_ms=0"},
			Shim:   self(t),
			User:   cred,
			Umask:  &umask,
			Spares: s,
		})
		if err != nil {
			t.Fatal(err)
		}
		pid := readPid(t, filepath.Join(dir, "pid"))
		waitFor(t, 10*time.Second, func() bool {
			_, err := os.Stat(filepath.Join(dir, "file"))
			return err == nil
		}, "the command writes its file")
		if uid := procUid(t, pid); uid != strconv.Itoa(int(cred.Uid)) {
			t.Errorf("the command runs as uid %s, want %d (/proc/%d/status)", uid, cred.Uid, pid)
		}
		if uid := procUid(t, p.Pid()); uid != strconv.Itoa(os.Getuid()) {
			t.Errorf("the shim runs as uid %s, want the agent's %d", uid, os.Getuid())
		}
		b, _ := os.ReadFile(filepath.Join(dir, "uid"))
		if got := strings.TrimSpace(string(b)); got != strconv.Itoa(int(cred.Uid)) {
			t.Errorf("id -u said %q, want %d", got, cred.Uid)
		}
		fi, err := os.Stat(filepath.Join(dir, "file"))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o640 {
			t.Errorf("the command's file has mode %o, want 640 (umask 027)", fi.Mode().Perm())
		}
		if st := fi.Sys().(*syscall.Stat_t); st.Uid != cred.Uid || st.Gid != cred.Gid {
			t.Errorf("the command's file is owned by %d:%d, want %d:%d", st.Uid, st.Gid, cred.Uid, cred.Gid)
		}
		if killed := p.Stop(syscall.SIGTERM, 5*time.Second); killed {
			t.Error("the stop signal did not reach the command: it needed SIGKILL")
		}
		if alive(pid) {
			t.Errorf("the command (pid %d) outlived its stop", pid)
		}
		if p.ExitCode() != 128+int(syscall.SIGTERM) {
			t.Errorf("exit code %d, want %d (SIGTERM)", p.ExitCode(), 128+int(syscall.SIGTERM))
		}
	}
	t.Run("fresh shim", func(t *testing.T) { run(t, nil) })
	t.Run("spare shim", func(t *testing.T) {
		s := NewSpares(self(t))
		t.Cleanup(s.Close)
		ready(t, s)
		run(t, s)
	})
}

// procUid is the real uid of pid, as /proc/PID/status says.
func procUid(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 1 && f[0] == "Uid:" {
			return f[1]
		}
	}
	t.Fatalf("no Uid in /proc/%d/status", pid)
	return ""
}

// Without a shim a umask cannot be set for the command alone: Start says so.
func TestUmaskNeedsShim(t *testing.T) {
	umask := uint32(0o077)
	if _, err := Start(Spec{Argv: []string{"true"}, Umask: &umask}); err == nil {
		t.Fatal("Start with a umask and no shim succeeded")
	}
}

func TestEncodeAs(t *testing.T) {
	umask := uint32(0o027)
	for _, c := range []struct {
		name  string
		cred  *syscall.Credential
		umask *uint32
	}{
		{"none", nil, nil},
		{"user", &syscall.Credential{Uid: 65534, Gid: 65534}, nil},
		{"groups and umask", &syscall.Credential{Uid: 1, Gid: 2, Groups: []uint32{3, 4}}, &umask},
		{"umask only", nil, &umask},
	} {
		t.Run(c.name, func(t *testing.T) {
			cred, um, err := decodeAs(encodeAs(c.cred, c.umask))
			if err != nil {
				t.Fatal(err)
			}
			if (cred == nil) != (c.cred == nil) || cred != nil && (cred.Uid != c.cred.Uid || cred.Gid != c.cred.Gid || len(cred.Groups) != len(c.cred.Groups)) {
				t.Errorf("credential %+v, want %+v", cred, c.cred)
			}
			if (um == nil) != (c.umask == nil) || um != nil && *um != *c.umask {
				t.Errorf("umask %v, want %v", um, c.umask)
			}
		})
	}
}

// An agent that runs as an ordinary user with CAP_SETUID, CAP_SETGID and
// CAP_KILL as ambient capabilities (the systemd drop-in of
// docs/operations.md) does not pass them on to its commands, whether they
// run as its user or another: a command with them could become root. A
// command it starts as another user dies with it.
func TestCommandsDoNotInheritSwitchCaps(t *testing.T) {
	t.Run("as the agent's user", func(t *testing.T) { agentWithCaps(t, -1) })
	t.Run("as another user", func(t *testing.T) { agentWithCaps(t, 1) })
}

// agentWithCaps runs a stand-in agent as nobody with the capabilities to
// switch users, and its command as uid (and gid) as, or as nobody when as
// is -1.
func agentWithCaps(t *testing.T, as int) {
	cred := nobody(t)
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Skip("no setpriv (util-linux) here to start the agent with ambient capabilities")
	}
	dir := sharedDir(t)
	// The stand-in agent is this binary, where nobody can run it.
	bin := filepath.Join(dir, "proc.test")
	if err := copyFile(self(t), bin); err != nil {
		t.Fatal(err)
	}
	pidFile := filepath.Join(dir, "pid")
	agent := exec.Command(setpriv, "--reuid="+strconv.Itoa(int(cred.Uid)), "--regid="+strconv.Itoa(int(cred.Gid)), "--clear-groups",
		"--inh-caps=+setuid,+setgid,+kill", "--ambient-caps=+setuid,+setgid,+kill", bin)
	agent.Env = append(os.Environ(), "ELECTD_PROC_TEST_AGENT="+pidFile,
		"ELECTD_PROC_TEST_SCRIPT="+`grep CapAmb /proc/self/status > "$0.caps"; grep CapEff /proc/self/status >> "$0.caps"; sleep 600 & echo $! > "$0"; wait`)
	if as >= 0 {
		agent.Env = append(agent.Env, "ELECTD_PROC_TEST_UID="+strconv.Itoa(as))
	}
	if err := agent.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { agent.Process.Kill(); agent.Wait() })
	gc := readPid(t, pidFile)
	want := int(cred.Uid)
	if as >= 0 {
		want = as
	}
	if uid := procUid(t, gc); uid != strconv.Itoa(want) {
		t.Errorf("the command's child runs as uid %s, want %d", uid, want)
	}
	const switchCaps = 1<<5 | 1<<6 | 1<<7 // CAP_KILL, CAP_SETGID, CAP_SETUID
	if amb := capSet(t, "/proc/"+strconv.Itoa(agent.Process.Pid)+"/status", "CapAmb"); amb&switchCaps != switchCaps {
		t.Fatalf("the stand-in agent's ambient set is %x: setpriv did not give it the capabilities to pass on", amb)
	}
	for _, set := range []string{"CapAmb", "CapEff"} {
		if c := capSet(t, pidFile+".caps", set); c&switchCaps != 0 {
			t.Errorf("the command's %s is %x: it kept CAP_SETUID, CAP_SETGID or CAP_KILL", set, c)
		}
	}
	// The agent dies: the shim, nobody with CAP_KILL, kills the command of
	// another user.
	agent.Process.Signal(syscall.SIGKILL)
	agent.Wait()
	waitFor(t, 10*time.Second, func() bool { return !alive(gc) }, "the command dies with the agent")
}

// capSet reads one capability set (CapAmb, CapEff, ...) from a copy of a
// /proc/PID/status file.
func capSet(t *testing.T, path, name string) uint64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, name+":"); ok {
			n, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("no %s in %s", name, path)
	return 0
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
