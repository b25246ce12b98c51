package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/electd/electd/providers/azureblob"
	"github.com/electd/electd/providers/datastore"
	"github.com/electd/electd/providers/etcd"
	"github.com/electd/electd/providers/mongodb"
	"github.com/electd/electd/providers/redis"
	sqlprovider "github.com/electd/electd/providers/sql"
)

// setTestEnv sets the variables the fixtures read and makes sure
// ELECTD_TEST_UNSET really is unset.
func setTestEnv(t *testing.T) {
	t.Helper()
	t.Setenv("ELECTD_TEST_TOKEN", "tok-123")
	t.Setenv("ELECTD_TEST_DSN", "postgres://u:pw@db/electd")
	t.Setenv("ELECTD_TEST_SECRET", "hmac-key")
	t.Setenv("ELECTD_TEST_UNSET", "")
	os.Unsetenv("ELECTD_TEST_UNSET")
}

var markerRe = regexp.MustCompile(`#\s*(ERROR|WARNING):\s*([^#]*[^#\s])`)

type marker struct {
	severity string
	file     string
	line     int
	summary  string
}

func (m marker) String() string {
	return fmt.Sprintf("%s:%d: %s: %s", filepath.Base(m.file), m.line, m.severity, m.summary)
}

// markers reads the "# ERROR: summary" comments of the *.hcl and
// *.auto.electdvars files at path.
func markers(t *testing.T, path string) []string {
	t.Helper()
	files := []string{path}
	if info, err := os.Stat(path); err == nil && info.IsDir() {
		files, _ = filepath.Glob(filepath.Join(path, "*.hcl"))
		vars, _ := filepath.Glob(filepath.Join(path, "*"+AutoVarsSuffix))
		files = append(files, vars...)
	}
	var out []string
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(src), "\n") {
			for _, m := range markerRe.FindAllStringSubmatch(line, -1) {
				out = append(out, marker{strings.ToLower(m[1]), f, i + 1, m[2]}.String())
			}
		}
	}
	sort.Strings(out)
	return out
}

func got(diags *Diagnostics) []string {
	var out []string
	for _, d := range diags.All() {
		sev := "error"
		if d.Severity == hcl.DiagWarning {
			sev = "warning"
		}
		if d.Subject == nil {
			out = append(out, fmt.Sprintf("?: %s: %s (%s)", sev, d.Summary, d.Detail))
			continue
		}
		out = append(out, marker{sev, d.Subject.Filename, d.Subject.Start.Line, d.Summary}.String())
	}
	sort.Strings(out)
	return out
}

// TestLoadErrors loads every fixture in testdata/errors (files, and
// directories read as a whole) and wants exactly the diagnostics marked in
// them, on the lines marked.
func TestLoadErrors(t *testing.T) {
	setTestEnv(t)
	entries, err := os.ReadDir("testdata/errors")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range entries {
		path := filepath.Join("testdata/errors", e.Name())
		t.Run(e.Name(), func(t *testing.T) {
			want := markers(t, path)
			if len(want) == 0 {
				t.Fatal("fixture has no # ERROR: markers")
			}
			cfg, diags := Load([]string{path}, noSwitchOpts)
			if !diags.HasErrors() || cfg != nil {
				t.Errorf("Load succeeded, want errors")
			}
			if g := got(diags); strings.Join(g, "\n") != strings.Join(want, "\n") {
				var buf bytes.Buffer
				diags.WriteText(&buf)
				t.Errorf("diagnostics:\n got: %s\nwant: %s\n\n%s", strings.Join(g, "\n      "), strings.Join(want, "\n      "), buf.String())
			}
			for _, d := range diags.All() {
				if d.Detail == "" || !strings.HasSuffix(d.Detail, ".") {
					t.Errorf("%s: detail should be whole sentences: %q", d.Summary, d.Detail)
				}
			}
		})
		n++
	}
	if n < 40 {
		t.Errorf("only %d error fixtures, want at least 40", n)
	}
}

