package config

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// canaryConfig puts a secret read with env() or file() into every secret
// attribute of every provider type, the agent's api_token and a webhook's
// secret, headers and URL, each also invalid in some way, and passes
// secrets through functions that quote their argument when they fail. Every
// line with a `# problem` comment must get a diagnostic.
const canaryConfig = `
agent {
  listen    = "0.0.0.0:8790"
  api_token = env("T_API_TOKEN")                       # problem: a line break
  log_level = parseint(env("T_AGENT_FN"), 10)          # problem: not a number
}
provider "sql" "pg_url" {
  driver = "postgres"
  dsn    = env("T_PG_URL")                             # problem: bad port
}
provider "sql" "pg_kv" {
  driver = "postgres"
  dsn    = env("T_PG_KV")                              # problem: bad port
}
provider "sql" "my" {
  driver = "mysql"
  dsn    = env("T_MYSQL")                              # problem: bad timeout
}
provider "sql" "lite" {
  driver = "sqlite"
  dsn    = env("T_SQLITE")                             # problem: a line break
}
provider "sql" "fn" {
  driver = "sqlite"
  dsn    = "leases.db"
  table  = parseint(env("T_PG_URL"), 10)               # problem: not a number
}
provider "mongodb" "m" {
  uri = env("T_MONGO")                                 # problem: bad option
}
provider "redis" "r" {
  addresses = ["127.0.0.1:6379"]
  password  = env("T_REDIS")                           # problem: a line break
}
provider "redis" "fn" {
  addresses = ["127.0.0.1:6379"]
  db        = parseint(trimspace(file("redis.pw")), 10) # problem: not a number
}
provider "etcd" "e" {
  endpoints = ["127.0.0.1:2379"]
  password  = trimspace(file("etcd.pw"))               # problem: no username
}
provider "azure_blob" "sas" {
  account_url = "https://acct.blob.core.windows.net/"
  sas_token   = env("T_SAS")                           # problem: bad escape
}
provider "azure_blob" "url_query" {
  account_url = env("T_ACCOUNT_URL")                   # problem: a query and sas_token
  sas_token   = env("T_SAS_OK")
}
provider "azure_blob" "key" {
  connection_string = env("T_CONN_KEY")
  sas_token         = env("T_SAS_OK")                  # problem: with a connection string
}
provider "azure_blob" "conn_sas" {
  connection_string = env("T_CONN_SAS")
  container         = timeadd(env("T_CONN_SAS"), "1h") # problem: not a time
}
provider "datastore" "d" {
  project_id = regex(env("T_FN_REGEX"), "x")           # problem: regex quotes its pattern
}
job "j" {
  provider     = sql.lite
  ttl          = format("%s", env("T_FN_FORMAT"))      # problem: not a duration
  retry_every  = timeadd(trimspace(file("job.pw")), "1s") # problem: not a time
  on_elected {
    webhook {
      url          = env("T_HOOK_URL")                 # problem: not http
      secret       = env("T_HOOK_SECRET")              # problem: a line break
      headers      = { Authorization = "Bearer ${env("T_HOOK_HEADER")}", X = null } # problem: a null
      max_attempts = parseint(env("T_HOOK_HEADER"), 10) # problem: not a number
    }
  }
}
`

// canaries are the values the configuration reads. "c4n4ry" marks each
// secret part, and must appear nowhere in the output.
var canaries = map[string]string{
	"T_API_TOKEN":   "c4n4ry-api-token\n",
	"T_AGENT_FN":    "c4n4ry-agent-fn",
	"T_PG_URL":      "postgres://electd:c4n4ry-pg-url@db:notaport/electd",
	"T_PG_KV":       "host=db user=electd password=c4n4ry-pg-kv port=notaport",
	"T_MYSQL":       "electd:c4n4ry-mysql@tcp(db:3306)/electd?timeout=notaduration",
	"T_SQLITE":      "/var/lib/c4n4ry-sqlite.db\n",
	"T_MONGO":       "mongodb://electd:c4n4ry-mongo@db:27017/?connectTimeoutMS=notanumber",
	"T_REDIS":       "c4n4ry-redis-password\n",
	"T_SAS":         "sv=2022-11-02&sig=c4n4ry-sas%zz",
	"T_SAS_OK":      "sv=2022-11-02&sig=c4n4ry-sas-ok%2B%3D",
	"T_ACCOUNT_URL": "https://acct.blob.core.windows.net/?sv=2022-11-02&sig=c4n4ry-url-sig",
	"T_CONN_KEY":    "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=c4n4ry-account-key==;EndpointSuffix=core.windows.net",
	"T_CONN_SAS":    "BlobEndpoint=https://acct.blob.core.windows.net/;SharedAccessSignature=sv=2022-11-02&sig=c4n4ry-conn-sig",
	"T_FN_REGEX":    "[c4n4ry-regex",
	"T_FN_FORMAT":   "c4n4ry-format",
	"T_HOOK_URL":    "ftp://hookuser:c4n4ry-hook-pass@example.com/c4n4ry-hook-path?token=c4n4ry-hook-token",
	"T_HOOK_SECRET": "c4n4ry-hook-secret\n",
	"T_HOOK_HEADER": "c4n4ry-hook-header",
}

