package systest

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestLowFileLimitAndTheEmbeddedDefault runs the binary as an operator
// would: under a real open-files limit too low for its jobs (prlimit),
// `check` warns and `run` logs an ERROR at start; and `electd leases`, run
// from another directory, finds the job the agent holds on the embedded
// SQLite default, beside the configuration.
func TestLowFileLimitAndTheEmbeddedDefault(t *testing.T) {
	prlimit, err := exec.LookPath("prlimit")
	if err != nil {
		t.Skip("no prlimit on this host")
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "electd.hcl")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`
agent {
  node_id = "low-1"
  listen  = %q
}
job "billing" {
  ttl         = "4s"
  renew_every = "1s"
  retry_every = "500ms"
  run {
    command      = ["sleep", "60"]
    stop_timeout = "1s"
  }
}
`, freeLoopback(t))), 0o644); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "STATE_DIRECTORY=")

	check := exec.Command(prlimit, "--nofile=200:200", binary, "check", cfg)
	check.Env = env
	out, err := check.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "Warning: the open-files limit here (RLIMIT_NOFILE) is 200, below the 352") {
		t.Errorf("check under a limit of 200: %v\n%s", err, out)
	}

	run := exec.Command(prlimit, "--nofile=200:200", binary, "run", "-config", cfg)
	run.Env, run.Dir = env, t.TempDir()
	stderr, err := run.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		run.Process.Signal(syscall.SIGTERM)
		run.Wait()
	}()
	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	var said, elected bool
	timeout := time.After(30 * time.Second)
	for !(said && elected) {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("the agent exited")
			}
			said = said || (strings.Contains(l, "[ERROR]") && strings.Contains(l, "open-files limit is below what the jobs need") && strings.Contains(l, "limit=200") && strings.Contains(l, "need=352"))
			elected = elected || strings.Contains(l, "elected: job=billing")
		case <-timeout:
			t.Fatalf("within 30s: the limit said %v, elected %v", said, elected)
		}
	}
	go func() {
		for range lines {
		}
	}()
	if _, err := os.Stat(filepath.Join(dir, "electd.db")); err != nil {
		t.Errorf("the embedded default is not beside the configuration: %v", err)
	}

	elsewhere := t.TempDir()
	leases := exec.Command(binary, "leases", "-config", cfg)
	leases.Env, leases.Dir = env, elsewhere
	out, err = leases.CombinedOutput()
	if err != nil {
		t.Fatalf("leases: %v\n%s", err, out)
	}
	if row := tableRow(t, string(out), "billing"); row["HOLDER"] != "low-1" || row["TOKEN"] == "0" {
		t.Errorf("leases from another directory:\n%s", out)
	}
	if ents, _ := os.ReadDir(elsewhere); len(ents) != 0 {
		t.Errorf("leases created %v in its working directory", ents)
	}
}
