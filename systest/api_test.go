package systest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/electd/electd/internal/cluster"
	"github.com/electd/electd/internal/teststore"
)

// The HTTP API, /metrics and the status, step-down and leases commands,
// against real agent processes.

const apiToken = "tok-3f9a-api"

// apiNode is one `electd run` process serving its API.
type apiNode struct {
	*cluster.Agent
	t    *testing.T
	node string
	addr string // host:port of the API ("" when off)
	cfg  string
}

// freeLoopback is a 127.0.0.1 address nothing listens on right now.
func freeLoopback(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// apiJobs are the jobs every API test agent runs: billing supervises a
// command and runs an on_elected exec (for electd_action_runs_total); audit
// only holds its lease.
func apiJobs(provider string) string {
	return fmt.Sprintf(`
job "billing" {
  provider    = %[1]s
  ttl         = %[2]q
  renew_every = %[3]q
  retry_every = %[4]q
  run {
    command      = ["sh", "-c", "while :; do sleep 0.1; done"]
    stop_timeout = %[5]q
  }
  on_elected {
    exec { command = ["true"] }
  }
}

job "audit" {
  provider    = %[1]s
  ttl         = %[2]q
  renew_every = %[3]q
  retry_every = %[4]q
}
`, provider, ttl, renewEvery, retryEvery, stopTimeout)
}

// writeNodeConfig writes a configuration for node listening on listen with
// token ("" for none) and returns its path. No balance: jobs stay where the
// test puts them (a step-down that brings billing back to a node leading
// audit would otherwise make it hand audit over).
func writeNodeConfig(t *testing.T, dir, node, listen, token, body string) string {
	t.Helper()
	attrs := []string{"balance = false"}
	if token != "" {
		attrs = append(attrs, cluster.Str("api_token", token))
	}
	path := filepath.Join(dir, node+".hcl")
	if err := cluster.WriteConfig(path, cluster.AgentBlock(node, listen, attrs...), body); err != nil {
		t.Fatal(err)
	}
	return path
}

// startNode runs `electd run -config cfg`. It is stopped (SIGTERM, then
// SIGKILL) when the test ends, and its log is shown when the test failed.
func startNode(t *testing.T, node, cfg, addr string) *apiNode {
	t.Helper()
	a, err := cluster.StartProcess(cluster.Spec{Name: node, Argv: []string{binary, "run", "-config", cfg},
		Dir: filepath.Dir(cfg), LogPath: cfg + ".log", API: addr})
	if err != nil {
		t.Fatal(err)
	}
	n := &apiNode{Agent: a, t: t, node: node, addr: addr, cfg: cfg}
	t.Cleanup(func() {
		n.stop()
		if t.Failed() {
			t.Logf("--- log of %s:\n%s", node, n.Log())
		}
	})
	return n
}

// stop is a graceful stop; it reports whether the agent exited 0.
func (n *apiNode) stop() bool { return n.Stop(15*time.Second) == nil }

// call sends a request to the node's API and returns the status and body.
func (n *apiNode) call(method, path, token string) (int, string) {
	n.t.Helper()
	req, err := http.NewRequest(method, n.URL(path), nil)
	if err != nil {
		n.t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// waitStatus polls path until it answers want.
func (n *apiNode) waitStatus(path string, want int, within time.Duration) {
	n.t.Helper()
	deadline := time.Now().Add(within)
	for {
		code, body := n.call(http.MethodGet, path, "")
		if code == want {
			return
		}
		if time.Now().After(deadline) {
			n.t.Fatalf("%s %s: %d %s, want %d within %s", n.node, path, code, body, want, within)
		}
		select {
		case <-n.Done():
			n.t.Fatalf("%s exited (%v) while waiting for %s to answer %d", n.node, n.Err(), path, want)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// jobStatus is a job as the API shows it, with every field docs/api.md names.
type jobStatus struct {
	Job          string     `json:"job"`
	Provider     string     `json:"provider"`
	State        string     `json:"state"`
	Leader       string     `json:"leader"`
	Token        uint64     `json:"token"`
	Since        *time.Time `json:"since"`
	LeaseExpires *time.Time `json:"lease_expires"`
	LastError    string     `json:"last_error"`
}

func (n *apiNode) job(name string) jobStatus {
	n.t.Helper()
	code, body := n.call(http.MethodGet, "/v1/jobs/"+name, "")
	if code != http.StatusOK {
		n.t.Fatalf("%s GET /v1/jobs/%s: %d %s", n.node, name, code, body)
	}
	var j jobStatus
	if err := json.Unmarshal([]byte(body), &j); err != nil {
		n.t.Fatalf("%s GET /v1/jobs/%s: %v: %s", n.node, name, err, body)
	}
	return j
}

// waitJob polls the node's view of a job until cond holds.
func (n *apiNode) waitJob(name, what string, within time.Duration, cond func(jobStatus) bool) jobStatus {
	n.t.Helper()
	deadline := time.Now().Add(within)
	for {
		j := n.job(name)
		if cond(j) {
			return j
		}
		if time.Now().After(deadline) {
			n.t.Fatalf("%s: %s: not within %s (job is %+v)", n.node, what, within, j)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// metric is one sample of the Prometheus text format.
type metric struct {
	name   string
	labels map[string]string
	value  float64
}

// parseMetrics reads the text exposition format (enough of it for the
// samples electd writes: no escaped quotes in label values).
func parseMetrics(t *testing.T, body string) []metric {
	t.Helper()
	var out []metric
	for _, line := range strings.Split(body, "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		sp := strings.LastIndexByte(line, ' ')
		series, val := line[:sp], line[sp+1:]
		v, err := strconv.ParseFloat(val, 64)
		if err != nil {
			t.Fatalf("bad sample line %q", line)
		}
		m := metric{name: series, labels: map[string]string{}, value: v}
		if i := strings.IndexByte(series, '{'); i >= 0 {
			m.name = series[:i]
			for _, kv := range strings.Split(strings.TrimSuffix(series[i+1:], "}"), ",") {
				k, v, _ := strings.Cut(kv, "=")
				m.labels[k] = strings.Trim(v, `"`)
			}
		}
		out = append(out, m)
	}
	return out
}

// find returns the samples named name whose labels include want.
func find(ms []metric, name string, want map[string]string) []metric {
	var out []metric
next:
	for _, m := range ms {
		if m.name != name {
			continue
		}
		for k, v := range want {
			if m.labels[k] != v {
				continue next
			}
		}
		out = append(out, m)
	}
	return out
}

func (n *apiNode) metrics() []metric {
	n.t.Helper()
	code, body := n.call(http.MethodGet, "/metrics", "")
	if code != http.StatusOK {
		n.t.Fatalf("%s GET /metrics: %d %s", n.node, code, body)
	}
	return parseMetrics(n.t, body)
}

// cli runs the electd binary and returns its stdout, stderr and exit code.
func cli(t *testing.T, env []string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-ctx.Done():
		cmd.Process.Kill()
		t.Fatalf("electd %s did not finish within 30s", strings.Join(args, " "))
	}
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return stdout.String(), stderr.String(), code
}

// tableRow finds the row of a tabwriter table whose first column is key,
// and returns each header column's value in that row, cut at the header's
// column offsets: this fails when the columns are not aligned.
func tableRow(t *testing.T, table, key string) map[string]string {
	t.Helper()
	lines := strings.Split(strings.TrimRight(table, "\n"), "\n")
	header := lines[0]
	// Header words are single words except "LEASE EXPIRES", "LAST RUN" and
	// "LAST ERROR".
	// The state "not eligible" is two words in a column of its own.
	var cols []string
	var offs []int
	for _, c := range []string{"JOB", "PROVIDER", "STATE", "LEADER", "HOLDER", "TOKEN", "SINCE", "LEASE EXPIRES", "EXPIRES", "HEALTH", "LAST RUN", "RESULT", "NEXT", "NOTE", "LAST ERROR"} {
		i := strings.Index(header, c)
		if i < 0 || (c == "EXPIRES" && strings.Contains(header, "LEASE EXPIRES")) {
			continue
		}
		cols, offs = append(cols, c), append(offs, i)
	}
	for _, line := range lines[1:] {
		if !strings.HasPrefix(line, key+" ") {
			continue
		}
		row := map[string]string{}
		for i, c := range cols {
			start := offs[i]
			end := len(line)
			if i+1 < len(cols) {
				end = min(offs[i+1], len(line))
			}
			if start > len(line) {
				t.Fatalf("row %q is shorter than the header %q", line, header)
			}
			if start > 0 && line[start-1] != ' ' {
				t.Fatalf("column %s is not aligned in row %q under header %q", c, line, header)
			}
			row[c] = strings.TrimSpace(line[start:end])
		}
		return row
	}
	t.Fatalf("no row %q in:\n%s", key, table)
	return nil
}

// TestAPIAndCLI runs two agents on one SQLite file and looks at them the
// way an operator does: the HTTP API, /metrics, step-down with and without
// the token, and the status, step-down and leases commands.
func TestAPIAndCLI(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(teststore.DBDir(t), "leases.db")
	body := fmt.Sprintf("provider \"sql\" \"s\" {\n  driver = \"sqlite\"\n  dsn = %q\n}\n%s", db, apiJobs("sql.s"))
	addrA, addrB := freeLoopback(t), freeLoopback(t)
	a := startNode(t, "node-a", writeNodeConfig(t, dir, "node-a", addrA, apiToken, body), addrA)
	a.waitStatus("/readyz", http.StatusOK, 20*time.Second)
	for _, job := range []string{"billing", "audit"} {
		a.waitJob(job, "node-a leads "+job, 20*time.Second, func(j jobStatus) bool { return j.State == "leader" })
	}
	b := startNode(t, "node-b", writeNodeConfig(t, dir, "node-b", addrB, apiToken, body), addrB)
	b.waitStatus("/readyz", http.StatusOK, 20*time.Second)
	b.waitJob("billing", "node-b follows node-a", 20*time.Second, func(j jobStatus) bool { return j.Leader == "node-a" })

	// A node that stepped down holds off for one ttl; the other takes over
	// at once, but handing back before that ttl passed waits for it.
	heldOff := map[string]time.Time{}
	takeover := func(to string) time.Duration {
		return max(time.Until(heldOff[to]), 0) + retryEvery*12/10 + 2*time.Second
	}

	t.Run("GET /v1/jobs", func(t *testing.T) {
		code, body := a.call(http.MethodGet, "/v1/jobs", "")
		if code != http.StatusOK {
			t.Fatalf("GET /v1/jobs: %d %s", code, body)
		}
		var raw []map[string]any
		if err := json.Unmarshal([]byte(body), &raw); err != nil {
			t.Fatalf("%v: %s", err, body)
		}
		if len(raw) != 2 || raw[0]["job"] != "billing" || raw[1]["job"] != "audit" {
			t.Fatalf("want billing and audit in configuration order: %s", body)
		}
		for _, k := range []string{"job", "provider", "state", "leader", "token", "since", "lease_expires", "last_error"} {
			if _, ok := raw[0][k]; !ok {
				t.Errorf("no %q field: %s", k, body)
			}
		}
		lead := a.job("billing")
		if lead.Provider != "sql.s" || lead.State != "leader" || lead.Leader != "node-a" || lead.Token == 0 {
			t.Errorf("leader's view: %+v", lead)
		}
		if lead.Since == nil || time.Since(*lead.Since) > time.Minute || time.Since(*lead.Since) < 0 {
			t.Errorf("since = %v, want a moment ago", lead.Since)
		}
		if lead.LeaseExpires == nil || time.Until(*lead.LeaseExpires) <= 0 || time.Until(*lead.LeaseExpires) > ttl+time.Second {
			t.Errorf("lease_expires = %v, want within the next ttl (%s)", lead.LeaseExpires, ttl)
		}
		follow := b.job("billing")
		if follow.State != "follower" || follow.Leader != "node-a" || follow.Token != lead.Token || follow.LeaseExpires != nil {
			t.Errorf("follower's view %+v, want follower of node-a with token %d and no lease_expires", follow, lead.Token)
		}
		if code, body := a.call(http.MethodGet, "/v1/jobs/nope", ""); code != http.StatusNotFound {
			t.Errorf("GET /v1/jobs/nope: %d %s, want 404", code, body)
		}
	})

	t.Run("healthz and readyz", func(t *testing.T) {
		for _, n := range []*apiNode{a, b} {
			for _, p := range []string{"/healthz", "/readyz"} {
				if code, body := n.call(http.MethodGet, p, ""); code != http.StatusOK {
					t.Errorf("%s GET %s: %d %s", n.node, p, code, body)
				}
			}
		}
	})

	t.Run("metrics", func(t *testing.T) {
		// The leader renews every renew_every: wait for one renewal (the
		// sql provider renews the jobs of a node in one batch).
		renewals := func() int {
			ms := a.metrics()
			return len(find(ms, "electd_lease_op_seconds_count", map[string]string{"provider": "sql.s", "op": "renew"})) +
				len(find(ms, "electd_lease_op_seconds_count", map[string]string{"provider": "sql.s", "op": "renew_batch"}))
		}
		deadline := time.Now().Add(renewEvery + 5*time.Second)
		for renewals() == 0 {
			if time.Now().After(deadline) {
				t.Fatalf("no electd_lease_op_seconds{op=\"renew\" or \"renew_batch\"} within %s of being elected", renewEvery+5*time.Second)
			}
			time.Sleep(100 * time.Millisecond)
		}
		ma, mb := a.metrics(), b.metrics()
		checks := []struct {
			name   string
			ms     []metric
			metric string
			labels map[string]string
			ok     func(float64) bool
		}{
			{"the leader's gauge is 1", ma, "electd_is_leader", map[string]string{"job": "billing"}, func(v float64) bool { return v == 1 }},
			{"an election was counted", ma, "electd_transitions_total", map[string]string{"job": "billing", "type": "elected"}, func(v float64) bool { return v >= 1 }},
			// SQL acquires in batches (AcquireMany), timed per request.
			{"acquire is timed", ma, "electd_lease_op_seconds_count", map[string]string{"provider": "sql.s", "op": "acquire_batch"}, func(v float64) bool { return v >= 1 }},
			{"lease op buckets", ma, "electd_lease_op_seconds_bucket", map[string]string{"provider": "sql.s", "op": "acquire_batch", "le": "+Inf"}, func(v float64) bool { return v >= 1 }},
			{"the on_elected exec ran", ma, "electd_action_runs_total", map[string]string{"job": "billing", "event": "elected", "kind": "exec", "result": "ok"}, func(v float64) bool { return v >= 1 }},
			{"build info", ma, "electd_build_info", map[string]string{}, func(v float64) bool { return v == 1 }},
			{"the follower observed by acquiring", mb, "electd_lease_op_seconds_count", map[string]string{"provider": "sql.s", "op": "acquire_batch"}, func(v float64) bool { return v >= 1 }},
		}
		for _, c := range checks {
			got := find(c.ms, c.metric, c.labels)
			if len(got) != 1 || !c.ok(got[0].value) {
				t.Errorf("%s: %s%v = %v", c.name, c.metric, c.labels, got)
			}
		}
		if bi := find(ma, "electd_build_info", nil); len(bi) == 1 && (bi[0].labels["version"] == "" || !strings.HasPrefix(bi[0].labels["goversion"], "go")) {
			t.Errorf("electd_build_info labels %v", bi[0].labels)
		}
		// The follower never led: its gauge is 0 or absent, never 1.
		for _, m := range find(mb, "electd_is_leader", map[string]string{"job": "billing"}) {
			if m.value != 0 {
				t.Errorf("the follower reports electd_is_leader = %v", m.value)
			}
		}
		// No store error happened, so no error may be counted.
		for _, m := range find(ma, "electd_lease_op_errors_total", nil) {
			if m.value != 0 {
				t.Errorf("lease op errors counted with a healthy store: %v", m)
			}
		}
	})

	t.Run("step-down needs the token", func(t *testing.T) {
		for _, tok := range []string{"", "wrong-token"} {
			code, body := a.call(http.MethodPost, "/v1/jobs/billing/step-down", tok)
			if code != http.StatusUnauthorized {
				t.Errorf("step-down with token %q: %d %s, want 401", tok, code, body)
			}
		}
		if j := a.job("billing"); j.State != "leader" {
			t.Fatalf("a refused step-down moved leadership: %+v", j)
		}
		// POST /v1/reload is guarded the same way.
		if code, body := a.call(http.MethodPost, "/v1/reload", ""); code != http.StatusUnauthorized {
			t.Errorf("reload without the token: %d %s, want 401", code, body)
		}
		if code, body := a.call(http.MethodPost, "/v1/reload", apiToken); code != http.StatusOK || !strings.Contains(body, `"ok": true`) {
			t.Errorf("reload of the unchanged files with the token: %d %s, want 200 ok", code, body)
		}
		if j := a.job("billing"); j.State != "leader" {
			t.Fatalf("reloading unchanged files moved leadership: %+v", j)
		}
		if code, body := a.call(http.MethodPost, "/v1/jobs/nope/step-down", apiToken); code != http.StatusNotFound {
			t.Errorf("step-down of an unknown job: %d %s, want 404", code, body)
		}
		if code, body := b.call(http.MethodPost, "/v1/jobs/billing/step-down", apiToken); code != http.StatusConflict {
			t.Errorf("step-down on a follower: %d %s, want 409", code, body)
		}
		before := a.job("billing").Token
		start := time.Now()
		heldOff["node-a"] = start.Add(ttl)
		if code, body := a.call(http.MethodPost, "/v1/jobs/billing/step-down", apiToken); code != http.StatusAccepted {
			t.Fatalf("step-down: %d %s, want 202", code, body)
		}
		// SQLite has no notification: node-b notices on its next retry.
		bound := takeover("node-b")
		j := b.waitJob("billing", "node-b takes over", bound, func(j jobStatus) bool { return j.State == "leader" })
		t.Logf("API step-down → node-b leads: %s (bound %s)", time.Since(start).Round(time.Millisecond), bound)
		if j.Token <= before {
			t.Errorf("node-b leads with token %d, not above %d", j.Token, before)
		}
		a.waitJob("billing", "node-a follows node-b", 10*time.Second, func(j jobStatus) bool { return j.Leader == "node-b" && j.State == "follower" })
		if j := a.job("audit"); j.State != "leader" {
			t.Errorf("stepping down billing moved audit too: %+v", j)
		}
		if v := find(a.metrics(), "electd_is_leader", map[string]string{"job": "billing"}); len(v) != 1 || v[0].value != 0 {
			t.Errorf("after stepping down node-a reports electd_is_leader %v, want 0", v)
		}
	})

	t.Run("electd status", func(t *testing.T) {
		out, errOut, code := cli(t, nil, "status", "-addr", "http://"+addrB)
		if code != 0 {
			t.Fatalf("status exit %d: %s", code, errOut)
		}
		if !strings.HasPrefix(out, "JOB ") || !strings.Contains(strings.SplitN(out, "\n", 2)[0], "LEASE EXPIRES") {
			t.Errorf("no table header:\n%s", out)
		}
		lead := b.job("billing")
		row := tableRow(t, out, "billing")
		if row["STATE"] != "leader" || row["LEADER"] != "node-b" || row["TOKEN"] != strconv.FormatUint(lead.Token, 10) ||
			!strings.HasSuffix(row["SINCE"], "ago") || !strings.HasPrefix(row["LEASE EXPIRES"], "in ") || row["NOTE"] != "-" || row["HEALTH"] != "-" {
			t.Errorf("billing row %v:\n%s", row, out)
		}
		row = tableRow(t, out, "audit")
		if row["STATE"] != "follower" || row["LEADER"] != "node-a" || row["LEASE EXPIRES"] != "-" {
			t.Errorf("audit row %v:\n%s", row, out)
		}

		// ELECTD_ADDR stands for -addr; -json is the API's own data.
		out, errOut, code = cli(t, []string{"ELECTD_ADDR=" + addrA}, "status", "-json")
		if code != 0 {
			t.Fatalf("status -json exit %d: %s", code, errOut)
		}
		var jobs []jobStatus
		if err := json.Unmarshal([]byte(out), &jobs); err != nil {
			t.Fatalf("status -json: %v\n%s", err, out)
		}
		if len(jobs) != 2 || jobs[0].Job != "billing" || jobs[0].State != "follower" || jobs[0].Leader != "node-b" ||
			jobs[1].Job != "audit" || jobs[1].State != "leader" || jobs[1].LeaseExpires == nil {
			t.Errorf("status -json: %+v", jobs)
		}

		// No agent there: a clear error, exit 1.
		_, errOut, code = cli(t, nil, "status", "-addr", freeLoopback(t))
		if code != 1 || !strings.Contains(errOut, "cannot reach the agent") {
			t.Errorf("status without an agent: exit %d, stderr %q", code, errOut)
		}
	})

	t.Run("electd step-down", func(t *testing.T) {
		_, errOut, code := cli(t, nil, "step-down", "billing", "-addr", addrB)
		if code != 1 || !strings.Contains(errOut, "401") {
			t.Errorf("step-down without a token: exit %d, stderr %q; want 1 and a 401", code, errOut)
		}
		_, errOut, code = cli(t, []string{"ELECTD_API_TOKEN=" + apiToken}, "step-down", "nope", "-addr", addrB)
		if code != 1 || !strings.Contains(errOut, "404") {
			t.Errorf("step-down of an unknown job: exit %d, stderr %q", code, errOut)
		}
		before := b.job("billing").Token
		start := time.Now()
		heldOff["node-b"] = start.Add(ttl)
		out, errOut, code := cli(t, []string{"ELECTD_API_TOKEN=" + apiToken}, "step-down", "billing", "-addr", "http://"+addrB)
		if code != 0 || !strings.Contains(out, "stepping down") {
			t.Fatalf("step-down: exit %d, stdout %q, stderr %q", code, out, errOut)
		}
		bound := takeover("node-a")
		j := a.waitJob("billing", "node-a takes over", bound, func(j jobStatus) bool { return j.State == "leader" })
		t.Logf("CLI step-down → node-a leads: %s (bound %s: node-a was holding off)", time.Since(start).Round(time.Millisecond), bound.Round(time.Millisecond))
		if j.Token <= before {
			t.Errorf("node-a leads with token %d, not above %d", j.Token, before)
		}
		// -token works as well as the environment.
		heldOff["node-a"] = time.Now().Add(ttl)
		if _, errOut, code := cli(t, nil, "step-down", "billing", "-addr", addrA, "-token", apiToken); code != 0 {
			t.Errorf("step-down -token: exit %d: %s", code, errOut)
		}
		b.waitJob("billing", "node-b takes over again", takeover("node-b"), func(j jobStatus) bool { return j.State == "leader" })
	})

	t.Run("electd leases", func(t *testing.T) {
		lead := b.job("billing")
		out, errOut, code := cli(t, nil, "leases", "-config", a.cfg)
		if code != 0 {
			t.Fatalf("leases exit %d: %s", code, errOut)
		}
		row := tableRow(t, out, "billing")
		if row["PROVIDER"] != "sql.s" || row["HOLDER"] != "node-b" || row["TOKEN"] != strconv.FormatUint(lead.Token, 10) || !strings.HasPrefix(row["EXPIRES"], "in ") {
			t.Errorf("billing row %v, want held by node-b with token %d:\n%s", row, lead.Token, out)
		}

		// With no agent running: kill -9 both, so the leases stay held
		// until they expire, and ask the store directly.
		for _, n := range []*apiNode{a, b} {
			n.Signal(syscall.SIGKILL)
			<-n.Done()
		}
		out, errOut, code = cli(t, nil, "leases", "-config", b.cfg, "-json")
		if code != 0 {
			t.Fatalf("leases -json with no agent: exit %d: %s", code, errOut)
		}
		var rows []struct {
			Job, Provider, Holder string
			Token                 uint64
			Expires               *time.Time
		}
		if err := json.Unmarshal([]byte(out), &rows); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		if len(rows) != 2 || rows[0].Job != "billing" || rows[0].Holder != "node-b" || rows[0].Token != lead.Token ||
			rows[0].Expires == nil || time.Until(*rows[0].Expires) > ttl || rows[1].Job != "audit" || rows[1].Holder != "node-a" {
			t.Errorf("leases -json with no agent: %s", out)
		}
		// Once the ttl has passed, the record shows it expired; the token stays.
		time.Sleep(time.Until(*rows[0].Expires) + 100*time.Millisecond) // the term ends by the store's clock
		out, _, _ = cli(t, nil, "leases", "-config", b.cfg)
		t.Logf("electd leases after expiry:\n%s", out)
		if row := tableRow(t, out, "billing"); row["TOKEN"] != strconv.FormatUint(lead.Token, 10) {
			t.Errorf("token after expiry: %v", row)
		}
	})
}

// The agent refuses to serve the API beyond loopback without a token; with
// a token it serves, and without one on loopback only loopback clients may
// step down.
func TestAPIListenRules(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	body := fmt.Sprintf("provider \"sql\" \"s\" {\n  driver = \"sqlite\"\n  dsn = %q\n}\n%s", filepath.Join(teststore.DBDir(t), "l.db"), apiJobs("sql.s"))
	port := freeLoopback(t)[len("127.0.0.1:"):]

	t.Run("all interfaces without api_token", func(t *testing.T) {
		cfg := writeNodeConfig(t, dir, "open", "0.0.0.0:"+port, "", body)
		n := startNode(t, "open", cfg, "")
		select {
		case <-n.Done():
		case <-time.After(15 * time.Second):
			t.Fatal("the agent still runs 15s after starting with a non-loopback listen and no token")
		}
		var ee *exec.ExitError
		if !errors.As(n.Err(), &ee) || ee.ExitCode() != 1 {
			t.Errorf("exit %v, want 1", n.Err())
		}
		// Refused when the configuration is loaded (so `electd check` says it
		// too), with the line and the fix.
		if log := n.Log(); !strings.Contains(log, "Missing api_token") || !strings.Contains(log, "open.hcl line 3") {
			t.Errorf("no reason given:\n%s", log)
		}
		if _, errOut, code := cli(t, nil, "check", "-config", cfg); code != 1 || !strings.Contains(errOut, "api_token") {
			t.Errorf("electd check: exit %d, %s; want 1 naming api_token", code, errOut)
		}
		if c, err := net.DialTimeout("tcp", "127.0.0.1:"+port, time.Second); err == nil {
			c.Close()
			t.Error("something listens on the port after the refusal")
		}
	})

	t.Run("all interfaces with api_token", func(t *testing.T) {
		cfg := writeNodeConfig(t, dir, "tokened", "0.0.0.0:"+port, apiToken, body)
		n := startNode(t, "tokened", cfg, "127.0.0.1:"+port)
		n.waitStatus("/readyz", http.StatusOK, 20*time.Second)
		n.waitJob("billing", "leads", 20*time.Second, func(j jobStatus) bool { return j.State == "leader" })
		if code, _ := n.call(http.MethodPost, "/v1/jobs/billing/step-down", ""); code != http.StatusUnauthorized {
			t.Errorf("step-down without the token: %d, want 401", code)
		}
		if !n.stop() {
			t.Errorf("agent did not exit 0 on SIGTERM: %v", n.Err())
		}
	})

	t.Run("loopback without api_token", func(t *testing.T) {
		addr := freeLoopback(t)
		cfg := writeNodeConfig(t, dir, "local", addr, "", body)
		n := startNode(t, "local", cfg, addr)
		n.waitStatus("/readyz", http.StatusOK, 20*time.Second)
		n.waitJob("billing", "leads", 20*time.Second, func(j jobStatus) bool { return j.State == "leader" })
		if code, body := n.call(http.MethodPost, "/v1/jobs/billing/step-down", ""); code != http.StatusAccepted {
			t.Errorf("step-down from loopback with no token configured: %d %s, want 202", code, body)
		}
	})
}

// /healthz tells a store that stops answering (a SIGSTOPped redis-server)
// from a stuck loop: it stays 200 and says since when the store is
// unreachable, past the ttl and the loop's stuck limit; the leader steps
// down; all recovers when the store does, and the failures show in
// /metrics.
func TestHealthzWhenTheStoreHangs(t *testing.T) {
	t.Parallel()
	redisAddr, redis := teststore.StartRedis(t)
	t.Cleanup(func() { redis.Signal(syscall.SIGCONT) })
	dir := t.TempDir()
	body := fmt.Sprintf("provider \"redis\" \"r\" {\n  addresses = [%q]\n}\n%s", redisAddr, apiJobs("redis.r"))
	addr := freeLoopback(t)
	n := startNode(t, "node-h", writeNodeConfig(t, dir, "node-h", addr, "", body), addr)
	n.waitStatus("/readyz", http.StatusOK, 20*time.Second)
	n.waitJob("billing", "leads", 20*time.Second, func(j jobStatus) bool { return j.State == "leader" })
	if code, body := n.call(http.MethodGet, "/healthz", ""); code != http.StatusOK {
		t.Fatalf("/healthz with a healthy store: %d %s", code, body)
	}

	if err := redis.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	for {
		code, body := n.call(http.MethodGet, "/healthz", "")
		if code == http.StatusOK && strings.Contains(body, "store_unreachable") {
			break
		}
		if time.Since(stopped) > 3*ttl {
			t.Fatalf("/healthz %s after the store stopped: %d %s, want 200 store_unreachable", time.Since(stopped).Round(time.Millisecond), code, body)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Past the ttl and well past the loop's stuck limit (3 ttl + 3
	// retry_every), /healthz still answers 200: the loops turn.
	for time.Since(stopped) < 4*ttl+3*retryEvery {
		code, body := n.call(http.MethodGet, "/healthz", "")
		if code != http.StatusOK || !strings.Contains(body, "store_unreachable") || !strings.Contains(body, "redis.r: store unreachable since") {
			t.Fatalf("/healthz %s after the store stopped: %d %s, want 200 store_unreachable naming redis.r", time.Since(stopped).Round(time.Millisecond), code, body)
		}
		time.Sleep(200 * time.Millisecond)
	}
	// The API itself still answers, and the leader has stepped down.
	if j := n.job("billing"); j.State == "leader" {
		t.Errorf("still leader after the store stopped answering for more than a ttl: %+v", j)
	}

	if err := redis.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	n.waitStatus("/healthz", http.StatusOK, 3*ttl)
	n.waitJob("billing", "leads again", 3*ttl, func(j jobStatus) bool { return j.State == "leader" })
	var errs float64
	for _, m := range find(n.metrics(), "electd_lease_op_errors_total", map[string]string{"provider": "redis.r"}) {
		errs += m.value
	}
	if errs == 0 {
		t.Error("no electd_lease_op_errors_total{provider=\"redis.r\"} counted while the store hung")
	}
}
