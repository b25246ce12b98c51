package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -run Golden -update)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the output:\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

func TestCheckGolden(t *testing.T) {
	t.Setenv("ELECTD_GOLDEN_DSN", "postgres://user:hunter2@db/electd")
	tests := []struct {
		name   string
		args   []string
		code   int
		stdout string // golden file, or "" for none
		stderr string
	}{
		{"errors text", []string{"-config", "testdata/check_errors.hcl"}, 1, "", "check_errors.txt.golden"},
		{"errors json", []string{"-json", "-config", "testdata/check_errors.hcl"}, 1, "check_errors.json.golden", ""},
		{"warning text", []string{"testdata/check_warning.hcl"}, 0, "check_warning.stdout.golden", "check_warning.txt.golden"},
		{"warning json", []string{"-json", "testdata/check_warning.hcl"}, 0, "check_warning.json.golden", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := cmdCheck(tt.args, &stdout, &stderr); code != tt.code {
				t.Errorf("exit %d, want %d\n%s", code, tt.code, stderr.String())
			}
			for _, o := range []struct {
				file string
				buf  *bytes.Buffer
			}{{tt.stdout, &stdout}, {tt.stderr, &stderr}} {
				if o.file == "" {
					if o.buf.Len() != 0 {
						t.Errorf("unexpected output: %s", o.buf.String())
					}
					continue
				}
				if strings.Contains(o.buf.String(), "hunter2") {
					t.Errorf("output shows the DSN from the environment")
				}
				golden(t, o.file, o.buf.Bytes())
			}
		})
	}
}

func TestCheckJSONIsValid(t *testing.T) {
	dir := t.TempDir()
	broken := filepath.Join(dir, "broken.hcl")
	os.WriteFile(broken, []byte("job \"a\" {\n  ttl = \n"), 0o644)
	var stdout, stderr bytes.Buffer
	if code := cmdCheck([]string{"-json", "-config", broken}, &stdout, &stderr); code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	var out struct {
		Valid       bool              `json:"valid"`
		ErrorCount  int               `json:"error_count"`
		Diagnostics []json.RawMessage `json:"diagnostics"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, stdout.String())
	}
	if out.Valid || out.ErrorCount == 0 || len(out.Diagnostics) != out.ErrorCount {
		t.Errorf("got %+v", out)
	}
}

func TestCheckSuccess(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "a.hcl"), []byte("job \"a\" {\n  run { command = [\"x\"] }\n}\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "b.hcl"), []byte("job \"b\" {\n  run { command = [\"y\"] }\n}\n"), 0o644)
	var stdout, stderr bytes.Buffer
	if code := cmdCheck([]string{"-config", dir}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if want := "Success! The configuration is valid (2 jobs, 1 provider).\n"; stdout.String() != want || stderr.Len() != 0 {
		t.Errorf("stdout %q stderr %q", stdout.String(), stderr.String())
	}
	if code := cmdCheck([]string{"-config", filepath.Join(dir, "missing")}, &stdout, &stderr); code != 1 {
		t.Errorf("missing path: exit %d, want 1", code)
	}
	if code := cmdCheck([]string{"-nope"}, &stdout, &stderr); code != 2 {
		t.Errorf("bad flag: exit %d, want 2", code)
	}
}

// TestExamplesCheck: every shipped example is a valid configuration as CI
// sees it (`make check`): with -no-env, where the secrets the examples read
// with env() are unknown, whatever the machine's environment holds.
func TestExamplesCheck(t *testing.T) {
	files, _ := filepath.Glob("../../examples/*.hcl")
	if len(files) == 0 {
		t.Fatal("no examples/*.hcl found")
	}
	envRe := regexp.MustCompile(`env\(\s*"([A-Za-z_][A-Za-z0-9_]*)"\s*\)`)
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range envRe.FindAllStringSubmatch(string(src), -1) {
			t.Setenv(m[1], "") // restored after the test
			os.Unsetenv(m[1])
		}
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := cmdCheck([]string{"-no-env", "-config", f}, &stdout, &stderr); code != 0 {
				t.Errorf("electd check -no-env %s: exit %d\n%s", f, code, stderr.String())
			}
			// Without -no-env, the unset secrets are reported on their lines.
			if envRe.Match(src(t, f)) {
				stdout.Reset()
				stderr.Reset()
				if code := cmdCheck([]string{"-config", f}, &stdout, &stderr); code != 1 || !strings.Contains(stderr.String(), "Environment variable not set") {
					t.Errorf("electd check %s without the environment: exit %d, want 1 naming the unset variable\n%s", f, code, stderr.String())
				}
			}
		})
	}
}

func src(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
