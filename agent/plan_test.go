package agent

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
)

// planConfig is two providers on one SQLite file (t in a table of its own)
// and the job blocks given.
func planConfig(db, tTable, jobs string) string {
	return fmt.Sprintf(`
agent {
  node_id          = "node-1"
  listen           = ""
  shutdown_timeout = "10s"
}
provider "sql" "s" {
  driver = "sqlite"
  dsn    = %q
}
provider "sql" "t" {
  driver = "sqlite"
  dsn    = %q
  table  = %q
}
%s`, db, db, tTable, jobs)
}

// planJob is a job on provider whose child writes "PID TOKEN" to
// dir/NAME.pid; extra goes in its run block.
func planJob(name, provider, dir, extra string) string {
	return fmt.Sprintf(`
job %q {
  provider = %s
%s
  run {
    command      = ["sh", "-c", "echo \"$$ $ELECTD_TOKEN\" > %s/%s.pid; exec sleep 600"]
    stop_timeout = "1s"
%s
  }
}
`, name, provider, quick, dir, name, extra)
}

// TestPlanIsWhatReloadDoes: the plan of a configuration, asked before the
// reload, is exactly what the reload then does, and the jobs behave as it
// says: kept and updated ones keep child and token, restarted ones get new
// ones. The cases: a job added, one removed, one whose run.command changed,
// one whose provider's settings changed, one only reformatted (updated in
// place, with nothing to apply), one whose run.stop_timeout changed
// (updated in place), one untouched.
func TestPlanIsWhatReloadDoes(t *testing.T) {
	db, dir := sqliteDB(t), t.TempDir()
	keep := planJob("keep", "sql.s", dir, "")
	reformat := planJob("reformat", "sql.s", dir, "")
	v1 := planConfig(db, "t_leases", keep+reformat+
		planJob("command", "sql.s", dir, "")+
		planJob("remove", "sql.s", dir, "")+
		planJob("on-t", "sql.t", dir, "")+
		planJob("stop", "sql.s", dir, ""))
	a := startAgent(t, loadConfig(t, v1))
	pids, toks := map[string]int{}, map[string]uint64{}
	for _, name := range []string{"keep", "reformat", "command", "remove", "on-t", "stop"} {
		pids[name], toks[name] = readPidToken(t, dir+"/"+name+".pid")
	}

	// Nothing changed: nothing to do.
	if p := a.Plan(loadConfig(t, v1)); p.Changes() || strings.Join(p.Kept, ",") != "keep,reformat,command,remove,on-t,stop" {
		t.Errorf("plan of the same configuration: %+v, want every job kept", p)
	}

	// The reformatted job: a comment and the attributes laid out anew.
	reformatted := strings.Replace(reformat, "  run {\n", "  # only layout and a comment differ\n  run   {\n\n", 1)
	v2 := planConfig(db, "t2_leases", keep+reformatted+
		planJob("command", "sql.s", dir, "")+
		planJob("on-t", "sql.t", dir, "")+
		strings.Replace(planJob("stop", "sql.s", dir, ""), `stop_timeout = "1s"`, `stop_timeout = "1500ms"`, 1)+
		planJob("added", "sql.s", dir, ""))
	v2 = strings.Replace(v2, "/command.pid; exec sleep 600", "/command.pid; exec sleep 601", 1)
	want := Plan{
		Added:   []string{"added"},
		Removed: []string{"remove"},
		Restarted: []Change{
			{Job: "command", Attributes: []string{"run.command"}},
			{Job: "on-t", Attributes: []string{"sql.t.table"}},
		},
		Updated: []Change{
			{Job: "reformat"},
			{Job: "stop", Attributes: []string{"run.stop_timeout"}},
		},
		Kept: []string{"keep"},
	}
	cfg := loadConfig(t, v2)
	plan := a.Plan(cfg)
	if !reflect.DeepEqual(plan, want) {
		t.Errorf("plan:\n%+v\nwant\n%+v", plan, want)
	}
	done, err := a.Reload(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(done, plan) {
		t.Errorf("the reload did\n%+v\nbut the plan said\n%+v", done, plan)
	}

	// What the plan said happened.
	for _, name := range []string{"keep", "reformat", "stop"} {
		if pid, tok := readPidToken(t, dir+"/"+name+".pid"); pid != pids[name] || tok != toks[name] || !pidAlive(pid) {
			t.Errorf("job %s, kept or updated: child %d token %d, want child %d token %d alive", name, pid, tok, pids[name], toks[name])
		}
		if st := statusOf(a, name); st.State != StateLeader || st.Token != toks[name] {
			t.Errorf("job %s, kept or updated: %+v, want leader with token %d", name, st, toks[name])
		}
		if got := reasons(a, name, "demoted"); len(got) != 0 {
			t.Errorf("job %s, kept or updated, was demoted: %v", name, got)
		}
	}
	for _, name := range []string{"command", "on-t"} {
		eventually(t, 10*time.Second, name+"'s old child gone", func() bool { return !pidAlive(pids[name]) })
		if pid, _ := readPidToken(t, dir+"/"+name+".pid"); pid == pids[name] {
			t.Errorf("restarted job %s: same child %d", name, pid)
		}
	}
	eventually(t, 10*time.Second, "removed job's child gone", func() bool { return !pidAlive(pids["remove"]) })
	readPidToken(t, dir+"/added.pid")

	// After the reload, the same configuration plans nothing; the agent
	// block is compared with the one the agent started with.
	again := a.Plan(loadConfig(t, strings.Replace(v2, `shutdown_timeout = "10s"`, "shutdown_timeout = \"20s\"\n  tags = { zone = \"b\" }", 1)))
	if again.Changes() || len(again.Kept) != 6 || strings.Join(again.Agent, ",") != "shutdown_timeout,tags" {
		t.Errorf("plan after the reload: %+v, want 5 kept and the agent's shutdown_timeout and tags", again)
	}
}
