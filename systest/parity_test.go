package systest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/electd/electd/internal/cluster"
)

// parityCase is one configuration given to both `electd check` and `electd
// run`. valid is the verdict both must give: a configuration check accepts is
// one run starts (READY=1), and one check refuses run refuses too.
type parityCase struct {
	name  string
	valid bool
	src   string                          // the configuration; %[1]s is a scratch directory
	setup func(t *testing.T, path string) // optional, after the file is written
	env   []string
}

const parityJob = `
job "a" {
  ttl         = "15s"
  renew_every = "4s"
}
`

// agentOff keeps parallel agents off each other's ports.
const agentOff = `
agent {
  listen = ""
}
`

func parityCases(t *testing.T) []parityCase {
	long := strings.Repeat("x", 300)
	return []parityCase{
		// Valid: one per store and connection form. Run starts without
		// reaching the store (a store that is down is not a start refusal).
		{name: "embedded default", valid: true, src: agentOff + parityJob},
		{name: "sqlite", valid: true, src: agentOff + `
provider "sql" "s" {
  driver = "sqlite"
  dsn    = "%[1]s/leases.db"
}` + parityJob},
		{name: "postgres url", valid: true, src: agentOff + `
provider "sql" "s" {
  driver = "postgres"
  dsn    = "postgres://electd:pw@127.0.0.1:1/electd?sslmode=disable"
  table  = "parity_leases"
}` + parityJob},
		{name: "postgres key=value", valid: true, src: agentOff + `
provider "sql" "s" {
  driver = "postgres"
  dsn    = "host=127.0.0.1 port=1 user=electd dbname=electd sslmode=disable"
}` + parityJob},
		{name: "mysql", valid: true, src: agentOff + `
provider "sql" "s" {
  driver = "mysql"
  dsn    = "electd:pw@tcp(127.0.0.1:1)/electd"
}` + parityJob},
		{name: "redis single", valid: true, src: agentOff + `
provider "redis" "r" {
  addresses = ["127.0.0.1:1"]
}` + parityJob},
		{name: "redis redlock", valid: true, src: agentOff + `
provider "redis" "r" {
  addresses = ["127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"]
}` + parityJob},
		{name: "mongodb", valid: true, src: agentOff + `
provider "mongodb" "m" {
  uri = "mongodb://electd:pw@127.0.0.1:1/?serverSelectionTimeoutMS=500&connectTimeoutMS=500"
}` + parityJob},
		{name: "azure connection string", valid: true, src: agentOff + `
provider "azure_blob" "a" {
  connection_string = "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=a2V5;BlobEndpoint=http://127.0.0.1:1/devstoreaccount1"
}` + parityJob},
		{name: "azure account_url and sas", valid: true, src: agentOff + `
provider "azure_blob" "a" {
  account_url = "http://127.0.0.1:1/devstoreaccount1"
  sas_token   = "sv=2022-11-02&sig=abc"
}` + parityJob},
		{name: "datastore", valid: true, env: []string{"DATASTORE_EMULATOR_HOST=127.0.0.1:1"}, src: agentOff + `
provider "datastore" "d" {
  project_id = "parity"
}` + parityJob},
		{name: "etcd", valid: true, src: agentOff + `
provider "etcd" "e" {
  endpoints = ["127.0.0.1:1", "http://127.0.0.1:2"]
}` + parityJob},
		{name: "LOCALHOST without a token", valid: true, src: fmt.Sprintf(`
agent {
  listen = "LOCALHOST:%s"
}`, strings.TrimPrefix(freeLoopback(t), "127.0.0.1:")) + parityJob},
		{name: "schedules", valid: true, src: agentOff + `
job "every" {
  task {
    schedule = "@every 1s"
    command  = ["true"]
  }
}
job "leap-day" {
  mode = "lock"
  task {
    schedule = "0 0 29 2 *"
    command  = ["true"]
  }
}`},

		{name: "variables, locals and for_each", valid: true, env: []string{"ELECTD_VAR_queue_url=amqp://q.internal/orders"}, src: agentOff + `
variable "queue_url" {
  type      = string
  sensitive = true
  validation {
    condition     = startswith(var.queue_url, "amqp://")
    error_message = "The queue_url must be an amqp:// URL."
  }
}
locals {
  shards = toset(range(4))
}
job "consumer" {
  for_each = local.shards
  ttl      = "15s"
  run {
    command = ["sleep", "600", each.key, var.queue_url]
  }
}`},

		// Refused, each for a reason knowable without the store.
		{name: "variable without a value", src: agentOff + `
variable "queue_url" {
  type = string
}` + parityJob},
		{name: "variable that fails its validation", env: []string{"ELECTD_VAR_queue_url=http://q"}, src: agentOff + `
variable "queue_url" {
  validation {
    condition     = startswith(var.queue_url, "amqp://")
    error_message = "The queue_url must be an amqp:// URL."
  }
}` + parityJob},
		{name: "cycle in locals", src: agentOff + `
locals {
  a = local.b
  b = local.a
}` + parityJob},
		{name: "for_each instance over the store limit", src: agentOff + `
job "consumer" {
  for_each = toset(["a", "` + long + `"])
}`},
		{name: "for_each over a list", src: agentOff + `
job "consumer" {
  for_each = ["a", "b"]
}`},
		{name: "variable of the wrong type", env: []string{"ELECTD_VAR_shards=sixteen"}, src: agentOff + `
variable "shards" {
  type = number
}
job "consumer" {
  for_each = toset(range(var.shards))
}`},
		{name: "variable set to null that cannot be", env: []string{`ELECTD_VAR_zones=null`}, src: agentOff + `
variable "zones" {
  type     = list(string)
  nullable = false
}
job "consumer" {
  for_each = toset(var.zones)
}`},
		{name: "unknown local", src: agentOff + `
job "consumer" {
  for_each = local.shards
}`},
		{name: "duplicate expanded names", src: agentOff + `
job "consumer" {
  for_each = toset(["eu", "us"])
}
job "consumer.eu" {}`},
		{name: "map of objects, nullable and a typed any", valid: true, env: []string{`ELECTD_VAR_extra=["--verbose"]`}, src: agentOff + `
variable "regions" {
  type = map(object({
    queue  = string
    weight = optional(number, 1)
  }))
  default = {
    eu = { queue = "amqp://eu.internal/q" }
    us = { queue = "amqp://us.internal/q", weight = 3 }
  }
}
variable "extra" {
  type     = any
  nullable = false
}
job "consumer" {
  for_each = var.regions
  ttl      = "15s"
  prefer   = { zone = each.key }
  run {
    command = concat(["sleep", "600", each.value.queue, tostring(each.value.weight)], var.extra)
    env     = { REGION = each.key }
  }
}`},
		{name: "all interfaces without a token", src: `
agent {
  listen = "0.0.0.0:1"
}` + parityJob},
		{name: "world-writable file", src: agentOff + parityJob, setup: func(t *testing.T, path string) {
			if err := os.Chmod(path, 0o666); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "postgres table too long", src: agentOff + `
provider "sql" "s" {
  driver = "postgres"
  dsn    = "postgres://electd@127.0.0.1:1/electd"
  table  = "t` + strings.Repeat("a", 60) + `"
}` + parityJob},
		{name: "sql table of 70", src: agentOff + `
provider "sql" "s" {
  driver = "sqlite"
  dsn    = "%[1]s/leases.db"
  table  = "t` + strings.Repeat("a", 69) + `"
}` + parityJob},
		{name: "postgres dsn that does not parse", src: agentOff + `
provider "sql" "s" {
  driver = "postgres"
  dsn    = "postgres://electd@127.0.0.1:notaport/electd"
}` + parityJob},
		{name: "mysql dsn that does not parse", src: agentOff + `
provider "sql" "s" {
  driver = "mysql"
  dsn    = "electd@127.0.0.1/electd"
}` + parityJob},
		{name: "azure container name", src: agentOff + `
provider "azure_blob" "a" {
  connection_string = "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=a2V5;BlobEndpoint=http://127.0.0.1:1/devstoreaccount1"
  container         = "Bad_Name"
}` + parityJob},
		{name: "azure connection string", src: agentOff + `
provider "azure_blob" "a" {
  connection_string = "UseDevelopmentStorage=true"
}` + parityJob},
		{name: "mongodb write concern 0", src: agentOff + `
provider "mongodb" "m" {
  uri           = "mongodb://127.0.0.1:1/"
  write_concern = "0"
}` + parityJob},
		{name: "mongodb uri", src: agentOff + `
provider "mongodb" "m" {
  uri = "mongodb://127.0.0.1:notaport/"
}` + parityJob},
		{name: "redis two addresses", src: agentOff + `
provider "redis" "r" {
  addresses = ["127.0.0.1:1", "127.0.0.1:2"]
}` + parityJob},
		{name: "redis same address twice", src: agentOff + `
provider "redis" "r" {
  addresses = ["127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:1"]
}` + parityJob},
		{name: "redis address without port", src: agentOff + `
provider "redis" "r" {
  addresses = ["127.0.0.1"]
}` + parityJob},
		{name: "etcd endpoint", src: agentOff + `
provider "etcd" "e" {
  endpoints = ["ftp://127.0.0.1:1"]
}` + parityJob},
		{name: "datastore reserved kind", env: []string{"DATASTORE_EMULATOR_HOST=127.0.0.1:1"}, src: agentOff + `
provider "datastore" "d" {
  project_id = "parity"
  kind       = "__kind__"
}` + parityJob},
		{name: "datastore credentials file missing", src: agentOff + `
provider "datastore" "d" {
  project_id       = "parity"
  credentials_file = "%[1]s/none.json"
}` + parityJob},
		{name: "schedule that never fires", src: agentOff + `
job "feb30" {
  task {
    schedule = "0 0 30 2 *"
    command  = ["true"]
  }
}`},
		{name: "schedule more than once a second", src: agentOff + `
job "fast" {
  mode = "lock"
  task {
    schedule = "@every 100ms"
    command  = ["true"]
  }
}`},
		{name: "job name over the store limit", src: agentOff + `job "` + long + `" {
}`},
		{name: "node_id over the store limit", src: `
agent {
  listen  = ""
  node_id = "` + long + `"
}` + parityJob},
		{name: "no kill margin", src: agentOff + `
job "a" {
  ttl         = "1s"
  renew_every = "50ms"
  run {
    command      = ["sleep", "60"]
    stop_timeout = "880ms"
  }
}`},
		{name: "ttl under a second", src: agentOff + `
job "a" {
  ttl         = "100ms"
  renew_every = "20ms"
}`},
		{name: "shutdown_timeout 0s", src: `
agent {
  listen           = ""
  shutdown_timeout = "0s"
}` + parityJob},
		{name: "unknown provider type, job without a reference", src: agentOff + `
provider "sqll" "s" {
  dsn = "x"
}` + parityJob},
		{name: "api_token read with its newline", setup: func(t *testing.T, path string) {
			if err := os.WriteFile(filepath.Join(filepath.Dir(path), "token"), []byte("s3cret\n"), 0o600); err != nil {
				t.Fatal(err)
			}
		}, src: `
agent {
  listen    = "0.0.0.0:1"
  api_token = file("token")
}` + parityJob},
	}
}

// TestCheckRunParity: `electd check` and the start-up of `electd run` give
// the same verdict on every configuration, valid or not.
func TestCheckRunParity(t *testing.T) {
	t.Parallel()
	for _, tc := range parityCases(t) {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			path := filepath.Join(dir, "electd.hcl")
			if err := os.WriteFile(path, []byte(strings.ReplaceAll(tc.src, "%[1]s", dir)), 0o644); err != nil {
				t.Fatal(err)
			}
			if tc.setup != nil {
				tc.setup(t, path)
			}
			_, errOut, code := cli(t, tc.env, "check", "-config", path)
			checked := code == 0
			started, log := runStarts(t, path, tc.env)
			if checked != started {
				t.Fatalf("check accepted=%v (exit %d), run started=%v\ncheck:\n%s\nrun:\n%s", checked, code, started, errOut, log)
			}
			if checked != tc.valid {
				t.Fatalf("both accepted=%v, want %v\ncheck:\n%s\nrun:\n%s", checked, tc.valid, errOut, log)
			}
			if !checked && !strings.Contains(log, errOut[:min(len(errOut), 40)]) {
				t.Errorf("run refused without check's diagnostic:\ncheck:\n%s\nrun:\n%s", errOut, log)
			}
		})
	}
}

