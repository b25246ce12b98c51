package agent

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/electd/electd/actions/proc"
	"github.com/electd/electd/config"
	"github.com/electd/electd/internal/rlimit"
	"github.com/electd/electd/metrics"
)

// inChild runs the test named name again in a process of its own, with
// env set, and returns its output: the tests below lower the open-files
// limit, which is the whole process's.
func inChild(t *testing.T, name string) string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+name+"$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), "ELECTD_TEST_CHILD="+name)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the child failed: %v\n%s", err, out)
	}
	return string(out)
}

func childMode(name string) bool { return os.Getenv("ELECTD_TEST_CHILD") == name }

// lowerFileLimit sets this process's open-files limit to what it has open
// and spare more; the returned func puts the limit back.
func lowerFileLimit(t *testing.T, spare uint64) (restore func()) {
	t.Helper()
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
		t.Fatal(err)
	}
	open, _, err := rlimit.OpenFiles()
	if err != nil {
		t.Fatal(err)
	}
	low := syscall.Rlimit{Cur: uint64(open) + spare, Max: old.Max}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
		t.Fatal(err)
	}
	return func() { syscall.Setrlimit(syscall.RLIMIT_NOFILE, &old) }
}

// TestStartShortOfFiles: under a real open-files limit too low to start a
// command, the start fails as "short of resources" with EMFILE, not as
// "cannot start", and is logged and counted as such.
func TestStartShortOfFiles(t *testing.T) {
	if !childMode(t.Name()) {
		if out := inChild(t, t.Name()); !strings.Contains(out, "CHILD-OK") {
			t.Fatalf("the child did not check:\n%s", out)
		}
		return
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var out syncBuffer
	m := metrics.New("test", "test")
	r := &runner{job: "svc", log: hclog.New(&hclog.LoggerOptions{Output: &out}), shim: self, metrics: m}
	restore := lowerFileLimit(t, 1)
	_, err = r.start("run", config.Command{Argv: config.ListOf("true")}, config.Event{Type: "elected"})
	restore()
	switch {
	case err == nil:
		t.Fatal("the command started with one file to spare")
	case !errors.Is(err, rlimit.ErrShortOfResources) || !errors.Is(err, syscall.EMFILE):
		t.Fatalf("error %v: not short of resources with EMFILE", err)
	case errors.Is(err, proc.ErrCannotStart):
		t.Fatalf("error %v: read as a command that cannot start on this node", err)
	}
	if !strings.Contains(out.String(), "this node is short of resources: a command could not start") || !strings.Contains(out.String(), "errno=EMFILE") {
		t.Errorf("log:\n%s", out.String())
	}
	if got := counterValue(t, m, "electd_resource_errors_total"); got != 1 {
		t.Errorf("electd_resource_errors_total = %v, want 1", got)
	}
	// With the limit back, the same command starts.
	s, err := r.start("run", config.Command{Argv: config.ListOf("true")}, config.Event{Type: "elected"})
	if err != nil {
		t.Fatal(err)
	}
	<-s.Done()
	r.reap(s, false)
	fmt.Println("CHILD-OK")
}

// TestShortOfFilesKeepsTheJob: a leader whose run command cannot start for
// lack of open files keeps the lease and tries again, and the command runs
// once files are to be had; the job is not given away.
func TestShortOfFilesKeepsTheJob(t *testing.T) {
	if !childMode(t.Name()) {
		if out := inChild(t, t.Name()); !strings.Contains(out, "CHILD-OK") {
			t.Fatalf("the child did not check:\n%s", out)
		}
		return
	}
	dir := t.TempDir()
	gate, marker := filepath.Join(dir, "gate"), filepath.Join(dir, "started")
	// The command exits at once until the gate is there, and is restarted:
	// each start after the first needs a fresh shim once the spare shim
	// cannot be refilled for lack of files.
	cfg := loadConfig(t, agentConfig("n1", sqliteDB(t), fmt.Sprintf(`
job "svc" {
  provider    = sql.s
  ttl         = "6s"
  renew_every = "1s"
  retry_every = "500ms"
  run {
    command      = ["sh", "-c", "echo started >> %[2]s; [ -e %[1]s ] && exec sleep 60; exit 0"]
    restart      = "always"
    restart_wait = "200ms"
    stop_timeout = "1s"
  }
}
`, gate, marker)))
	var out syncBuffer
	m := metrics.New("test", "test")
	a := startAgent(t, cfg, func(o *Options) {
		o.Metrics = m
		o.Logger = hclog.New(&hclog.LoggerOptions{Name: "n1", Level: hclog.Debug, Output: &out})
	})
	eventually(t, 20*time.Second, "n1 runs the command", func() bool {
		b, _ := os.ReadFile(marker)
		return a.job("svc").state == StateLeader && len(b) > 0
	})
	term := a.job("svc").token

	const short = "the run command could not start; keeping the lease"
	restore := lowerFileLimit(t, 0)
	// Whatever files the commands' exits free are taken at once, as a
	// process leaking descriptors would.
	var held []*os.File
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(out.String(), short) && time.Now().Before(deadline) {
		for {
			f, err := os.Open(os.DevNull)
			if err != nil {
				break
			}
			held = append(held, f)
		}
		time.Sleep(2 * time.Millisecond)
	}
	for _, f := range held {
		f.Close()
	}
	restore()
	if !strings.Contains(out.String(), short) {
		t.Fatalf("no start failed for lack of files:\n%s", out.String())
	}
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the run command starts again once files are to be had", func() bool {
		log := out.String()
		return strings.Contains(log[strings.LastIndex(log, short):], "run command started")
	})
	if s := a.job("svc"); s.state != StateLeader || s.token != term {
		t.Errorf("after the shortage: %+v, want still the leader with token %d", s, term)
	}
	if strings.Contains(out.String(), "gave the job away") {
		t.Errorf("the job was given away:\n%s", out.String())
	}
	if got := counterValue(t, m, "electd_resource_errors_total"); got < 1 {
		t.Errorf("electd_resource_errors_total = %v", got)
	}
	fmt.Println("CHILD-OK")
}
