package config

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// A configuration whose every secret and setting comes from the
// environment: `check -no-env` validates it anywhere, plain check reports
// each unset variable on its line.
const fromEnv = `
agent {
  node_id   = env("NOENV_NODE")
  listen    = "0.0.0.0:8790"
  api_token = env("NOENV_TOKEN")
}
provider "sql" "pg" {
  driver = "postgres"
  dsn    = env("NOENV_PG_DSN")
}
provider "redis" "r" {
  addresses = [env("NOENV_REDIS")]
  password  = env("NOENV_REDIS_PW")
}
provider "azure_blob" "a" {
  connection_string = env("NOENV_AZURE")
}
provider "etcd" "e" {
  endpoints = split(",", env("NOENV_ETCD"))
}
job "sync" {
  provider = sql.pg
  ttl      = env("NOENV_TTL")
  run {
    command = ["/bin/sync", env("NOENV_ARG")]
  }
  on_elected {
    webhook {
      url    = env("NOENV_HOOK")
      secret = env("NOENV_HOOK_SECRET")
    }
  }
}
job "report" {
  provider = redis.r
  mode     = "lock"
  task {
    schedule = env("NOENV_SCHEDULE", "@every 10m")
    command  = ["/bin/report"]
  }
}
`

func TestNoEnv(t *testing.T) {
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "NOENV_") {
			t.Fatalf("the environment already has %s", kv)
		}
	}
	path := filepath.Join(t.TempDir(), "env.hcl")
	if err := os.WriteFile(path, []byte(fromEnv), 0o600); err != nil {
		t.Fatal(err)
	}

	t.Run("plain check reports every unset variable", func(t *testing.T) {
		_, diags := Load([]string{path}, testOpts)
		n := 0
		for _, d := range diags.All() {
			if d.Summary == "Environment variable not set" {
				n++
			}
		}
		// Every env() without a default: 11 of them.
		if n != 11 {
			var b strings.Builder
			diags.WriteText(&b)
			t.Errorf("%d unset-variable errors, want 11:\n%s", n, b.String())
		}
	})

	t.Run("-no-env passes", func(t *testing.T) {
		opts := testOpts
		opts.NoEnv = true
		_, diags := Load([]string{path}, opts)
		if diags.HasErrors() {
			var b strings.Builder
			diags.WriteText(&b)
			t.Fatalf("-no-env: %s", b.String())
		}
	})

	t.Run("-no-env ignores the environment and still judges what it knows", func(t *testing.T) {
		// A default is used even where the variable is set: the verdict
		// must not depend on the CI machine.
		t.Setenv("NOENV_SCHEDULE", "0 0 30 2 *")
		bad := strings.Replace(fromEnv, `"/bin/report"`, `"/bin/report"]
    timeout = "x"
    env     = ["not a map"`, 1)
		p := filepath.Join(t.TempDir(), "bad.hcl")
		if err := os.WriteFile(p, []byte(bad), 0o600); err != nil {
			t.Fatal(err)
		}
		opts := testOpts
		opts.NoEnv = true
		_, diags := Load([]string{p}, opts)
		var sums []string
		for _, d := range diags.All() {
			sums = append(sums, d.Summary)
		}
		sort.Strings(sums)
		if got := strings.Join(sums, "|"); got != "Incorrect attribute value type|Invalid duration" {
			t.Errorf("diagnostics %q, want the bad timeout and env only", got)
		}
	})
}

// A host name is case-insensitive: LOCALHOST is loopback, and the API may
// listen there without a token; any other name or address needs one.
func TestListenLoopback(t *testing.T) {
	for addr, loopback := range map[string]bool{
		"127.0.0.1:8790": true, "[::1]:8790": true, "localhost:8790": true, "LOCALHOST:8790": true, "127.1.2.3:1": true,
		"0.0.0.0:8790": false, ":8790": false, "10.0.0.1:8790": false, "[::]:8790": false, "web-1:8790": false,
	} {
		p := filepath.Join(t.TempDir(), "a.hcl")
		if err := os.WriteFile(p, []byte("agent {\n  listen = \""+addr+"\"\n}\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		_, diags := Load([]string{p}, testOpts)
		if refused := diags.HasErrors(); refused == loopback {
			t.Errorf("listen %q without api_token: refused %v, want %v (%v)", addr, refused, !loopback, diags.Err())
		}
	}
}
