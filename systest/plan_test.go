package systest

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/electd/electd/internal/cluster"
)

// pidRunJob is a job whose child writes "PID TOKEN" to dir/NAME.pid; arg
// is one more argument of the child's command.
func pidRunJob(name, dir, arg string) string {
	return cluster.RunJob(name, defaultTiming, "sh", "-c",
		fmt.Sprintf(`echo "$$ $ELECTD_TOKEN" > %s/%s.pid; exec sleep 600`, dir, name), "child", arg)
}

// TestPlanThenReload: a real agent, its configuration edited on disk.
// `electd plan` lists what a reload would do and changes nothing (exit 2);
// `electd reload` then does exactly that and prints it the same way; the
// kept job's child keeps its pid and its token throughout.
func TestPlanThenReload(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	addr := freeLoopback(t)
	cfg := filepath.Join(dir, "plan-1.hcl")
	db := cluster.Block("sql", cluster.Str("driver", "sqlite"), cluster.Str("dsn", filepath.Join(dir, "leases.db")))
	write := func(agentAttrs []string, jobs ...string) {
		t.Helper()
		blocks := append([]string{cluster.AgentBlock("plan-1", addr, append(agentAttrs, cluster.Str("api_token", apiToken))...), db}, jobs...)
		if err := cluster.WriteConfig(cfg, blocks...); err != nil {
			t.Fatal(err)
		}
	}
	write(nil, pidRunJob("steady", dir, "1"), pidRunJob("edited", dir, "1"), pidRunJob("legacy", dir, "1"))
	startNode(t, "plan-1", cfg, addr)
	steadyPid, steadyTok := readPidToken(t, dir+"/steady.pid")
	editedPid, _ := readPidToken(t, dir+"/edited.pid")
	legacyPid, _ := readPidToken(t, dir+"/legacy.pid")
	withToken := []string{"ELECTD_API_TOKEN=" + apiToken, "ELECTD_ADDR="}

	out, errOut, code := cli(t, withToken, "plan", "-addr", addr)
	if code != 0 || !strings.Contains(out, "No changes: a reload of "+cfg+" would keep all 3 jobs") {
		t.Fatalf("plan of the running files: exit %d, want 0\n%s%s", code, out, errOut)
	}
	if _, errOut, code := cli(t, []string{"ELECTD_API_TOKEN=", "ELECTD_ADDR="}, "plan", "-addr", addr); code != 1 || !strings.Contains(errOut, "401") {
		t.Errorf("plan without the api_token: exit %d, want 1 (401)\n%s", code, errOut)
	}

	// The edit: edited's command changes, legacy goes, added comes, and a
	// tag is added to the agent block (which a reload does not apply).
	write([]string{`tags = { zone = "z1" }`}, pidRunJob("steady", dir, "1"), pidRunJob("edited", dir, "2"), pidRunJob("added", dir, "1"))
	out, errOut, code = cli(t, withToken, "plan", "-addr", addr)
	jobLines := []string{"  + added\n", "  ~ edited: run.command\n", "  - legacy\n"}
	for _, w := range append(jobLines, "Plan: 1 to add, 1 to restart, 1 to remove, 1 kept",
		"Warning: the agent block changed (tags)") {
		if !strings.Contains(out, w) {
			t.Errorf("plan lacks %q:\n%s", w, out)
		}
	}
	if code != 2 {
		t.Fatalf("plan of the edited files: exit %d, want 2\n%s%s", code, out, errOut)
	}
	// A plan changes nothing: the children are the same now, and the
	// reload below still finds every change to make (a plan that had
	// applied the files would leave it nothing to add, restart or remove).
	for name, pid := range map[string]int{"steady": steadyPid, "edited": editedPid, "legacy": legacyPid} {
		if p, _ := readPidToken(t, dir+"/"+name+".pid"); p != pid {
			t.Errorf("after the plan, %s's child is %d, was %d", name, p, pid)
		}
	}

	out, errOut, code = cli(t, withToken, "reload", "-addr", addr)
	if code != 0 {
		t.Fatalf("reload: exit %d\n%s%s", code, out, errOut)
	}
	for _, w := range append(jobLines, "Reloaded: 1 added, 1 restarted, 1 removed, 1 kept", "Warning: the agent block changed (tags)") {
		if !strings.Contains(out, w) {
			t.Errorf("reload lacks %q:\n%s", w, out)
		}
	}
	if pid, tok := readPidToken(t, dir+"/steady.pid"); pid != steadyPid || tok != steadyTok {
		t.Errorf("kept job after the reload: child %d token %s, want child %d token %s", pid, tok, steadyPid, steadyTok)
	}
	if _, err := cluster.WaitGone(editedPid, 10*time.Second); err != nil {
		t.Errorf("edited job's old child: %v", err)
	}
	if pid, _ := readPidToken(t, dir+"/edited.pid"); pid == editedPid {
		t.Errorf("edited job's child %d was not restarted", pid)
	}
	if _, err := cluster.WaitGone(legacyPid, 10*time.Second); err != nil {
		t.Errorf("removed job's child: %v", err)
	}
	readPidToken(t, dir+"/added.pid")

	if out, errOut, code = cli(t, withToken, "plan", "-addr", addr); code != 0 || !strings.Contains(out, "Warning: the agent block changed (tags)") {
		t.Errorf("plan after the reload: exit %d, want 0 and the agent block still pending\n%s%s", code, out, errOut)
	}
}
