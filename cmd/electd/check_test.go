package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/electd/electd/config"
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

// TestCheckVars: -var and -var-file set the configuration's variables, the
// later winning; -no-env leaves a variable without a value unknown.
func TestCheckVars(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a.hcl")
	if err := os.WriteFile(path, []byte(`
variable "shards" {
  type = number
  validation {
    condition     = var.shards <= 8
    error_message = "At most 8 shards."
  }
}
job "c" {
  for_each = toset(range(var.shards))
}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	varFile := filepath.Join(dir, "v.electdvars")
	if err := os.WriteFile(varFile, []byte("shards = 9\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		code int
		out  string
	}{
		{[]string{"-var", "shards=3"}, 0, "Success! The configuration is valid (3 jobs, 1 provider).\n\njob \"c\" (for_each): 3 instances\n  c.0 c.1 c.2\n"},
		{[]string{"-var", "shards=12"}, 1, "At most 8 shards."},
		{[]string{"-var-file", varFile}, 1, "At most 8 shards."},
		{[]string{"-var-file", varFile, "-var", "shards=2"}, 0, "(2 jobs, 1 provider)"},
		{[]string{"-var", "shards=2", "-var-file", varFile}, 1, "set by the file " + varFile},
		{nil, 1, "No value for required variable"},
		{[]string{"-no-env"}, 0, "Instances not known"},
		{[]string{"-var", "shards"}, 2, "invalid value \"shards\" for flag -var: the argument must be NAME=VALUE"},
	} {
		var stdout, stderr bytes.Buffer
		code := cmdCheck(append(append([]string{}, tc.args...), path), &stdout, &stderr)
		if out := stdout.String() + stderr.String(); code != tc.code || !strings.Contains(out, tc.out) {
			t.Errorf("check %v: exit %d, want %d with %q:\n%s", tc.args, code, tc.code, tc.out, out)
		}
	}
}

// TestCheckListsInstances: check names the instances each block with
// for_each expands to, in the order the agent runs them, and wraps a long
// list; blocks without for_each are not listed.
func TestCheckListsInstances(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a.hcl")
	if err := os.WriteFile(path, []byte(`
job "plain" {}
job "shard" {
  for_each = toset(range(16))
}
job "region" {
  for_each = { us = 1, eu = 2 }
}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if code := cmdCheck([]string{path}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d:\n%s", code, stderr.String())
	}
	want := `Success! The configuration is valid (19 jobs, 1 provider).

job "shard" (for_each): 16 instances
  shard.0 shard.1 shard.2 shard.3 shard.4 shard.5 shard.6 shard.7 shard.8 shard.9 shard.10 shard.11
  shard.12 shard.13 shard.14 shard.15

job "region" (for_each): 2 instances
  region.eu region.us
`
	if stdout.String() != want {
		t.Errorf("stdout:\n%s\nwant:\n%s", stdout.String(), want)
	}
}

// TestShardedConsumerExample: examples/sharded-consumer.hcl, with its
// variables given as its header says, is 16 instances that each get their
// own shard in every attribute; a queue URL that is not amqp:// fails its
// validation with the example's message (masked: the variable is
// sensitive); shards = 32 makes 32.
func TestShardedConsumerExample(t *testing.T) {
	const example = "../../examples/sharded-consumer.hcl"
	const url = "amqps://consumer:pw-not-shown@mq.internal/orders"
	t.Setenv("ELECTD_PG_DSN", "postgres://electd@db.internal/electd")
	var stdout, stderr bytes.Buffer
	if code := cmdCheck([]string{"-var", "queue_url=" + url, example}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d:\n%s", code, stderr.String())
	}
	if !strings.Contains(stdout.String(), "(16 jobs, 1 provider)") || !strings.Contains(stdout.String(), "sharded-consumer.00 ") || !strings.Contains(stdout.String(), " sharded-consumer.15\n") {
		t.Errorf("stdout:\n%s", stdout.String())
	}

	opts := loadOptions([]string{example})
	opts.Vars = []config.Var{{Name: "queue_url", Value: url}}
	cfg, diags := config.Load([]string{example}, opts)
	if diags.HasErrors() {
		t.Fatal(diags.Err())
	}
	if len(cfg.Jobs) != 16 {
		t.Fatalf("%d jobs, want 16", len(cfg.Jobs))
	}
	for i, j := range cfg.Jobs {
		key := fmt.Sprintf("%02d", i)
		if j.Name != "sharded-consumer."+key || j.Block != "sharded-consumer" || j.Key != key {
			t.Errorf("job %d is %q (block %q, key %q)", i, j.Name, j.Block, j.Key)
		}
		argv, err := j.Run.Command.Argv.Eval(config.Event{Token: 7})
		if err != nil {
			t.Fatal(err)
		}
		if got, want := strings.Join(argv, " "), "/usr/local/bin/consumer --queue "+url+" --shard "+key+" --shards 16 --fencing-token 7"; got != want {
			t.Errorf("%s: command %q, want %q", j.Name, got, want)
		}
		env, _ := j.Run.Command.Env.Eval(config.Event{})
		if env["SHARD"] != key {
			t.Errorf("%s: env %v", j.Name, env)
		}
		if want := fmt.Sprintf("http://127.0.0.1:%d/healthz", 9100+i); j.Health == nil || j.Health.HTTP != want {
			t.Errorf("%s: health %+v, want %s", j.Name, j.Health, want)
		}
	}
	if !slices.Contains(cfg.Secrets, url) {
		t.Error("the sensitive queue_url is not among the secrets")
	}

	stdout.Reset()
	stderr.Reset()
	if code := cmdCheck([]string{"-var", "queue_url=http://pw-not-shown@mq", example}, &stdout, &stderr); code != 1 ||
		!strings.Contains(stderr.String(), "The queue_url must be an amqp:// or amqps:// URL.") || strings.Contains(stderr.String(), "pw-not-shown") {
		t.Errorf("a queue_url that is not amqp: exit %d\n%s", code, stderr.String())
	}
	stdout.Reset()
	stderr.Reset()
	if code := cmdCheck([]string{"-var", "queue_url=" + url, "-var", "shards=32", example}, &stdout, &stderr); code != 0 || !strings.Contains(stdout.String(), "(32 jobs, 1 provider)") {
		t.Errorf("shards=32: exit %d\n%s%s", code, stdout.String(), stderr.String())
	}
}
