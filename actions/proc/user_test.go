package proc

import (
	"os"
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