func load(t *testing.T, paths ...string) *Config {
	t.Helper()
	cfg, diags := Load(paths, testOpts)
	if diags.HasErrors() {
		var buf bytes.Buffer
		diags.WriteText(&buf)
		t.Fatalf("Load(%v):\n%s", paths, buf.String())
	}
	return cfg
}

func job(t *testing.T, cfg *Config, name string) Job {
	t.Helper()
	for _, j := range cfg.Jobs {
		if j.Name == name {
			return j
		}
	}
	t.Fatalf("no job %q", name)
	return Job{}
}

var sampleEvent = Event{
	Type:           EventElected,
	Job:            "billing-sync",
	Node:           "web-1",
	Leader:         "web-1",
	PreviousLeader: "web-2",
	Token:          42,
	Time:           time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
}

func evalList(t *testing.T, s StringList) []string {
	t.Helper()
	v, err := s.Eval(sampleEvent)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func evalMap(t *testing.T, s StringMap) map[string]string {
	t.Helper()
	v, err := s.Eval(sampleEvent)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func evalString(t *testing.T, s String) string {
	t.Helper()
	v, err := s.Eval(sampleEvent)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func eq(t *testing.T, what string, got, want any) {
	t.Helper()
	g, _ := json.Marshal(got)
	w, _ := json.Marshal(want)
	if !bytes.Equal(g, w) {
		t.Errorf("%s = %s, want %s", what, g, w)
	}
}

func TestLoadValid(t *testing.T) {
	setTestEnv(t)
	tests := []struct {
		name  string
		paths []string
		check func(t *testing.T, cfg *Config)
	}{
		{
			name:  "full job on postgres",
			paths: []string{"testdata/valid/full.hcl"},
			check: func(t *testing.T, cfg *Config) {
				eq(t, "agent", cfg.Agent, Agent{NodeID: "web-1", Listen: "0.0.0.0:8790", APIToken: "tok-123", LogLevel: "debug", LogFormat: "json", ShutdownTimeout: 45 * time.Second, Balance: true})
				eq(t, "providers", cfg.Providers, []Provider{{Type: "sql", Name: "main", Settings: &sqlprovider.Settings{Driver: "postgres", DSN: "postgres://u:pw@db/electd", Table: "electd_leases"}}})
				j := job(t, cfg, "billing-sync")
				eq(t, "provider", j.Provider, "sql.main")
				eq(t, "timings", []time.Duration{j.TTL, j.RenewEvery, j.RetryEvery}, []time.Duration{30 * time.Second, 5 * time.Second, 3 * time.Second})
				if j.Run == nil || j.Task != nil {
					t.Fatalf("run %v task %v", j.Run, j.Task)
				}
				eq(t, "argv", evalList(t, j.Run.Argv), []string{"/usr/local/bin/billing-sync", "--token", "42", "ELECTED"})
				eq(t, "env", evalMap(t, j.Run.Env), map[string]string{"REGION": "eu", "JOB": "billing-sync"})
				eq(t, "dir", evalString(t, j.Run.Dir), "/srv/billing-sync")
				eq(t, "run", []any{j.Run.StopSignal, j.Run.StopTimeout, j.Run.Restart, j.Run.RestartWait}, []any{syscall.SIGINT, 10 * time.Second, "always", 3 * time.Second})
				var kinds []string
				for _, a := range j.OnElected {
					kinds = append(kinds, a.Kind)
				}
				eq(t, "on_elected order", kinds, []string{"exec", "webhook", "exec"})
				eq(t, "exec argv", evalList(t, j.OnElected[0].Exec.Argv), []string{"logger", "electd: billing-sync elected on web-1"})
				eq(t, "exec timeouts", []time.Duration{j.OnElected[0].Exec.Timeout, j.OnElected[2].Exec.Timeout}, []time.Duration{60 * time.Second, 2 * time.Second})
				wh := j.OnElected[1].Webhook
				eq(t, "webhook defaults", []any{wh.Timeout, wh.MaxAttempts, wh.Body.IsSet(), wh.Secret}, []any{10 * time.Second, 5, false, ""})
				eq(t, "demoted secret", j.OnDemoted[0].Webhook.Secret, "hmac-key")
				lc := j.OnLeaderChange[0].Webhook
				eq(t, "url", evalString(t, lc.URL), "https://hooks.example.com/billing-sync")
				eq(t, "body", evalString(t, lc.Body), `{"previous":"web-2","text":"web-1 now leads billing-sync (token 42)"}`)
				eq(t, "headers", evalMap(t, lc.Headers), map[string]string{"X-Team": "ops", "X-Time": "2026-01-02T03:04:05Z"})
				eq(t, "webhook", []any{lc.Timeout, lc.MaxAttempts, lc.CAFile}, []any{5 * time.Second, 3, "/etc/ssl/hooks.pem"})
				if len(j.Fingerprint) != 64 {
					t.Errorf("fingerprint %q", j.Fingerprint)
				}
			},
		},
		{
			name:  "every provider type with defaults",
			paths: []string{"testdata/valid/providers.hcl"},
			check: func(t *testing.T, cfg *Config) {
				eq(t, "providers", cfg.Providers, []Provider{
					{Type: "sql", Name: "lite", Settings: &sqlprovider.Settings{Driver: "sqlite", DSN: "/var/lib/electd/leases.db", Table: "electd_leases"}},
					{Type: "redis", Name: "r", Settings: &redis.Settings{Addresses: []string{"10.0.0.1:6379"}, Prefix: "electd:"}},
					{Type: "mongodb", Name: "m", Settings: &mongodb.Settings{URI: "mongodb://localhost:27017", Database: "electd", Collection: "leases", WriteConcern: "majority"}},
					{Type: "azure_blob", Name: "a", Settings: &azureblob.Settings{AccountURL: "https://acct.blob.core.windows.net", Container: "electd-leases"}},
					{Type: "datastore", Name: "d", Settings: &datastore.Settings{ProjectID: "my-project", Kind: "ElectdLease"}},
					{Type: "etcd", Name: "e", Settings: &etcd.Settings{Endpoints: []string{"127.0.0.1:2379", "127.0.0.2:2379"}, Prefix: "/electd/", DialTimeout: 5 * time.Second}},
				})
				var refs []string
				for _, j := range cfg.Jobs {
					refs = append(refs, j.Name+"="+j.Provider)
					if j.Mode != ModeLeader || j.TTL != DefaultTTL || j.RenewEvery != DefaultRenewEvery || j.RetryEvery != DefaultRetryEvery {
						t.Errorf("job %s defaults: %+v", j.Name, j)
					}
				}
				eq(t, "refs", refs, []string{"on-sql=sql.lite", "on-redis=redis.r", "on-mongodb=mongodb.m", "on-azure=azure_blob.a", "on-datastore=datastore.d", "on-etcd=etcd.e"})
				eq(t, "agent defaults", []any{cfg.Agent.Listen, cfg.Agent.LogLevel, cfg.Agent.LogFormat, cfg.Agent.ShutdownTimeout}, []any{"127.0.0.1:8790", "info", "text", 30 * time.Second})
				if host, _ := os.Hostname(); cfg.Agent.NodeID != host {
					t.Errorf("default node_id %q, want the host name %q", cfg.Agent.NodeID, host)
				}
			},
		},
		{
			name:  "every provider attribute set",
			paths: []string{"testdata/valid/providers_set.hcl"},
			check: func(t *testing.T, cfg *Config) {
				eq(t, "providers", cfg.Providers, []Provider{
					{Type: "sql", Name: "my", Settings: &sqlprovider.Settings{Driver: "mysql", DSN: "user:pw@tcp(db:3306)/electd", Table: "Leases_2"}},
					{Type: "redis", Name: "r", Settings: &redis.Settings{Addresses: []string{"10.0.0.1:6379"}, Username: "electd", Password: "pw", DB: 3, TLS: true, Prefix: "x:"}},
					{Type: "mongodb", Name: "m", Settings: &mongodb.Settings{URI: "mongodb://db", Database: "db1", Collection: "c1", WriteConcern: "1"}},
					{Type: "azure_blob", Name: "a", Settings: &azureblob.Settings{ConnectionString: "DefaultEndpointsProtocol=https;AccountName=x;AccountKey=a2V5;EndpointSuffix=core.windows.net", Container: "cc1"}},
					{Type: "datastore", Name: "d", Settings: &datastore.Settings{ProjectID: "p", Namespace: "ns", Kind: "K", CredentialsFile: "testdata/valid/creds.json"}},
					{Type: "etcd", Name: "e", Settings: &etcd.Settings{Endpoints: []string{"e1:2379"}, Prefix: "/x/", Username: "u", Password: "p", DialTimeout: 2 * time.Second}},
				})
			},
		},
		{
			name:  "embedded default provider",
			paths: []string{"testdata/valid/default.hcl"},
			check: func(t *testing.T, cfg *Config) {
				eq(t, "providers", cfg.Providers, []Provider{{Type: "sql", Name: "default", Settings: &sqlprovider.Settings{Driver: "sqlite", DSN: "electd.db", Table: "electd_leases"}}})
				eq(t, "settings", cfg.Providers[0].Settings, &sqlprovider.Settings{Driver: "sqlite", DSN: "electd.db", Table: "electd_leases"})
				j := job(t, cfg, "quickstart")
				eq(t, "provider", j.Provider, "sql.default")
				eq(t, "run defaults", []any{j.Run.StopSignal, j.Run.StopTimeout, j.Run.Restart, j.Run.RestartWait}, []any{syscall.SIGTERM, 5 * time.Second, "on-failure", time.Second})
				eq(t, "dir unset", evalString(t, j.Run.Dir), "")
			},
		},
		{
			name:  "tasks and hooks only",
			paths: []string{"testdata/valid/task.hcl"},
			check: func(t *testing.T, cfg *Config) {
				j := job(t, cfg, "nightly-report")
				eq(t, "mode", j.Mode, ModeLock)
				eq(t, "task", []any{j.Task.ScheduleText, j.Task.Timeout, j.Task.StopSignal, j.Task.StopTimeout}, []any{"30 2 * * *", 10 * time.Minute, syscall.SIGQUIT, 2 * time.Second})
				from := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
				eq(t, "next slot", j.Task.Schedule.Next(from), time.Date(2026, 1, 2, 2, 30, 0, 0, time.UTC))
				eq(t, "argv", evalList(t, j.Task.Argv), []string{"/usr/local/bin/report", "--date", "2026-01-02T03:04:05Z"})
				e := job(t, cfg, "every-minute")
				eq(t, "every", e.Task.Schedule.Next(from), from.Add(time.Minute))
				eq(t, "task defaults", []any{e.Task.Timeout, e.Task.StopSignal, e.Task.StopTimeout, e.StopTimeout()}, []any{time.Duration(0), syscall.SIGTERM, 5 * time.Second, 5 * time.Second})
				eq(t, "random_delay", e.Task.RandomDelay, 20*time.Second)
				eq(t, "task hooks", []any{len(e.OnTaskFailed), len(e.OnTaskSucceeded), e.OnTaskSucceeded[0].Kind}, []any{1, 1, ActionWebhook})
				slot := time.Date(2026, 1, 2, 2, 30, 0, 0, time.UTC)
				argv, err := e.OnTaskFailed[0].Exec.Argv.Eval(Event{Type: EventTaskFailed, Job: "every-minute",
					Run: &TaskRunEvent{Slot: slot, ExitCode: 3, Result: "failed"}})
				eq(t, "task hook argv", []any{argv, err}, []any{[]string{"page", "every-minute failed 3 2026-01-02T02:30:00Z"}, error(nil)})
				h := job(t, cfg, "hooks-only")
				eq(t, "no work", []any{h.Run == nil, h.Task == nil, h.StopTimeout()}, []any{true, true, time.Duration(0)})
				eq(t, "hook argv", evalList(t, h.OnLeaderChange[0].Exec.Argv), []string{"logger", "new", "leader", "web-1"})
			},
		},
		{
			name:  "functions",
			paths: []string{"testdata/valid/functions.hcl"},
			check: func(t *testing.T, cfg *Config) {
				eq(t, "settings", cfg.Providers[0].Settings, &sqlprovider.Settings{Driver: "sqlite", DSN: "/tmp/electd-test.db", Table: "fallback_table"})
				j := job(t, cfg, "fn")
				eq(t, "ttl", []time.Duration{j.TTL, j.RenewEvery}, []time.Duration{20 * time.Second, 5 * time.Second})
				eq(t, "argv", evalList(t, j.Run.Argv), []string{"a", "B", "C"})
				eq(t, "env", evalMap(t, j.Run.Env), map[string]string{"A": "1", "B": "2"})
			},
		},
		{
			name:  "JSON syntax",
			paths: []string{"testdata/valid/config.hcl.json"},
			check: func(t *testing.T, cfg *Config) {
				j := job(t, cfg, "from-json")
				eq(t, "provider", j.Provider, "sql.j")
				eq(t, "ttl", j.TTL, 20*time.Second)
				eq(t, "argv", evalList(t, j.Run.Argv), []string{"echo", "billing-sync"})
				eq(t, "signal", j.Run.StopSignal, syscall.SIGTERM)
				eq(t, "hooks", len(j.OnElected), 2)
				eq(t, "attempts", []int{j.OnElected[0].Webhook.MaxAttempts, j.OnElected[1].Webhook.MaxAttempts}, []int{1, 5})
				eq(t, "url", evalString(t, j.OnElected[1].Webhook.URL), "https://b.example.com/web-1")
			},
		},
		{
			name:  "directory of several files",
			paths: []string{"testdata/valid/multi"},
			check: func(t *testing.T, cfg *Config) {
				eq(t, "node", cfg.Agent.NodeID, "n1")
				eq(t, "providers", len(cfg.Providers), 1)
				var names []string
				for _, j := range cfg.Jobs {
					names = append(names, j.Name+"="+j.Provider)
				}
				eq(t, "jobs", names, []string{"one=sql.main", "two=sql.main"})
				eq(t, "schedule", job(t, cfg, "two").Task.ScheduleText, "@hourly")
			},
		},
		{
			name:  "several paths merge",
			paths: []string{"testdata/valid/multi/a_providers.hcl", "testdata/valid/multi/b_jobs.hcl"},
			check: func(t *testing.T, cfg *Config) {
				eq(t, "jobs", len(cfg.Jobs), 1)
				eq(t, "provider", cfg.Jobs[0].Provider, "sql.main")
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.check(t, load(t, tt.paths...))
		})
	}
}

func TestWarningsDoNotFail(t *testing.T) {
	path := "testdata/valid/redlock.hcl"
	cfg, diags := Load([]string{path}, testOpts)
	if diags.HasErrors() || cfg == nil {
		t.Fatalf("errors: %v", diags.Errs())
	}
	eq(t, "diagnostics", got(diags), markers(t, path))
	eq(t, "addresses", len(cfg.Providers[0].Settings.(*redis.Settings).Addresses), 3)
}

// TestClusterWarnings: the settings of a clustered store that leave leases
// unsafe or without fault tolerance are warnings, on the attribute, and the
// same stores set up safely have none.
func TestClusterWarnings(t *testing.T) {
	path := "testdata/valid/cluster_warnings.hcl"
	cfg, diags := Load([]string{path}, testOpts)
	if diags.HasErrors() || cfg == nil {
		t.Fatalf("errors: %v", diags.Errs())
	}
	eq(t, "diagnostics", got(diags), markers(t, path))
	for _, d := range diags.All() {
		if strings.Contains(d.Detail, "db1") || strings.Contains(d.Detail, "electd@") {
			t.Errorf("%s: the detail repeats the DSN, which may hold a secret: %q", d.Summary, d.Detail)
		}
	}
}

// TestSecretsNeverPrinted: values read from the environment must not show
// in check's text or JSON output, even when the attributes they feed are
// wrong.
func TestSecretsNeverPrinted(t *testing.T) {
	const secret = "s3cr3t-xyz"
	t.Setenv("ELECTD_TEST_DSN", secret)
	t.Setenv("ELECTD_TEST_SECRET", secret)
	t.Setenv("ELECTD_TEST_URL", "ftp://"+secret+"@example.com/")
	dir := t.TempDir()
	src := `
agent {
  listen    = "0.0.0.0:1"
  log_level = env("ELECTD_TEST_SECRET")
}
provider "sql" "main" {
  driver = env("ELECTD_TEST_SECRET")
  dsn    = env("ELECTD_TEST_DSN")
  table  = env("ELECTD_TEST_SECRET")
}
provider "redis" "r" {
  addresses = [env("ELECTD_TEST_SECRET"), "x"]
  password  = env("ELECTD_TEST_SECRET")
}
job "a" {
  provider = sql.main
  ttl      = env("ELECTD_TEST_SECRET")
  mode     = env("ELECTD_TEST_SECRET")
  run {
    command     = env("ELECTD_TEST_SECRET")
    stop_signal = env("ELECTD_TEST_SECRET")
    restart     = env("ELECTD_TEST_SECRET")
  }
  on_elected {
    webhook {
      url          = env("ELECTD_TEST_URL")
      secret       = env("ELECTD_TEST_SECRET")
      headers      = { Authorization = env("ELECTD_TEST_SECRET") }
      max_attempts = env("ELECTD_TEST_SECRET")
    }
  }
}
`
	path := filepath.Join(dir, "secret.hcl")
	if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	_, diags := Load([]string{path}, testOpts)
	if e, _ := diags.Count(); e < 8 {
		t.Fatalf("want many errors, got %d: %v", e, diags.Errs())
	}
	var text, js bytes.Buffer
	if err := diags.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if err := diags.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	for name, out := range map[string]string{"text": text.String(), "json": js.String(), "errs": fmt.Sprint(diags.Errs())} {
		if strings.Contains(out, secret) {
			t.Errorf("%s output contains the secret:\n%s", name, out)
		}
	}
}

func TestWriteJSON(t *testing.T) {
	_, diags := Load([]string{"testdata/errors/many.hcl"}, testOpts)
	var buf bytes.Buffer
	if err := diags.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	var out struct {
		FormatVersion string `json:"format_version"`
		Valid         bool   `json:"valid"`
		ErrorCount    int    `json:"error_count"`
		WarningCount  int    `json:"warning_count"`
		Diagnostics   []struct {
			Severity string
			Summary  string
			Detail   string
			Range    struct {
				Filename string
				Start    struct{ Line, Column, Byte int }
				End      struct{ Line, Column, Byte int }
			}
			Snippet struct {
				Context              *string
				Code                 string
				StartLine            int `json:"start_line"`
				HighlightStartOffset int `json:"highlight_start_offset"`
				HighlightEndOffset   int `json:"highlight_end_offset"`
				Values               []any
			}
		}
	}
	if err := json.Unmarshal(buf.Bytes(), &out); err != nil {
		t.Fatalf("%v\n%s", err, buf.String())
	}
	if out.FormatVersion != "1.0" || out.Valid || out.ErrorCount != 4 || out.WarningCount != 0 || len(out.Diagnostics) != 4 {
		t.Fatalf("header: %+v", out)
	}
	for _, d := range out.Diagnostics {
		if d.Severity != "error" || d.Range.Filename != "testdata/errors/many.hcl" || d.Snippet.Values == nil {
			t.Errorf("diagnostic %+v", d)
		}
		hl := d.Snippet.Code[d.Snippet.HighlightStartOffset:d.Snippet.HighlightEndOffset]
		if d.Summary == "Invalid duration" && hl != `"1x"` {
			t.Errorf("highlight %q, want the duration", hl)
		}
		if d.Summary == "Invalid duration" && (d.Snippet.Context == nil || *d.Snippet.Context != `job "a"`) {
			t.Errorf("context %v", d.Snippet.Context)
		}
	}

	// A valid configuration: valid, and an empty list rather than null.
	_, diags = Load([]string{"testdata/valid/default.hcl"}, testOpts)
	buf.Reset()
	diags.WriteJSON(&buf)
	if !strings.Contains(buf.String(), `"valid": true`) || !strings.Contains(buf.String(), `"diagnostics": []`) {
		t.Errorf("valid output:\n%s", buf.String())
	}
}

func TestLoadPaths(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name    string
		paths   []string
		summary string
	}{
		{"missing file", []string{filepath.Join(dir, "nope.hcl")}, "Cannot read configuration"},
		{"empty directory", []string{dir}, "No configuration files"},
		{"no paths", nil, "No configuration given"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, diags := Load(tt.paths, testOpts)
			if cfg != nil || !diags.HasErrors() || diags.All()[0].Summary != tt.summary {
				t.Errorf("got %v", diags.Errs())
			}
			var buf bytes.Buffer
			if err := diags.WriteText(&buf); err != nil || buf.Len() == 0 {
				t.Errorf("WriteText: %v %q", err, buf.String())
			}
		})
	}
}

// TestFingerprint: stable across loads, and changed by the job's block, its
// provider and the environment it reads; not by another job.
func TestFingerprint(t *testing.T) {
	dir := t.TempDir()
	write := func(src string) string {
		p := filepath.Join(dir, "f.hcl")
		if err := os.WriteFile(p, []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	base := `
provider "sql" "main" {
  driver = "sqlite"
  dsn    = env("ELECTD_TEST_FP_DSN")
}
job "a" {
  run { command = ["x", env("ELECTD_TEST_FP_ARG", "d")] }
}
job "b" {
  run { command = ["y"] }
}
`
	fp := func(src, job string) string {
		cfg := load(t, write(src))
		for _, j := range cfg.Jobs {
			if j.Name == job {
				return j.Fingerprint
			}
		}
		t.Fatalf("no job %s", job)
		return ""
	}
	t.Setenv("ELECTD_TEST_FP_DSN", "one.db")
	t.Setenv("ELECTD_TEST_FP_ARG", "")
	os.Unsetenv("ELECTD_TEST_FP_ARG")
	a, b := fp(base, "a"), fp(base, "b")
	if a == b || a != fp(base, "a") {
		t.Fatalf("fingerprints not distinct or not stable: %s %s", a, b)
	}
	if fp(strings.Replace(base, `["y"]`, `["z"]`, 1), "a") != a {
		t.Error("changing job b changed job a")
	}
	if fp(strings.Replace(base, `["x"`, `["w"`, 1), "a") == a {
		t.Error("changing job a's block kept its fingerprint")
	}
	if fp(strings.Replace(base, `"sqlite"`, "\"sqlite\"\n  table = \"other\"", 1), "a") == a {
		t.Error("changing the provider kept the fingerprint")
	}
	t.Setenv("ELECTD_TEST_FP_DSN", "two.db")
	if fp(base, "a") == a {
		t.Error("changing the provider's env kept the fingerprint")
	}
	t.Setenv("ELECTD_TEST_FP_DSN", "one.db")
	t.Setenv("ELECTD_TEST_FP_ARG", "d")
	if fp(base, "a") == a {
		t.Error("setting an env var the job reads (to its default) kept the fingerprint")
	}
}

// TestGarbage: Load reports, never panics.
func TestGarbage(t *testing.T) {
	inputs := []string{
		"", "\x00\xff\xfe", "{", "job", `job "a" {`, `job "a" "b" {}`, `provider "sql" {}`, `provider {}`,
		`job "a" { run { command = [for x in event : x] } }`, `job "a" { provider = sql[0] }`,
		`job "a" { ttl = null }`, `job "a" { run { command = null } }`, `job "a" { run { command = [null] } }`,
		`job "a" { run { command = ["x"] env = { A = null } } }`, `job "a" { on_elected { webhook { url = null } } }`,
		`provider "redis" "r" { addresses = [null, "a", "b"] db = 1.5 }`, `job "a" { run { command = event } }`,
		`job "a" { run { command = ["x", event["job"], event[0]] } }`, `agent { listen = null }`,
		`job "a" { ttl = "${"` + "\n}", `job "a" { on_elected { webhook { url = "http://x" max_attempts = 1e100 } } }`,
		`job "a" { run { command = ["${event.token.x}"] } }`, `job "a" { on_elected { webhook { url = "%zz" } } }`,
	}
	// Nested one-line blocks do not parse; spread them out so the inputs
	// also reach decoding.
	for _, in := range inputs[:len(inputs):len(inputs)] {
		inputs = append(inputs, strings.NewReplacer("{ ", "{\n", " }", "\n}\n").Replace(in))
	}
	dir := t.TempDir()
	for i, in := range inputs {
		for _, ext := range []string{".hcl", ".hcl.json"} {
			p := filepath.Join(dir, fmt.Sprintf("g%d%s", i, ext))
			os.WriteFile(p, []byte(in), 0o600)
			_, diags := Load([]string{p}, testOpts)
			var buf bytes.Buffer
			diags.WriteText(&buf)
			diags.WriteJSON(&buf)
			for _, d := range diags.All() {
				if d.Summary == "Internal error" {
					t.Errorf("%q: %s", in, d.Detail)
				}
			}
			os.Remove(p)
		}
	}
}

func TestParseSignal(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want syscall.Signal
		ok   bool
	}{
		{"full name", "SIGTERM", syscall.SIGTERM, true},
		{"short name", "HUP", syscall.SIGHUP, true},
		{"lower case", "sigusr1", syscall.SIGUSR1, true},
		{"unknown", "SIGFOO", 0, false},
		{"number", "15", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := ParseSignal(tt.in)
			if got != tt.want || ok != tt.ok {
				t.Errorf("ParseSignal(%q) = %v, %v", tt.in, got, ok)
			}
		})
	}
}

// Placement and health are decoded as written, with their defaults.
func TestLoadPlacementAndHealth(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "fleet.hcl")
	src := `agent {
  tags = { zone = "eu-1", role = "batch" }
}
job "etl" {
  constraint    = { role = "batch" }
  prefer        = { zone = "eu-1" }
  prefer_settle = "10s"
  health {
    command   = ["/usr/local/bin/etl-ready", "--quick"]
    interval  = "5s"
    timeout   = "2s"
    failures  = 4
    successes = 1
  }
}
job "web" {
  health {
    http = "http://127.0.0.1:8080/healthz"
  }
}
job "plain" {}
`
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := load(t, path)
	if a := cfg.Agent; a.Tags["zone"] != "eu-1" || a.Tags["role"] != "batch" || len(a.Tags) != 2 || !a.Balance {
		t.Errorf("agent: tags %v balance %v; want the two tags and balance on by default", a.Tags, a.Balance)
	}
	etl, _ := cfg.ByName("etl")
	if etl.Constraint["role"] != "batch" || etl.Prefer["zone"] != "eu-1" || etl.PreferSettle != 10*time.Second {
		t.Errorf("etl placement: %v %v %s", etl.Constraint, etl.Prefer, etl.PreferSettle)
	}
	h := etl.Health
	if h == nil || h.Command == nil || h.HTTP != "" || h.Interval != 5*time.Second || h.Timeout != 2*time.Second || h.Failures != 4 || h.Successes != 1 {
		t.Fatalf("etl health: %+v", h)
	}
	if argv, err := h.Command.Argv.Eval(Event{}); err != nil || strings.Join(argv, " ") != "/usr/local/bin/etl-ready --quick" {
		t.Errorf("etl health command: %v %v", argv, err)
	}
	web, _ := cfg.ByName("web")
	if h := web.Health; h == nil || h.HTTP != "http://127.0.0.1:8080/healthz" || h.Command != nil ||
		h.Interval != DefaultHealthInterval || h.Timeout != DefaultHealthTimeout || h.Failures != DefaultHealthFailures || h.Successes != DefaultHealthSuccesses {
		t.Errorf("web health (defaults): %+v", h)
	}
	plain, _ := cfg.ByName("plain")
	if plain.Health != nil || plain.Constraint != nil || plain.Prefer != nil || plain.PreferSettle != DefaultPreferSettle {
		t.Errorf("plain job: %+v", plain)
	}
	off := filepath.Join(dir, "off.hcl")
	os.WriteFile(off, []byte("agent {\n  balance = false\n}\n"), 0o644)
	if load(t, off).Agent.Balance {
		t.Error("balance = false is not kept")
	}
}
