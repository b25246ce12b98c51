package config

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Functions cannot be made to hang or take the agent's memory while the
// file is read: file() reads regular files only, bounded in size, and the
// functions that generate lists or text are bounded.
func TestFunctionsAreBounded(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big")
	if err := os.WriteFile(big, make([]byte, MaxFileSize+1), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, expr, want string }{
		{"file of a FIFO", `file("fifo")`, "not a regular file"},
		{"file of a device", `file("/dev/zero")`, "not a regular file"},
		{"file too large", `file("big")`, "too large"},
		{"range too long", `join(",", range(100000))`, "more than 1024 numbers"},
		{"range too long with a step", `join(",", range(0, 1e9, 2))`, "more than 1024 numbers"},
		{"indent too wide", `indent(99999999, "a\nb")`, "at most 1024 spaces"},
		{"setproduct", `jsonencode(setproduct([1], [2]))`, "no function named"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(dir, "f.hcl")
			src := "job \"a\" {\n  run {\n    command = [\"echo\", " + tc.expr + "]\n  }\n}\n"
			if err := os.WriteFile(p, []byte(src), 0o600); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			_, diags := Load([]string{p}, testOpts)
			if took := time.Since(start); took > 5*time.Second {
				t.Errorf("Load took %s", took)
			}
			if err := diags.Err(); err == nil || !strings.Contains(strings.ToLower(err.Error()), strings.ToLower(tc.want)) {
				t.Errorf("diagnostics %v, want one saying %q", err, tc.want)
			}
		})
	}
	// Within the bounds they work.
	p := filepath.Join(dir, "ok.hcl")
	src := "job \"a\" {\n  run {\n    command = [\"echo\", join(\",\", range(3)), indent(2, \"a\\nb\")]\n  }\n}\n"
	if err := os.WriteFile(p, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, diags := Load([]string{p}, testOpts); diags.HasErrors() {
		t.Errorf("range(3) and indent(2): %v", diags.Err())
	}
}

// length counts a string's characters, as Terraform's does: a validation
// such as length(var.name) > 0 is common.
func TestLength(t *testing.T) {
	for expr, want := range map[string]string{
		`length("héllo")`:            "5",
		`length(["a", "b"])`:         "2",
		`length({ a = 1, b = 2 })`:   "2",
		`length(toset(["a", "a"]))`:  "1",
		`length(tomap({ a = "x" }))`: "1",
		`length("")`:                 "0",
	} {
		p := filepath.Join(t.TempDir(), "f.hcl")
		src := "job \"a\" {\n  run {\n    command = [\"echo\", tostring(" + expr + ")]\n  }\n}\n"
		if err := os.WriteFile(p, []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg, diags := Load([]string{p}, testOpts)
		if diags.HasErrors() {
			t.Errorf("%s: %v", expr, diags.Err())
			continue
		}
		if got := argv(t, cfg, "a")[1]; got != want {
			t.Errorf("%s = %s, want %s", expr, got, want)
		}
	}
	p := filepath.Join(t.TempDir(), "f.hcl")
	if err := os.WriteFile(p, []byte("job \"a\" {\n  run {\n    command = [\"echo\", tostring(length(true))]\n  }\n}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, diags := Load([]string{p}, testOpts); !diags.HasErrors() {
		t.Error("length(true) was accepted")
	}
}
