package systest

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestRedact runs an agent whose every store is down, with a secret in
// every secret attribute of every provider type, in api_token and in
// webhooks, and looks for the secrets wherever an operator (or anyone who
// can reach the unauthenticated GET endpoints) reads: the agent's debug
// log, GET /v1/jobs, `electd status`, `electd leases` and `electd check`.
// "c4n4ry" marks every secret part and nothing else.
func TestRedact(t *testing.T) {
	// A receiver that answers 500, so that each delivery is retried.
	var hits atomic.Int32
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.WriteHeader(http.StatusInternalServerError)
	}))
	defer hook.Close()
	hookHost := strings.TrimPrefix(hook.URL, "http://")

	const sig = "c4n4ry-sig+/="
	secrets := map[string]string{
		"T_API_TOKEN":   "c4n4ry-api-token",
		"T_PG_URL":      "postgres://electd:c4n4ry-pg-url@127.0.0.1:1/electd?sslmode=disable&connect_timeout=1",
		"T_PG_KV":       "host=127.0.0.1 port=1 user=electd password='c4n4ry pg kv' dbname=electd sslmode=disable connect_timeout=1",
		"T_MYSQL":       "electd:c4n4ry-mysql@tcp(127.0.0.1:1)/electd?timeout=1s",
		"T_MONGO":       "mongodb://electd:c4n4ry-mongo@127.0.0.1:1/?serverSelectionTimeoutMS=500&connectTimeoutMS=500",
		"T_REDIS":       "c4n4ry-redis",
		"T_ETCD":        "c4n4ry-etcd",
		"T_SAS":         "sv=2022-11-02&ss=b&srt=co&sp=rwdlac&se=2099-01-01T00:00:00Z&sig=" + url.QueryEscape(sig),
		"T_ACCOUNT_URL": "http://127.0.0.1:1/devstoreaccount1?sv=2022-11-02&sp=rwdlac&sig=c4n4ry-url-sig",
		"T_CONN_KEY":    "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=c4n4ryKey+/abc==;BlobEndpoint=http://127.0.0.1:1/devstoreaccount1;",
		"T_CONN_SAS":    "BlobEndpoint=http://127.0.0.1:1/devstoreaccount1;SharedAccessSignature=sv=2022-11-02&sp=rwdlac&sig=c4n4ry-conn-sig",
		"T_HOOK_SECRET": "c4n4ry-hook-secret",
		"T_HOOK_HEADER": "Bearer c4n4ry-hook-header",
		// The receiver answers 500; nothing listens on port 1. Upper-case
		// schemes are valid URLs, which net/http lower-cases in its errors.
		"T_HOOK_500":     "HTTP://hookuser:c4n4ry-hook-pass@" + hookHost + "/c4n4ry-hook-path?token=c4n4ry-hook-token",
		"T_HOOK_REFUSED": "HTTP://hookuser:c4n4ry-hook-pass@127.0.0.1:1/c4n4ry-hook-path?token=c4n4ry-hook-token",
		// Read by the configuration a reload brings.
		"T_RELOAD_SAS": "sv=2022-11-02&sp=rwdlac&sig=c4n4ry-reload-sig",
	}
	for k, v := range secrets {
		t.Setenv(k, v)
	}
	t.Setenv("DATASTORE_EMULATOR_HOST", "127.0.0.1:1")

	dir := t.TempDir()
	addr := freeLoopback(t)
	providers := []struct{ ref, block string }{
		// First: electd leases asks the stores in this order within its
		// -timeout, and the Azure SDK's errors quote the request URL.
		{"azure_blob.sas", `provider "azure_blob" "sas" {
  account_url = "http://127.0.0.1:1/devstoreaccount1"
  sas_token   = env("T_SAS")
}`},
		{"azure_blob.url_query", `provider "azure_blob" "url_query" {
  account_url = env("T_ACCOUNT_URL")
}`},
		{"azure_blob.key", `provider "azure_blob" "key" {
  connection_string = env("T_CONN_KEY")
}`},
		{"azure_blob.conn_sas", `provider "azure_blob" "conn_sas" {
  connection_string = env("T_CONN_SAS")
}`},
		{"sql.pg_url", `provider "sql" "pg_url" {
  driver = "postgres"
  dsn    = env("T_PG_URL")
}`},
		{"sql.pg_kv", `provider "sql" "pg_kv" {
  driver = "postgres"
  dsn    = env("T_PG_KV")
}`},
		{"sql.my", `provider "sql" "my" {
  driver = "mysql"
  dsn    = env("T_MYSQL")
}`},
		{"mongodb.m", `provider "mongodb" "m" {
  uri = env("T_MONGO")
}`},
		{"redis.r", `provider "redis" "r" {
  addresses = ["127.0.0.1:1"]
  username  = "electd"
  password  = env("T_REDIS")
}`},
		{"etcd.e", `provider "etcd" "e" {
  endpoints    = ["127.0.0.1:1"]
  username     = "electd"
  password     = env("T_ETCD")
  dial_timeout = "1s"
}`},
		{"datastore.d", `provider "datastore" "d" {
  project_id = "electd-test"
}`},
	}
	var body strings.Builder
	fmt.Fprintf(&body, `agent {
  node_id          = "redact-node"
  listen           = %q
  api_token        = env("T_API_TOKEN")
  log_level        = "debug"
  shutdown_timeout = "10s"
}
provider "sql" "lite" {
  driver = "sqlite"
  dsn    = %q
}
`, addr, filepath.Join(dir, "leases.db"))
	var jobs []string
	for i, p := range providers {
		job := fmt.Sprintf("job%d", i)
		jobs = append(jobs, job)
		fmt.Fprintf(&body, "%s\njob %q {\n  provider = %s\n}\n", p.block, job, p.ref)
	}
	// The one job that is elected fires its webhooks, which fail.
	fmt.Fprintf(&body, `job "hooked" {
  provider = sql.lite
  on_elected {
    webhook {
      url          = env("T_HOOK_500")
      secret       = env("T_HOOK_SECRET")
      headers      = { Authorization = env("T_HOOK_HEADER") }
      max_attempts = 2
    }
    webhook {
      url          = env("T_HOOK_REFUSED")
      max_attempts = 2
    }
  }
}
`)
	cfg := filepath.Join(dir, "redact.hcl")
	if err := os.WriteFile(cfg, []byte(body.String()), 0o600); err != nil {
		t.Fatal(err)
	}

	n := startNode(t, "redact-node", cfg, addr)
	n.waitStatus("/readyz", http.StatusOK, 20*time.Second)
	// Every store's error has landed in last_error, and both webhooks gave
	// up after a retry.
	for _, job := range jobs {
		n.waitJob(job, job+" has a last_error", 30*time.Second, func(j jobStatus) bool { return j.LastError != "" })
	}
	deadline := time.Now().Add(30 * time.Second)
	for strings.Count(n.Log(), "webhook failed; giving up") < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("the webhooks did not fail twice each within 30s")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if hits.Load() < 2 {
		t.Errorf("the receiver got %d requests, want a retried delivery", hits.Load())
	}

	outputs := map[string]string{}
	_, outputs["GET /v1/jobs"] = n.call(http.MethodGet, "/v1/jobs", "")
	for _, job := range jobs {
		_, outputs["GET /v1/jobs/"+job] = n.call(http.MethodGet, "/v1/jobs/"+job, "")
	}
	for _, args := range [][]string{
		{"status", "-addr", addr},
		{"status", "-addr", addr, "-json"},
		{"leases", "-timeout", "20s", "-config", cfg},
		{"leases", "-timeout", "20s", "-json", "-config", cfg},
		{"check", cfg},
		{"check", "-json", cfg},
	} {
		stdout, stderr, _ := cli(t, nil, args...)
		outputs["electd "+strings.Join(args, " ")] = stdout + stderr
	}
	// check's diagnostics: functions that quote their argument.
	bad := filepath.Join(dir, "bad.hcl")
	if err := os.WriteFile(bad, []byte(`agent {
  log_level = parseint(env("T_API_TOKEN"), 10)
}
provider "redis" "r" {
  addresses = ["127.0.0.1:1"]
  db        = parseint(env("T_REDIS"), 10)
}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"check", bad}, {"check", "-json", bad}} {
		stdout, stderr, code := cli(t, nil, args...)
		if code != 1 {
			t.Errorf("electd %s: exit %d, want 1", strings.Join(args, " "), code)
		}
		outputs["electd "+strings.Join(args, " ")] = stdout + stderr
	}
	// A reload brings a new secret (the agent read its environment when
	// it started): it is masked from then on.
	reloaded := body.String() + `
provider "azure_blob" "reloaded" {
  account_url = "http://127.0.0.1:1/devstoreaccount1"
  sas_token   = env("T_RELOAD_SAS")
}
job "reloaded" {
  provider = azure_blob.reloaded
}
`
	if err := os.WriteFile(cfg, []byte(reloaded), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, out := n.call(http.MethodPost, "/v1/reload", secrets["T_API_TOKEN"]); code != http.StatusOK {
		t.Fatalf("POST /v1/reload: %d %s", code, out)
	}
	n.waitJob("reloaded", "the reloaded job has a last_error", 30*time.Second, func(j jobStatus) bool { return j.LastError != "" })
	_, outputs["GET /v1/jobs/reloaded"] = n.call(http.MethodGet, "/v1/jobs/reloaded", "")

	if !n.stop() {
		t.Errorf("the agent did not stop cleanly")
	}
	outputs["agent log"] = n.Log()

	for where, out := range outputs {
		for _, line := range strings.Split(out, "\n") {
			if strings.Contains(strings.ToLower(line), "c4n4ry") {
				t.Errorf("%s shows a secret: %s", where, strings.TrimSpace(line))
			}
		}
	}
	// The masking is seen, not merely the secrets missing: the Azure
	// errors quote the request URL with the SAS token's signature.
	for _, where := range []string{"GET /v1/jobs", "GET /v1/jobs/reloaded", "agent log", "electd status -addr " + addr,
		"electd leases -timeout 20s -config " + cfg, "electd check " + bad} {
		if !strings.Contains(outputs[where], "[redacted]") {
			t.Errorf("no [redacted] in %s:\n%s", where, outputs[where])
		}
	}
	if !strings.Contains(outputs["agent log"], "url=http://"+hookHost+" ") {
		t.Errorf("the webhook's scheme and host are not logged")
	}
}
