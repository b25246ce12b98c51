package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/electd/electd/config"
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
	_, diags := config.Load([]string{cfg}, loadOptions())
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
	_, other := config.Load([]string{filepath.Join(dir, "missing.hcl")}, loadOptions())
	if h := serviceEnvHint(other, envFile); h != "" {
		t.Errorf("a hint for a missing file: %q", h)
	}
}
