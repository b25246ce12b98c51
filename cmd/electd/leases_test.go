package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/electd/electd/config"
	"github.com/electd/electd/providers"
)

// electd leases with no -config on a host without /etc/electd says what to
// give it, not only that a path is missing.
func TestLeasesWithoutConfig(t *testing.T) {
	if _, err := os.Stat(defaultConfigDir); err == nil {
		t.Skipf("%s exists on this host", defaultConfigDir)
	}
	var out, errs bytes.Buffer
	if code := run([]string{"leases"}, &out, &errs); code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	if got := errs.String(); !strings.Contains(got, "no configuration at /etc/electd") || !strings.Contains(got, "electd leases -config PATH") {
		t.Errorf("stderr %q does not say what to do", got)
	}
}

// A configuration reading a variable that only the service's environment
// file sets gets a hint to load that file; other problems do not.
func TestServiceEnvHint(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "a.hcl")
	if err := os.WriteFile(cfg, []byte(`provider "sql" "m" {
  driver = "postgres"
  dsn    = env("ELECTD_TEST_UNSET_DSN")
}
job "a" {
  provider = sql.m
  run { command = ["true"] }
}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Unsetenv("ELECTD_TEST_UNSET_DSN")
	_, diags := config.Load([]string{cfg}, loadOptions([]string{cfg}))
	if !diags.HasErrors() {
		t.Fatal("a configuration with an unset variable loaded")
	}
	envFile := filepath.Join(dir, "electd.env")
	if h := serviceEnvHint(diags, envFile); h != "" {
		t.Errorf("a hint without an environment file: %q", h)
	}
	if err := os.WriteFile(envFile, []byte("ELECTD_TEST_UNSET_DSN=postgres://x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if h := serviceEnvHint(diags, envFile); !strings.Contains(h, ". "+envFile+";") {
		t.Errorf("hint %q does not say how to load %s", h, envFile)
	}
	_, other := config.Load([]string{filepath.Join(dir, "missing.hcl")}, loadOptions([]string{cfg}))
	if h := serviceEnvHint(other, envFile); h != "" {
		t.Errorf("a hint for a missing file: %q", h)
	}
}

// The embedded default's file is where the configuration is (or
// $STATE_DIRECTORY), not where the command runs.
func TestStateDir(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "electd.hcl")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Chdir(t.TempDir())
	for _, tc := range []struct {
		name, env string
		paths     []string
		want      string
	}{
		{"a file", "", []string{file}, dir},
		{"a directory", "", []string{dir}, dir},
		{"relative", "", []string{"../" + filepath.Base(dir) + "/electd.hcl"}, filepath.Join(filepath.Dir(mustGetwd(t)), filepath.Base(dir))},
		{"the first of several", "", []string{dir, "/elsewhere"}, dir},
		{"the package's configuration", "", []string{"/etc/electd"}, "/var/lib/electd"},
		{"a file in the package's configuration", "", []string{"/etc/electd/electd.hcl"}, "/var/lib/electd"},
		{"no path: the package's", "", nil, "/var/lib/electd"},
		{"under systemd", "/var/lib/electd:/var/lib/other", []string{dir}, "/var/lib/electd"},
		{"a relative STATE_DIRECTORY is ignored", "state", []string{dir}, dir},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("STATE_DIRECTORY", tc.env)
			if got := stateDir(tc.paths); got != tc.want {
				t.Errorf("stateDir(%q) = %q, want %q", tc.paths, got, tc.want)
			}
		})
	}
}

func mustGetwd(t *testing.T) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return wd
}

// electd leases run from another directory finds a job held on the
// embedded default, and creates no database where there is none.
func TestLeasesEmbeddedDefaultFromAnywhere(t *testing.T) {
	t.Setenv("STATE_DIRECTORY", "")
	dir := t.TempDir()
	cfgFile := filepath.Join(dir, "electd.hcl")
	if err := os.WriteFile(cfgFile, []byte(`job "billing" {
  run { command = ["true"] }
}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	elsewhere := t.TempDir()
	t.Chdir(elsewhere)

	// No database yet: leases says so, and creates none.
	var out, errs bytes.Buffer
	if code := run([]string{"leases", "-config", cfgFile}, &out, &errs); code != 1 || !strings.Contains(out.String(), "no SQLite database at "+filepath.Join(dir, "electd.db")) {
		t.Errorf("leases without a database: exit %d, stdout %q, stderr %q", code, out.String(), errs.String())
	}
	for _, d := range []string{dir, elsewhere} {
		if ents, _ := os.ReadDir(d); len(ents) > 1 || (len(ents) == 1 && d == elsewhere) {
			t.Errorf("leases created files in %s: %v", d, ents)
		}
	}

	// A node takes the lease, as an agent run with this configuration would.
	cfg, diags := config.Load([]string{cfgFile}, loadOptions([]string{cfgFile}))
	if diags.HasErrors() {
		var b strings.Builder
		diags.WriteText(&b)
		t.Fatal(b.String())
	}
	spec, ok := cfg.Provider("sql.default")
	if !ok {
		t.Fatal("no sql.default")
	}
	p, err := spec.Settings.Open(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	l, err := p.Acquire(context.Background(), providers.AcquireRequest{Key: "billing", Holder: "web-1", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "electd.db")); err != nil {
		t.Fatalf("the agent's database is not beside the configuration: %v", err)
	}

	out.Reset()
	errs.Reset()
	if code := run([]string{"leases", "-json", "-config", cfgFile}, &out, &errs); code != 0 {
		t.Fatalf("leases: exit %d: %s %s", code, out.String(), errs.String())
	}
	var rows []struct {
		Job, Holder string
		Token       uint64
	}
	if err := json.Unmarshal(out.Bytes(), &rows); err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || rows[0].Holder != "web-1" || rows[0].Token != l.Token || l.Token == 0 {
		t.Errorf("leases from %s: %s, want billing held by web-1 with token %d", elsewhere, out.String(), l.Token)
	}
	if ents, _ := os.ReadDir(elsewhere); len(ents) != 0 {
		t.Errorf("leases created files in the working directory: %v", ents)
	}
}
