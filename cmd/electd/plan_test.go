package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/electd/electd/agent"
	"github.com/electd/electd/api"
	"github.com/electd/electd/config"
	"github.com/electd/electd/internal/redact"
)

// planFiles writes the configuration of a plan test: one SQLite provider
// and the jobs given.
func planFiles(t *testing.T, path, db, jobs string) {
	t.Helper()
	src := fmt.Sprintf(`
agent {
  node_id = "plan-node"
  listen  = ""
}
provider "sql" "main" {
  driver = "sqlite"
  dsn    = %q
}
%s`, db, jobs)
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
}

const planTiming = `
  ttl         = "3s"
  renew_every = "500ms"
  retry_every = "200ms"
`

func planRunJob(name, command string) string {
	return fmt.Sprintf("job %q {%s  run {\n    command      = %s\n    stop_timeout = \"1s\"\n  }\n}\n", name, planTiming, command)
}

// startPlanAgent runs an agent on the configuration at path in this
// process, its API served as `electd run` serves it (the same reloader),
// and returns the API's URL.
func startPlanAgent(t *testing.T, path string) string {
	t.Helper()
	cfg, diags := config.Load([]string{path}, loadOptions([]string{path}))
	if diags.HasErrors() {
		var b strings.Builder
		diags.WriteText(&b)
		t.Fatal(b.String())
	}
	log := hclog.NewNullLogger()
	a, err := agent.New(cfg, agent.Options{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	secrets := redact.New(cfg.Secrets...)
	rl := &reloader{paths: []string{path}, agent: a, log: log, secrets: secrets}
	srv := httptest.NewServer(api.Handler(api.Options{Agent: a, Logger: log,
		Reload: rl.reload, LastReload: rl.lastReload, Plan: rl.plan, Redact: secrets}))
	t.Cleanup(func() {
		srv.Close()
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("agent stopped with an error: %v", err)
			}
		case <-time.After(20 * time.Second):
			t.Error("agent did not stop within 20s")
		}
	})
	deadline := time.Now().Add(10 * time.Second)
	for !a.Ready() {
		if time.Now().After(deadline) {
			t.Fatal("agent not ready within 10s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	return srv.URL
}

func runCLI(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = run(args, &out, &errb)
	return code, out.String(), errb.String()
}

// TestPlanAndReload: electd plan against a real agent exits 0 when a reload
// would change nothing, 2 when it would (listing each job with what
// changed), 1 on any error; electd reload then does what the plan said and
// prints it in the same form.
func TestPlanAndReload(t *testing.T) {
	t.Setenv(envAddr, "")
	t.Setenv(envToken, "")
	dir := t.TempDir()
	db := filepath.Join(dir, "leases.db")
	running := filepath.Join(dir, "electd.hcl")
	steady := planRunJob("steady", `["sleep", "600"]`)
	v1 := steady + planRunJob("billing", `["sleep", "600"]`) + planRunJob("legacy", `["sleep", "600"]`)
	planFiles(t, running, db, v1)
	url := startPlanAgent(t, running)

	// Nothing changed: exit 0.
	code, out, errOut := runCLI("plan", "-addr", url)
	if code != planNoChanges || !strings.Contains(out, "No changes: a reload of "+running+" would keep all 3 jobs") {
		t.Errorf("plan of the running files: exit %d, want 0\n%s%s", code, out, errOut)
	}

	// A staged configuration: billing's command and ttl changed, legacy
	// removed, audit added, steady as it was.
	staged := filepath.Join(dir, "staged.hcl")
	v2 := steady + strings.Replace(planRunJob("billing", `["sleep", "601"]`), `"3s"`, `"4s"`, 1) +
		"job \"audit\" {" + planTiming + "}\n"
	planFiles(t, staged, db, v2)
	code, out, errOut = runCLI("plan", "-addr", url, "-config", staged)
	wantLines := []string{
		"A reload of " + staged + " would:",
		"  + audit\n",
		"  ~ billing: run.command, ttl\n",
		"  - legacy\n",
		"Plan: 1 to add, 1 to restart, 1 to remove, 1 kept (leadership, token and child untouched).",
	}
	if code != planChanges {
		t.Errorf("plan of a changed configuration: exit %d, want 2\n%s%s", code, out, errOut)
	}
	for _, w := range wantLines {
		if !strings.Contains(out, w) {
			t.Errorf("plan output lacks %q:\n%s", w, out)
		}
	}
	if strings.Contains(out, "steady") {
		t.Errorf("plan lists the kept job:\n%s", out)
	}

	// -json: the API's answer, the same exit status.
	code, out, _ = runCLI("plan", "-addr", url, "-json", staged)
	var st api.PlanStatus
	if err := json.Unmarshal([]byte(out), &st); err != nil || code != planChanges {
		t.Fatalf("plan -json: exit %d, %v:\n%s", code, err, out)
	}
	if got := strings.Join(st.Changes.Attributes["billing"], ","); got != "run.command,ttl" || strings.Join(st.Kept, ",") != "steady" {
		t.Errorf("plan -json: %+v", st)
	}

	// Only the text of a job changed: it keeps running (an update in place
	// with nothing to apply), and the plan says why.
	commented := filepath.Join(dir, "commented.hcl")
	planFiles(t, commented, db, steady+strings.Replace(planRunJob("billing", `["sleep", "600"]`), "  run {", "  # billing\n  run {", 1)+
		planRunJob("legacy", `["sleep", "600"]`))
	code, out, _ = runCLI("plan", "-addr", url, commented)
	if code != planChanges || !strings.Contains(out, "  * billing (no attribute's value changed, only the text") {
		t.Errorf("plan of a comment: exit %d, want 2 and the reason:\n%s", code, out)
	}

	// The provider's settings changed: every job on it restarts, and the
	// plan names the attribute, never its value (a DSN is a secret).
	moved := filepath.Join(dir, "moved.hcl")
	planFiles(t, moved, filepath.Join(dir, "c4n4ry-leases.db"), v1)
	for _, args := range [][]string{{"plan", "-addr", url, moved}, {"plan", "-json", "-addr", url, moved}} {
		code, out, errOut = runCLI(args...)
		if code != planChanges || strings.Count(out, "sql.main.dsn") != 3 || strings.Contains(out+errOut, "c4n4ry") {
			t.Errorf("%s: exit %d, want 2, sql.main.dsn for each job and no DSN\n%s%s", strings.Join(args[:2], " "), code, out, errOut)
		}
	}

	// Errors exit 1: an invalid file (shown as electd check shows it), a
	// file the agent cannot load, an agent that is not there, bad usage.
	invalid := filepath.Join(dir, "invalid.hcl")
	os.WriteFile(invalid, []byte("job \"x\" {\n  ttl = \"soon\"\n}\n"), 0o644)
	code, out, errOut = runCLI("plan", "-addr", url, invalid)
	if code != planError || !strings.Contains(errOut, "invalid.hcl line 2") || !strings.Contains(errOut, `ttl = "soon"`) {
		t.Errorf("plan of an invalid file: exit %d, want 1 with the diagnostic and its source line\n%s%s", code, out, errOut)
	}
	unset := filepath.Join(dir, "unset.hcl")
	planFiles(t, unset, db, "job \"x\" {\n  run { command = [env(\"ELECTD_TEST_PLAN_UNSET\")] }\n}\n")
	os.Unsetenv("ELECTD_TEST_PLAN_UNSET")
	code, _, errOut = runCLI("plan", "-addr", url, unset)
	if code != planError || !strings.Contains(errOut, "the agent cannot load the configuration") || !strings.Contains(errOut, "Environment variable not set") {
		t.Errorf("plan of a file the agent's environment cannot load: exit %d, want 1\n%s", code, errOut)
	}
	if code, _, errOut = runCLI("plan", "-addr", "127.0.0.1:1", staged); code != planError || !strings.Contains(errOut, "cannot reach the agent") {
		t.Errorf("plan without an agent: exit %d, want 1\n%s", code, errOut)
	}
	if code, _, errOut = runCLI("plan", "-nope"); code != planError || !strings.Contains(errOut, "Usage: electd plan") {
		t.Errorf("plan -nope: exit %d, want 1 (2 means changes)\n%s", code, errOut)
	}

	// The running files become the staged ones; reload does what the plan
	// said, printed the same way.
	planFiles(t, running, db, v2)
	_, planned, _ := runCLI("plan", "-addr", url)
	code, out, errOut = runCLI("reload", "-addr", url)
	if code != 0 {
		t.Fatalf("reload: exit %d\n%s%s", code, out, errOut)
	}
	for _, w := range append(wantLines[1:4], "Reloaded: 1 added, 1 restarted, 1 removed, 1 kept (leadership, token and child untouched).") {
		if !strings.Contains(out, w) {
			t.Errorf("reload output lacks %q:\n%s", w, out)
		}
	}
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "  ") && !strings.Contains(planned, l+"\n") {
			t.Errorf("reload printed %q, which the plan did not:\n%s", l, planned)
		}
	}
	if code, out, _ = runCLI("plan", "-addr", url); code != planNoChanges {
		t.Errorf("plan after the reload: exit %d, want 0\n%s", code, out)
	}
	if code, out, _ = runCLI("reload", "-addr", url); code != 0 || !strings.Contains(out, "Reloaded: no changes; all 3 jobs kept") {
		t.Errorf("second reload: exit %d\n%s", code, out)
	}

	// A configuration the agent rejects: exit 1, the running one stays.
	os.WriteFile(running, []byte("job \"x\" {\n  ttl = \"soon\"\n}\n"), 0o644)
	if code, _, errOut = runCLI("reload", "-addr", url); code != 1 || !strings.Contains(errOut, "keeps running the previous one") {
		t.Errorf("reload of an invalid file: exit %d, want 1\n%s", code, errOut)
	}
}

// TestPlanAndReloadVars: plan and reload with -var on an agent whose jobs
// are a for_each over a variable: the instances added and removed are
// listed, those that stay are kept, and the agent keeps a reload's
// variables for the reloads after it (SIGHUP), until another reload gives
// its own.
func TestPlanAndReloadVars(t *testing.T) {
	t.Setenv(envAddr, "")
	t.Setenv(envToken, "")
	dir := t.TempDir()
	path := filepath.Join(dir, "electd.hcl")
	planFiles(t, path, filepath.Join(dir, "leases.db"), `
variable "shards" {
  type    = number
  default = 2
}
job "shard" {
  for_each = toset(range(var.shards))`+planTiming+`  run {
    command      = ["sleep", "600"]
    stop_timeout = "1s"
  }
}
`)
	url := startPlanAgent(t, path)
	varFile := filepath.Join(dir, "four.electdvars")
	if err := os.WriteFile(varFile, []byte("shards = 4\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	check := func(what string, code, wantCode int, out string, want ...string) {
		t.Helper()
		if code != wantCode {
			t.Errorf("%s: exit %d, want %d\n%s", what, code, wantCode, out)
		}
		for _, w := range want {
			if !strings.Contains(out, w) {
				t.Errorf("%s: no %q in\n%s", what, w, out)
			}
		}
	}
	code, out, errOut := runCLI("plan", "-addr", url, "-var-file", varFile)
	check("plan -var-file", code, planChanges, out+errOut, "  + shard.2\n", "  + shard.3\n", "Plan: 2 to add, 0 to restart, 0 to remove, 2 kept")
	code, out, errOut = runCLI("plan", "-addr", url, "-config", path, "-var", "shards=x")
	check("plan -var shards=x", code, planError, out+errOut, "Invalid value for input variable")

	// Judged by the agent: the error says what to change, not only what
	// is wrong, and the running configuration stays.
	code, out, errOut = runCLI("plan", "-addr", url, "-var", "shards=x")
	check("plan -var shards=x (the agent's verdict)", code, planError, out+errOut, "electd.hcl:11: Invalid value for input variable: The value -var gives var.shards does not fit its type number: a number is required.")
	code, out, errOut = runCLI("reload", "-addr", url, "-var", "shards=x")
	check("reload -var shards=x", code, 1, out+errOut, "keeps running the previous one", "does not fit its type number")

	code, out, errOut = runCLI("reload", "-addr", url, "-var", "shards=4")
	check("reload -var shards=4", code, 0, out+errOut, "  + shard.2\n", "  + shard.3\n", "Reloaded: 2 added, 0 restarted, 0 removed, 2 kept")
	// A reload without -var (SIGHUP's) keeps the 4.
	code, out, errOut = runCLI("reload", "-addr", url)
	check("reload", code, 0, out+errOut, "Reloaded: no changes; all 4 jobs kept")
	code, out, errOut = runCLI("reload", "-addr", url, "-var", "shards=1")
	check("reload -var shards=1", code, 0, out+errOut, "  - shard.1\n", "  - shard.2\n", "  - shard.3\n", "Reloaded: 0 added, 0 restarted, 3 removed, 1 kept")
}
