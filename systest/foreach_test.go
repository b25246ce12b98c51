package systest

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/electd/electd/internal/cluster"
)

// TestForEachRunsEveryInstance: issue 33 as a user meets it. One job block
// with for_each over a local built from a variable, its queue URL a
// sensitive variable given with -var, run by the real binary on SQLite:
// every instance leads with a child of its own that sees its key; each
// instance is named in status, history and the metrics' job label; the
// URL appears in none of the log, the API or the metrics; `electd plan`
// and `electd reload` with -var shards=... add and remove instances, and
// the instances that stay keep their child and token.
func TestForEachRunsEveryInstance(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	addr := freeLoopback(t)
	cfg := filepath.Join(dir, "shards.hcl")
	const secret = "amqps://consumer:pw-4f1e9c2d@mq.internal/orders"
	src := fmt.Sprintf(`
agent {
  node_id = "shards-1"
  listen  = %[1]q
}

provider "sql" "db" {
  driver = "sqlite"
  dsn    = %[2]q
}

variable "queue_url" {
  type      = string
  sensitive = true
  validation {
    condition     = can(regex("^amqps?://", var.queue_url))
    error_message = "The queue_url must be an amqp:// or amqps:// URL."
  }
}

variable "shards" {
  type    = number
  default = 4
}

locals {
  ids = toset([for i in range(var.shards) : tostring(i)])
}

job "consumer" {
  for_each    = local.ids
  ttl         = %[3]q
  renew_every = %[4]q
  retry_every = %[5]q
  run {
    command      = ["sh", "-c", "echo \"$$ $ELECTD_TOKEN\" > %[6]s/consumer.$SHARD.pid; echo consuming $QUEUE; exec sleep 600"]
    env          = { SHARD = each.key, QUEUE = var.queue_url }
    stop_timeout = "1s"
  }
}
`, addr, filepath.Join(dir, "leases.db"), ttl, renewEvery, retryEvery, dir)
	if err := os.WriteFile(cfg, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	a, err := cluster.StartProcess(cluster.Spec{Name: "shards-1", Argv: []string{binary, "run", "-config", cfg, "-var", "queue_url=" + secret},
		Dir: dir, LogPath: cfg + ".log", API: addr})
	if err != nil {
		t.Fatal(err)
	}
	n := &apiNode{Agent: a, t: t, node: "shards-1", addr: addr, cfg: cfg}
	t.Cleanup(func() {
		n.stop()
		if t.Failed() {
			t.Logf("--- log:\n%s", n.Log())
		}
	})
	n.waitStatus("/healthz", http.StatusOK, 15*time.Second)

	type child struct {
		pid int
		tok string
	}
	children := map[string]child{}
	for i := 0; i < 4; i++ {
		name := fmt.Sprintf("consumer.%d", i)
		pid, tok := readPidToken(t, fmt.Sprintf("%s/consumer.%d.pid", dir, i))
		n.waitJob(name, name+" leads", 15*time.Second, func(j jobStatus) bool { return j.State == "leader" && j.Leader == "shards-1" })
		children[name] = child{pid, tok}
		if got := find(n.metrics(), "electd_is_leader", map[string]string{"job": name}); len(got) != 1 || got[0].value != 1 {
			t.Errorf("electd_is_leader{job=%q}: %+v", name, got)
		}
	}
	env := []string{"ELECTD_ADDR=" + addr, "ELECTD_API_TOKEN="}
	out, errOut, code := cli(t, env, "status")
	for i := 0; i < 4; i++ {
		if !strings.Contains(out, fmt.Sprintf("consumer.%d ", i)) {
			t.Errorf("status lacks consumer.%d (exit %d):\n%s%s", i, code, out, errOut)
		}
	}
	if out, errOut, code := cli(t, env, "history", "consumer.2"); code != 0 || !strings.Contains(out, "elected") {
		t.Errorf("history consumer.2: exit %d\n%s%s", code, out, errOut)
	}

	// The children got the URL; nothing the agent shows has it.
	if !strings.Contains(n.Log(), "consuming [redacted]") {
		t.Errorf("the children's output is not in the log, masked")
	}
	_, jobs := n.call(http.MethodGet, "/v1/jobs", "")
	_, metrics := n.call(http.MethodGet, "/metrics", "")
	for what, text := range map[string]string{"log": n.Log(), "/v1/jobs": jobs, "/metrics": metrics, "status": out} {
		if strings.Contains(text, "pw-4f1e9c2d") {
			t.Errorf("the sensitive queue_url is in the %s", what)
		}
	}

	out, errOut, code = cli(t, env, "plan", "-var", "shards=6")
	if code != 2 || !strings.Contains(out, "  + consumer.4\n  + consumer.5\n") || !strings.Contains(out, "Plan: 2 to add, 0 to restart, 0 to remove, 4 kept") {
		t.Errorf("plan -var shards=6: exit %d\n%s%s", code, out, errOut)
	}
	out, errOut, code = cli(t, env, "reload", "-var", "shards=2")
	if code != 0 || !strings.Contains(out, "  - consumer.2\n  - consumer.3\n") || !strings.Contains(out, "Reloaded: 0 added, 0 restarted, 2 removed, 2 kept") {
		t.Fatalf("reload -var shards=2: exit %d\n%s%s", code, out, errOut)
	}
	for _, name := range []string{"consumer.2", "consumer.3"} {
		if _, err := cluster.WaitGone(children[name].pid, 10*time.Second); err != nil {
			t.Errorf("%s's child after the set shrank: %v", name, err)
		}
	}
	out, errOut, code = cli(t, env, "reload", "-var", "shards=3")
	if code != 0 || !strings.Contains(out, "  + consumer.2\n") || !strings.Contains(out, "Reloaded: 1 added, 0 restarted, 0 removed, 2 kept") {
		t.Fatalf("reload -var shards=3: exit %d\n%s%s", code, out, errOut)
	}
	n.waitJob("consumer.2", "consumer.2 leads again", 15*time.Second, func(j jobStatus) bool { return j.State == "leader" })
	for _, name := range []string{"consumer.0", "consumer.1"} {
		pid, tok := readPidToken(t, dir+"/"+name+".pid")
		if c := children[name]; pid != c.pid || tok != c.tok {
			t.Errorf("%s: child %d token %s after the reloads, want child %d token %s (kept)", name, pid, tok, c.pid, c.tok)
		}
	}
}
