package agent

import (
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/electd/electd/actions/proc"
	"github.com/electd/electd/config"
)

// A job with a user and umask runs its command, its task, its health
// command and its exec hooks as that user with that umask, and its stop
// still ends the command. It needs root: the agent must be able to switch
// users.
func TestJobRunsAsUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("switching users needs root: run this test as root to cover it")
	}
	u, err := user.Lookup("nobody")
	if err != nil {
		t.Skipf("no user nobody here: %v", err)
	}
	// The commands write here as nobody: t.TempDir's parent is root's alone.
	dir, err := os.MkdirTemp("", "electd-agent-runas-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	cfg := loadConfig(t, agentConfig("node-1", sqliteDB(t), fmt.Sprintf(`
job "as-nobody" {
%s
  user  = "nobody"
  umask = "0027"
  run {
    command      = ["sh", "-c", "id -u > %[2]s/run.uid; echo $$ > %[2]s/run.pid; exec sleep 600"]
    stop_timeout = "1s"
  }
  on_elected {
    exec { command = ["sh", "-c", "id -u > %[2]s/exec.uid; echo x > %[2]s/exec.file"] }
  }
}

job "task-as-nobody" {
%[1]s
  user  = "nobody"
  umask = "0077"
  health {
    command  = ["sh", "-c", "id -u >> %[2]s/health.uid"]
    interval = "1s"
    timeout  = "1s"
  }
  task {
    schedule = "@every 1s"
    command  = ["sh", "-c", "id -u >> %[2]s/task.uid; echo x > %[2]s/task.file"]
    stop_timeout = "1s"
  }
}`, quick, dir)))
	a := startAgent(t, cfg)
	pidFile := filepath.Join(dir, "run.pid")
	eventually(t, 10*time.Second, "the run command starts", func() bool { return len(lines(t, pidFile)) == 1 })
	pid, err := strconv.Atoi(lines(t, pidFile)[0])
	if err != nil {
		t.Fatal(err)
	}
	// The task and the health command run again and again: each appends.
	eventually(t, 10*time.Second, "the task and the health command run", func() bool {
		return len(lines(t, filepath.Join(dir, "task.uid"))) > 0 && len(lines(t, filepath.Join(dir, "health.uid"))) > 0 &&
			len(lines(t, filepath.Join(dir, "task.file"))) > 0 // the task's last step
	})
	for _, f := range []string{"task.uid", "health.uid"} {
		for _, got := range lines(t, filepath.Join(dir, f)) {
			if got != u.Uid {
				t.Errorf("%s: id -u said %q, want nobody's uid %s", f, got, u.Uid)
			}
		}
	}
	for _, f := range []string{"run.uid", "exec.uid"} {
		if got := lines(t, filepath.Join(dir, f)); strings.Join(got, "") != u.Uid {
			t.Errorf("%s: id -u said %q, want nobody's uid %s", f, got, u.Uid)
		}
	}
	if st, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid)); err != nil {
		t.Fatal(err)
	} else if !strings.Contains(string(st), "\nUid:\t"+u.Uid+"\t") {
		t.Errorf("the run command (pid %d) does not run as uid %s:\n%s", pid, u.Uid, st)
	}
	fi, err := os.Stat(filepath.Join(dir, "exec.file"))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o640 {
		t.Errorf("the exec hook's file has mode %o, want 640 (umask 0027)", fi.Mode().Perm())
	}
	if fi, err := os.Stat(filepath.Join(dir, "task.file")); err != nil {
		t.Fatal(err)
	} else if fi.Mode().Perm() != 0o600 {
		t.Errorf("the task's file has mode %o, want 600 (its job's umask 0077)", fi.Mode().Perm())
	}
	a.stop(t)
	if pidAlive(pid) {
		t.Errorf("the run command (pid %d, uid %s) outlived the agent's stop", pid, u.Uid)
	}
}

// A user that was never looked up (check -no-env) starts nothing: its ids
// are unknown, and zero would be root's.
func TestUnresolvedUserStartsNothing(t *testing.T) {
	var spec proc.Spec
	err := applyRunAs(&config.RunAs{User: "app"}, &spec)
	if err == nil || spec.User != nil {
		t.Errorf("an unresolved user gave %v and credential %+v, want an error and none", err, spec.User)
	}
}