// runStarts runs `electd run -config path` until it tells systemd READY=1
// (it started: then it is stopped) or exits (it refused).
func runStarts(t *testing.T, path string, env []string) (bool, string) {
	t.Helper()
	sd := newNotifySocket(t)
	a, err := cluster.StartProcess(cluster.Spec{Name: "node-1", Argv: []string{binary, "run", "-config", path},
		Dir: filepath.Dir(path), Env: append(append([]string{}, env...), "NOTIFY_SOCKET="+sd.path), LogPath: filepath.Join(t.TempDir(), "run.log")})
	if err != nil {
		t.Fatal(err)
	}
	out := func() string {
		b, _ := os.ReadFile(a.LogPath)
		return string(b)
	}
	deadline := time.After(30 * time.Second)
	for {
		select {
		case <-a.Done():
			if a.Err() == nil {
				t.Fatalf("run exited 0 before READY=1:\n%s", out())
			}
			return false, out()
		case m := <-sd.msgs:
			if !strings.HasPrefix(m, "READY=1") {
				continue
			}
			if err := a.Stop(20 * time.Second); errors.Is(err, cluster.ErrStopTimeout) {
				t.Errorf("run did not stop within 20s of SIGTERM")
			}
			return true, out()
		case <-deadline:
			a.Kill()
			t.Fatalf("run neither started nor exited within 30s:\n%s", out())
		}
	}
}
