package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/electd/electd/config"
	"github.com/electd/electd/providers"
)

// pidJob is a job whose child writes "PID TOKEN" to dir/NAME.pid.
func pidJob(name, dir, extra string) string {
	return fmt.Sprintf(`
job %q {
%s
  run {
    command      = ["sh", "-c", "echo \"$$ $ELECTD_TOKEN\" > %s/%s.pid; exec sleep 600"]
    stop_timeout = "1s"
%s
  }
}
`, name, quick, dir, name, extra)
}

func readPidToken(t *testing.T, path string) (int, uint64) {
	t.Helper()
	var pid int
	var tok uint64
	eventually(t, 10*time.Second, "child of "+path, func() bool {
		b, err := os.ReadFile(path)
		f := strings.Fields(string(b))
		if err != nil || len(f) != 2 {
			return false
		}
		pid, _ = strconv.Atoi(f[0])
		tok, _ = strconv.ParseUint(f[1], 10, 64)
		return pid > 0 && pidAlive(pid)
	})
	return pid, tok
}

func TestReload(t *testing.T) {
	db, dir := sqliteDB(t), t.TempDir()
	keep := pidJob("keep", dir, "")
	v1 := agentConfig("node-1", db, keep+pidJob("change", dir, "")+pidJob("remove", dir, ""))
	a := startAgent(t, loadConfig(t, v1))
	keepPid, keepTok := readPidToken(t, dir+"/keep.pid")
	changePid, _ := readPidToken(t, dir+"/change.pid")
	removePid, _ := readPidToken(t, dir+"/remove.pid")
	os.Remove(dir + "/change.pid")

	v2 := agentConfig("node-1", db, keep+pidJob("change", dir, `    env = { CHANGED = "yes" }`)+pidJob("added", dir, ""))
	sum, err := a.Reload(context.Background(), loadConfig(t, v2))
	if err != nil {
		t.Fatal(err)
	}
	want := Plan{Kept: []string{"keep"}, Restarted: []Change{{Job: "change", Attributes: []string{"run.env"}}},
		Added: []string{"added"}, Removed: []string{"remove"}}
	if fmt.Sprint(sum) != fmt.Sprint(want) {
		t.Errorf("reload summary %+v, want %+v", sum, want)
	}

	// The unchanged job's child and token are untouched.
	if pid, tok := readPidToken(t, dir+"/keep.pid"); pid != keepPid || tok != keepTok {
		t.Errorf("unchanged job: child %d token %d after reload, want child %d token %d", pid, tok, keepPid, keepTok)
	}
	if s := a.job("keep"); s.state != "leader" || s.token != keepTok {
		t.Errorf("unchanged job status %+v", s)
	}
	// The changed job stepped down and started again: new child, new term.
	newPid, newTok := readPidToken(t, dir+"/change.pid")
	if newPid == changePid || pidAlive(changePid) {
		t.Errorf("changed job: old child %d alive=%v, new child %d", changePid, pidAlive(changePid), newPid)
	}
	if newTok != 2 {
		t.Errorf("changed job token %d after restart, want 2 (a new term)", newTok)
	}
	// The removed job's child is gone and its lease released.
	eventually(t, 5*time.Second, "removed job's child gone", func() bool { return !pidAlive(removePid) })
	if l := observe(t, db, "remove"); l.Holder != "" {
		t.Errorf("removed job's lease still held by %q", l.Holder)
	}
	readPidToken(t, dir+"/added.pid")
	if names := jobNames(a); names != "keep,change,added" {
		t.Errorf("jobs after reload %s, want keep,change,added", names)
	}
}

func jobNames(a *testAgent) string {
	var n []string
	for _, j := range a.Jobs() {
		n = append(n, j.Job)
	}
	return strings.Join(n, ",")
}

// A provider that cannot be opened rejects the reload; nothing changes.
func TestReloadRejectedKeepsRunning(t *testing.T) {
	db, dir := sqliteDB(t), t.TempDir()
	keep := pidJob("keep", dir, "")
	a := startAgent(t, loadConfig(t, agentConfig("node-1", db, keep)), func(o *Options) {
		open := o.Open
		o.Open = func(ctx context.Context, p config.Provider) (providers.Provider, error) {
			if p.Name == "broken" {
				return nil, errors.New("cannot reach the store")
			}
			return open(ctx, p)
		}
	})
	pid, tok := readPidToken(t, dir+"/keep.pid")
	broken := agentConfig("node-1", db, keep) + `
provider "sql" "broken" {
  driver = "sqlite"
  dsn    = "x.db"
}
job "other" {
  provider = sql.broken
}`
	// Two providers now: keep needs its provider named. Same file text for
	// keep would change, so give it explicitly in a copy of the block.
	broken = strings.Replace(broken, `job "keep" {`, `job "keep" {
  provider = sql.s`, 1)
	if _, err := a.Reload(context.Background(), loadConfig(t, broken)); err == nil {
		t.Fatal("reload with a provider that cannot open succeeded")
	}
	if p, tk := readPidToken(t, dir+"/keep.pid"); p != pid || tk != tok {
		t.Errorf("a rejected reload disturbed the running job: child %d token %d, was %d %d", p, tk, pid, tok)
	}
	if names := jobNames(a); names != "keep" {
		t.Errorf("jobs after a rejected reload: %s, want keep", names)
	}
}
