package systest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// make install lays out the binary (stamped with version and commit), the
// unit and an example configuration under DESTDIR, and that configuration
// passes check.
func TestMakeInstall(t *testing.T) {
	dest := t.TempDir()
	out, err := exec.Command("make", "-C", "..", "install", "DESTDIR="+dest).CombinedOutput()
	if err != nil {
		t.Fatalf("make install: %v\n%s", err, out)
	}
	for _, f := range []string{"usr/local/bin/electd", "etc/systemd/system/electd.service",
		"etc/electd/electd.hcl", "usr/local/share/doc/electd/operations.md"} {
		if _, err := os.Stat(filepath.Join(dest, f)); err != nil {
			t.Errorf("make install did not install %s: %v", f, err)
		}
	}
	bin := filepath.Join(dest, "usr/local/bin/electd")
	v, err := exec.Command(bin, "version").Output()
	if err != nil {
		t.Fatal(err)
	}
	commit, _ := exec.Command("git", "rev-parse", "HEAD").Output()
	if c := strings.TrimSpace(string(commit)); c != "" && !strings.Contains(string(v), c) {
		t.Errorf("electd version = %q, want the commit %s stamped in", v, c)
	}
	if out, err := exec.Command(bin, "check", "-config", filepath.Join(dest, "etc/electd")).CombinedOutput(); err != nil {
		t.Errorf("the installed configuration fails check: %v\n%s", err, out)
	}
}

// An upgrade replaces or removes the binary under a running agent: the agent
// still starts its commands under the parent-death shim (/proc/self/exe).
func TestBinaryRemovedWhileRunning(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "electd")
	data, err := os.ReadFile(binary)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "electd.hcl")
	src := `
agent {
  node_id = "node-1"
  listen  = ""
}
provider "sql" "s" {
  driver = "sqlite"
  dsn    = "` + filepath.Join(dir, "leases.db") + `"
}
job "restarts" {
  ttl         = "4s"
  renew_every = "1s"
  run {
    command      = ["sh", "-c", "echo run >> ` + filepath.Join(dir, "runs") + `; sleep 0.3"]
    restart      = "always"
    restart_wait = "100ms"
    stop_timeout = "1s"
  }
}
`
	if err := os.WriteFile(cfg, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "run", "-config", cfg)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait() }()
	runs := func() int {
		b, _ := os.ReadFile(filepath.Join(dir, "runs"))
		return strings.Count(string(b), "run")
	}
	waitFor := func(n int) {
		t.Helper()
		deadline := time.Now().Add(15 * time.Second)
		for runs() < n {
			if time.Now().After(deadline) {
				t.Fatalf("only %d runs, want %d", runs(), n)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitFor(2)
	if err := os.Remove(bin); err != nil {
		t.Fatal(err)
	}
	before := runs()
	waitFor(before + 3)
}
