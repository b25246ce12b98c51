package systest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/electd/electd/internal/cluster"
)

// A second SIGTERM while the agent is stopping gracefully kills the
// children and exits at once (systemctl stop must never hang: consul #4439).
func TestSecondSignalExitsAtOnce(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "electd.hcl")
	src := fmt.Sprintf(`
agent {
  node_id = "node-1"
  listen  = ""
  shutdown_timeout = "60s"
}
provider "sql" "s" {
  driver = "sqlite"
  dsn    = %q
}
job "stubborn" {
  ttl         = "60s"
  renew_every = "5s"
  run {
    # Survives SIGTERM (and says it got it): a graceful stop would wait
    # the whole stop_timeout. Each turn of its loop is a line in ticks.
    command      = ["sh", "-c", "trap 'echo >> %[2]s/term' TERM; echo \"$$ $ELECTD_TOKEN\" > %[2]s/child.pid; while :; do sleep 0.05; echo >> %[2]s/ticks; done"]
    stop_timeout = "40s"
  }
}
`, filepath.Join(dir, "leases.db"), dir)
	if err := os.WriteFile(cfg, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	a, err := cluster.StartProcess(cluster.Spec{Name: "node-1", Argv: []string{binary, "run", "-config", cfg}, Dir: dir,
		LogPath: filepath.Join(dir, "agent.log")})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Kill()
	pid, _ := readPidToken(t, filepath.Join(dir, "child.pid"))

	// After the first SIGTERM the agent stops its child, which survives it
	// and goes round its loop five more times: the agent still waits.
	size := func(name string) int { b, _ := os.ReadFile(filepath.Join(dir, name)); return len(b) }
	a.Signal(syscall.SIGTERM)
	ticks := -1
	for deadline := time.Now().Add(20 * time.Second); ticks < 0 || size("ticks") < ticks+5; time.Sleep(10 * time.Millisecond) {
		select {
		case <-a.Done():
			t.Fatal("the agent exited at the first SIGTERM though its child survives it (stop_timeout 40s)")
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("within 20s of the first SIGTERM: child signalled %v, %d turns of its loop since", ticks >= 0, size("ticks")-ticks)
		}
		if ticks < 0 && size("term") > 0 {
			ticks = size("ticks")
		}
	}
	select {
	case <-a.Done():
		t.Fatal("the agent exited at the first SIGTERM though its child survives it (stop_timeout 40s)")
	default:
	}
	second := time.Now()
	a.Signal(syscall.SIGTERM)
	select {
	case <-a.Done():
		err := a.Err()
		t.Logf("second SIGTERM → exit (%v) after %s", err, time.Since(second).Round(time.Millisecond))
		if err == nil {
			t.Error("exit 0 after the children were killed, want a failure exit")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the agent did not exit within 5s of the second SIGTERM")
	}
	deadline := time.Now().Add(2 * time.Second)
	for alive(pid) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if alive(pid) {
		t.Errorf("child %d survived the second signal", pid)
	}
}

// The agent outlives its outputs: with stdout and stderr on a pipe whose
// reader has gone (`electd run | tee log` and Ctrl-C), a SIGTERM still stops
// the child, releases the lease and exits 0 instead of dying of SIGPIPE.
func TestClosedOutputDoesNotKillTheAgent(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "leases.db")
	cfg := filepath.Join(dir, "electd.hcl")
	src := fmt.Sprintf(`
agent {
  node_id = "node-1"
  listen  = ""
}
provider "sql" "s" {
  driver = "sqlite"
  dsn    = %q
}
job "piped" {
  ttl         = "30s"
  renew_every = "5s"
  run {
    command      = ["sh", "-c", "echo \"$$ $ELECTD_TOKEN\" > %[2]s/child.pid; while :; do echo working; echo >> %[2]s/lines; sleep 0.05; done"]
    stop_timeout = "5s"
  }
}
`, db, dir)
	if err := os.WriteFile(cfg, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	a, err := cluster.StartProcess(cluster.Spec{Name: "node-1", Argv: []string{binary, "run", "-config", cfg}, Dir: dir,
		LogPath: filepath.Join(dir, "agent.log"), Pipe: true})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Kill()
	pid, _ := readPidToken(t, filepath.Join(dir, "child.pid"))
	// The reader goes away; every later write gets EPIPE. The child then
	// prints six more lines, each of which the agent writes to its output.
	printed := func() int { b, _ := os.ReadFile(filepath.Join(dir, "lines")); return len(b) }
	a.Out.Close()
	closed := printed()
	for deadline := time.Now().Add(20 * time.Second); printed() < closed+6; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the child printed no six lines within 20s of the reader's close")
		}
	}
	a.Signal(syscall.SIGTERM)
	select {
	case <-a.Done():
		if err := a.Err(); err != nil {
			t.Fatalf("the agent exited with %v, want 0 (SIGPIPE is exit status 141 / signal: broken pipe)", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the agent did not exit within 20s of SIGTERM")
	}
	if alive(pid) {
		t.Errorf("child %d survived the stop", pid)
	}
	out, _, code := cli(t, nil, "leases", "-json", "-config", cfg)
	if code != 0 || !strings.Contains(out, `"holder": ""`) {
		t.Errorf("the lease was not released: exit %d\n%s", code, out)
	}
}
