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
	eventually(t, 10*time.Second, "removed job's child gone", func() bool { return !pidAlive(removePid) })
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

// shardJob is a job block with for_each over the shards, whose children
// write "PID TOKEN" to dir/shard.KEY.pid.
func shardJob(dir, shards string) string {
	return fmt.Sprintf(`
job "shard" {
  for_each = toset(%s)
%s
  run {
    command      = ["sh", "-c", "echo \"$$ $ELECTD_TOKEN\" > %s/shard.${each.key}.pid; exec sleep 600"]
    stop_timeout = "1s"
  }
}
`, shards, quick, dir)
}

// A reload that grows and then shrinks a for_each set starts the new
// instances and stops the ones gone; the instances that stay keep their
// leadership, token and child throughout.
func TestReloadGrowsAndShrinksForEach(t *testing.T) {
	db, dir := sqliteDB(t), t.TempDir()
	a := startAgent(t, loadConfig(t, agentConfig("node-1", db, shardJob(dir, `["a", "b"]`))))
	type child struct {
		pid int
		tok uint64
	}
	kept := map[string]child{}
	for _, k := range []string{"a", "b"} {
		pid, tok := readPidToken(t, dir+"/shard."+k+".pid")
		kept[k] = child{pid, tok}
	}
	unchanged := func(when string) {
		t.Helper()
		for k, c := range kept {
			if pid, tok := readPidToken(t, dir+"/shard."+k+".pid"); pid != c.pid || tok != c.tok {
				t.Errorf("%s: shard.%s child %d token %d, want child %d token %d", when, k, pid, tok, c.pid, c.tok)
			}
			if s := a.job("shard." + k); s.state != "leader" || s.token != c.tok {
				t.Errorf("%s: shard.%s status %+v", when, k, s)
			}
		}
	}

	grown, err := a.Reload(context.Background(), loadConfig(t, agentConfig("node-1", db, shardJob(dir, `["a", "b", "c", "d"]`))))
	if err != nil {
		t.Fatal(err)
	}
	if want := (Plan{Kept: []string{"shard.a", "shard.b"}, Added: []string{"shard.c", "shard.d"}}); fmt.Sprint(grown) != fmt.Sprint(want) {
		t.Errorf("growing: %+v, want %+v", grown, want)
	}
	cPid, _ := readPidToken(t, dir+"/shard.c.pid")
	readPidToken(t, dir+"/shard.d.pid")
	unchanged("after growing")

	shrunk, err := a.Reload(context.Background(), loadConfig(t, agentConfig("node-1", db, shardJob(dir, `["a", "b", "d"]`))))
	if err != nil {
		t.Fatal(err)
	}
	if want := (Plan{Kept: []string{"shard.a", "shard.b", "shard.d"}, Removed: []string{"shard.c"}}); fmt.Sprint(shrunk) != fmt.Sprint(want) {
		t.Errorf("shrinking: %+v, want %+v", shrunk, want)
	}
	eventually(t, 10*time.Second, "shard.c's child gone", func() bool { return !pidAlive(cPid) })
	if l := observe(t, db, "shard.c"); l.Holder != "" {
		t.Errorf("shard.c's lease still held by %q", l.Holder)
	}
	unchanged("after shrinking")
	if names := jobNames(a); names != "shard.a,shard.b,shard.d" {
		t.Errorf("jobs after shrinking %s", names)
	}
}
