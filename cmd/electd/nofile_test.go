package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/electd/electd/config"
)

const nofileConfig = `
job "a" {
  run { command = ["true"] }
}
job "b" {
  run { command = ["true"] }
}
`

// TestFileLimitWarnings: under a real open-files limit below what the jobs
// need, `check` warns and `run` logs an ERROR; in a process of its own.
func TestFileLimitWarnings(t *testing.T) {
	if os.Getenv("ELECTD_NOFILE_CHILD") == "" {
		cmd := exec.Command(os.Args[0], "-test.run=^TestFileLimitWarnings$", "-test.v")
		cmd.Env = append(os.Environ(), "ELECTD_NOFILE_CHILD=1")
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "CHILD-OK") {
			t.Fatalf("child: %v\n%s", err, out)
		}
		return
	}
	t.Setenv("STATE_DIRECTORY", "")
	path := filepath.Join(t.TempDir(), "electd.hcl")
	if err := os.WriteFile(path, []byte(nofileConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, diags := config.Load([]string{path}, loadOptions([]string{path}))
	if diags.HasErrors() {
		t.Fatal("the configuration does not load")
	}
	_, need, _ := fileLimit(cfg)
	if want := uint64(64 + 256 + 2*16 + 1*16); need != want { // listen is on by default
		t.Errorf("need %d, want %d", need, want)
	}
	var rl syscall.Rlimit
	syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl)
	if rl.Cur >= need {
		var out, errs bytes.Buffer
		if code := run([]string{"check", path}, &out, &errs); code != 0 || strings.Contains(errs.String(), "open-files limit") {
			t.Errorf("with the limit %d: exit %d, %s", rl.Cur, code, errs.String())
		}
	}
	low := rl
	low.Cur = 200
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
		t.Fatal(err)
	}
	var out, errs bytes.Buffer
	if code := run([]string{"check", path}, &out, &errs); code != 0 {
		t.Errorf("check exits %d with a low limit: a warning is not an error", code)
	}
	if want := fmt.Sprintf("Warning: the open-files limit here (RLIMIT_NOFILE) is 200, below the %d that 2 jobs and 1 provider need", need); !strings.Contains(errs.String(), want) {
		t.Errorf("check's stderr %q does not say %q", errs.String(), want)
	}
	var logs bytes.Buffer
	logFileLimit(cfg, hclog.New(&hclog.LoggerOptions{Output: &logs}))
	if got := logs.String(); !strings.Contains(got, "[ERROR]") || !strings.Contains(got, "limit=200") || !strings.Contains(got, fmt.Sprintf("need=%d", need)) {
		t.Errorf("run's log: %q", got)
	}
	fmt.Println("CHILD-OK")
}