var canaryFiles = map[string]string{
	"redis.pw": "c4n4ry-redis-db\n",
	"etcd.pw":  "c4n4ry-etcd-password\n",
	"job.pw":   "c4n4ry-job-file\n",
}

func TestDiagnosticsMaskSecrets(t *testing.T) {
	for k, v := range canaries {
		t.Setenv(k, v)
	}
	dir := t.TempDir()
	for name, v := range canaryFiles {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(dir, "canary.hcl")
	if err := os.WriteFile(path, []byte(canaryConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	_, diags := Load([]string{path}, testOpts)

	// Every attribute fed a canary was judged, or the test would prove
	// nothing about it.
	lines := map[int]bool{}
	for _, d := range diags.All() {
		if d.Subject != nil {
			lines[d.Subject.Start.Line] = true
		}
	}
	for i, line := range strings.Split(canaryConfig, "\n") {
		if strings.Contains(line, "# problem") && !lines[i+1] {
			t.Errorf("no diagnostic on line %d: %s", i+1, strings.TrimSpace(line))
		}
	}

	var text, js bytes.Buffer
	if err := diags.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if err := diags.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	for name, out := range map[string]string{"text": text.String(), "json": js.String(), "errs": fmt.Sprint(diags.Errs())} {
		for _, l := range strings.Split(out, "\n") {
			if strings.Contains(strings.ToLower(l), "c4n4ry") {
				t.Errorf("%s output shows a secret: %s", name, strings.TrimSpace(l))
			}
		}
	}
	if t.Failed() {
		t.Logf("text output:\n%s", text.String())
	}
}

// Config.Secrets holds every secret the agent must mask in its log and API:
// secret attributes, the parts providers declare, and the webhook's secret,
// header values and URL parts known at load time.
func TestConfigSecrets(t *testing.T) {
	t.Setenv("T_HOOK_TOKEN", "hook-token-1")
	dir := t.TempDir()
	path := filepath.Join(dir, "secrets.hcl")
	src := `
agent {
  api_token = "api-token-1"
}
provider "sql" "pg" {
  driver = "postgres"
  dsn    = "postgres://electd:pg-pass-1@db/electd"
}
job "j" {
  on_elected {
    webhook {
      url     = "HTTPS://hookuser:hook-pass-1@hooks.example.com/services/T0/B0/hook-path-1?token=${env("T_HOOK_TOKEN")}"
      secret  = "hmac-key-1"
      headers = { Authorization = "Bearer header-1", X-Job = "job-${event.job}" }
    }
  }
}
`
	if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, diags := Load([]string{path}, testOpts)
	if diags.HasErrors() {
		t.Fatal(diags.Err())
	}
	for _, want := range []string{
		"api-token-1", "postgres://electd:pg-pass-1@db/electd", "pg-pass-1", "hmac-key-1", "Bearer header-1",
		"hookuser:hook-pass-1", "hook-pass-1", "/services/T0/B0/hook-path-1", "token=hook-token-1",
	} {
		if !slices.Contains(cfg.Secrets, want) {
			t.Errorf("Secrets %q do not hold %q", cfg.Secrets, want)
		}
	}
	for _, s := range cfg.Secrets {
		if strings.Contains(s, "hooks.example.com") || strings.HasPrefix(s, "job-") {
			t.Errorf("Secrets hold %q: the host is shown in logs, and a value that depends on the event is not known", s)
		}
	}
}
