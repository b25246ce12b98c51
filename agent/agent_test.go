package agent

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/electd/electd/actions/proc"
	"github.com/electd/electd/config"
	"github.com/electd/electd/metrics"
	"github.com/electd/electd/providers"
	sqlprovider "github.com/electd/electd/providers/sql"
)

// quick timings that pass electd check's rule.
const quick = `
  ttl         = "3s"
  renew_every = "500ms"
  retry_every = "200ms"
`

func observe(t *testing.T, db, job string) providers.Lease {
	t.Helper()
	p, err := sqlprovider.New(context.Background(), sqlprovider.Settings{Driver: "sqlite", DSN: db}, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	l, err := p.Observe(context.Background(), job)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func pidAlive(pid int) bool { return proc.Alive(pid) }

// on_elected execs finish before run starts; on_demoted execs run after run
// has stopped; the lease is released on a clean stop; every command gets
// the ELECTD_* environment and ${event.*}.
func TestHookOrderAndShutdown(t *testing.T) {
	db, dir := sqliteDB(t), t.TempDir()
	out := filepath.Join(dir, "order")
	cfg := loadConfig(t, agentConfig("node-1", db, fmt.Sprintf(`
job "ordered" {
%s
  run {
    command      = ["sh", "-c", "trap 'echo run-stop >> %[2]s; exit 0' TERM; echo \"run-start $ELECTD_TOKEN $ELECTD_EVENT ${event.node}\" >> %[2]s; while :; do sleep 0.05; done"]
    stop_timeout = "1s"
  }
  on_elected {
    exec { command = ["sh", "-c", "sleep 0.3; echo \"elected $ELECTD_JOB $ELECTD_NODE $ELECTD_LEADER ${event.token}\" >> %[2]s"] }
  }
  on_demoted {
    exec { command = ["sh", "-c", "echo \"demoted ${event.previous_leader}\" >> %[2]s"] }
  }
}`, quick, out)))
	a := startAgent(t, cfg)
	eventually(t, 10*time.Second, "run started", func() bool { return len(lines(t, out)) >= 2 })
	if s := a.job("ordered"); s.state != "leader" || s.leader != "node-1" || s.token != 1 {
		t.Errorf("status %+v, want leader node-1 token 1", s)
	}
	a.stop(t)
	want := []string{"elected ordered node-1 node-1 1", "run-start 1 elected node-1", "run-stop", "demoted node-1"}
	if got := lines(t, out); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("order of hooks and run:\n got %q\nwant %q", got, want)
	}
	if l := observe(t, db, "ordered"); l.Holder != "" || l.Token != 1 {
		t.Errorf("after a clean stop the lease is %+v, want released with token 1 kept", l)
	}
}

// Three agents: one leader; the others follow and see every new leader
// (on_leader_change with previous_leader); on_demoted fires only where the
// node led; a stopped leader hands over quickly.
func TestFailoverBetweenAgents(t *testing.T) {
	db, dir := sqliteDB(t), t.TempDir()
	job := func(node string) string {
		return agentConfig(node, db, fmt.Sprintf(`
job "w" {
%s
  run {
    command = ["sh", "-c", "echo \"$ELECTD_NODE $ELECTD_TOKEN\" >> %[2]s/starts; exec sleep 600"]
    stop_timeout = "1s"
  }
  on_leader_change {
    exec { command = ["sh", "-c", "echo \"${event.node} saw ${event.leader} after '${event.previous_leader}'\" >> %[2]s/changes"] }
  }
  on_demoted {
    exec { command = ["sh", "-c", "echo \"${event.node}\" >> %[2]s/demoted"] }
  }
}`, quick, dir))
	}
	a1 := startAgent(t, loadConfig(t, job("node-1")))
	eventually(t, 10*time.Second, "node-1 runs the command", func() bool { return len(lines(t, dir+"/starts")) == 1 })
	a2 := startAgent(t, loadConfig(t, job("node-2")))
	a3 := startAgent(t, loadConfig(t, job("node-3")))
	eventually(t, 10*time.Second, "followers see node-1", func() bool {
		return a2.job("w").leader == "node-1" && a3.job("w").leader == "node-1"
	})
	if s := a2.job("w"); s.state != "follower" {
		t.Errorf("node-2 state %q, want follower", s.state)
	}
	stopped := time.Now()
	a1.stop(t)
	var next *testAgent
	eventually(t, 10*time.Second, "another node leads", func() bool {
		for _, a := range []*testAgent{a2, a3} {
			if a.job("w").state == "leader" {
				next = a
				return true
			}
		}
		return false
	})
	t.Logf("graceful handover on SQLite (no notification, retry_every 200ms): %s", time.Since(stopped).Round(time.Millisecond))
	newLeader := next.job("w").leader
	eventually(t, 10*time.Second, "both followers saw the change", func() bool { return len(lines(t, dir+"/changes")) >= 3 })
	eventually(t, 10*time.Second, "the new leader runs the command", func() bool { return len(lines(t, dir+"/starts")) >= 2 })
	changes := lines(t, dir+"/changes")
	for _, want := range []string{
		"node-1 saw node-1 after ''",
		"node-2 saw " + newLeader + " after 'node-1'",
		"node-3 saw " + newLeader + " after 'node-1'",
	} {
		if !contains(changes, want) {
			t.Errorf("on_leader_change: no %q in %q", want, changes)
		}
	}
	if d := lines(t, dir+"/demoted"); len(d) != 1 || d[0] != "node-1" {
		t.Errorf("on_demoted fired on %q, want only node-1", d)
	}
	starts := lines(t, dir+"/starts")
	if len(starts) != 2 || starts[0] != "node-1 1" || starts[1] != newLeader+" 2" {
		t.Errorf("run starts %q, want node-1 with token 1, then %s with token 2", starts, newLeader)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// Step-down releases and holds off for one ttl, so another node takes over;
// asked of a follower it fails.
func TestStepDown(t *testing.T) {
	db := sqliteDB(t)
	cfg := func(node string) *config.Config {
		return loadConfig(t, agentConfig(node, db, `job "s" {`+quick+`}`))
	}
	a1 := startAgent(t, cfg("node-1"))
	eventually(t, 10*time.Second, "node-1 leads", func() bool { return a1.job("s").state == "leader" })
	a2 := startAgent(t, cfg("node-2"))
	eventually(t, 10*time.Second, "node-2 follows", func() bool { return a2.job("s").leader == "node-1" })
	if err := a2.StepDown(context.Background(), "s"); err == nil {
		t.Error("a follower accepted a step-down")
	}
	if err := a1.StepDown(context.Background(), "nope"); err == nil {
		t.Error("step-down of an unknown job succeeded")
	}
	if err := a1.StepDown(context.Background(), "s"); err != nil {
		t.Fatalf("step-down: %v", err)
	}
	eventually(t, 10*time.Second, "node-2 takes over", func() bool { return a2.job("s").state == "leader" })
	// node-1 holds off for a ttl and then just follows.
	turns(t, 3, a1, "s") // it asked the store three times since
	if s := a1.job("s"); s.state == "leader" {
		t.Errorf("node-1 leads again during its hold-off")
	}
}

// restart = "never": the child's exit gives up leadership (a new term
// follows); "on-failure" restarts a failing child in the same term and
// leaves a clean exit alone.
func TestRestartPolicies(t *testing.T) {
	t.Run("never", func(t *testing.T) {
		db, out := sqliteDB(t), filepath.Join(t.TempDir(), "runs")
		a := startAgent(t, loadConfig(t, agentConfig("node-1", db, fmt.Sprintf(`
job "n" {
%s
  run {
    command      = ["sh", "-c", "echo $ELECTD_TOKEN >> %s; exit 0"]
    restart      = "never"
    stop_timeout = "1s"
  }
}`, quick, out))))
		eventually(t, 10*time.Second, "two terms", func() bool { return len(lines(t, out)) >= 2 })
		a.stop(t)
		got := lines(t, out)
		if got[0] != "1" || got[1] != "2" {
			t.Errorf("tokens of successive runs %q, want 1 then 2 (each exit ends the term)", got)
		}
	})
	t.Run("on-failure", func(t *testing.T) {
		db, dir := sqliteDB(t), t.TempDir()
		m := metrics.New("test", "x")
		// Fails twice, then exits cleanly and is left alone.
		a := startAgent(t, loadConfig(t, agentConfig("node-1", db, fmt.Sprintf(`
job "f" {
%s
  run {
    command = ["sh", "-c", "echo $ELECTD_TOKEN >> %[2]s/runs; [ $(wc -l < %[2]s/runs) -ge 3 ] && exit 0; exit 1"]
    restart      = "on-failure"
    restart_wait = "100ms"
    stop_timeout = "1s"
  }
}`, quick, dir))), func(o *Options) { o.Metrics = m })
		eventually(t, 15*time.Second, "the clean exit", func() bool {
			return testutil.ToFloat64(m.ActionRuns.WithLabelValues("f", "elected", "run", "ok")) == 1
		})
		// No fourth run after the clean exit: the term went on for four
		// renewals (2s, twenty restart_waits) since.
		turns(t, 4, a, "f")
		got := lines(t, dir+"/runs")
		if strings.Join(got, ",") != "1,1,1" {
			t.Errorf("runs %q, want three in the same term (token 1) and no more", got)
		}
		if s := a.job("f"); s.state != "leader" {
			t.Errorf("state %q after a clean exit, want leader (the lease is kept)", s.state)
		}
	})
}

// A store that stops answering makes the leader kill its child before its
// term can end: the child, which ignores SIGTERM, is dead before
// last successful renewal sent + ttl*0.99.
func TestChildDeadBeforeTermEnds(t *testing.T) {
	db, dir := sqliteDB(t), t.TempDir()
	var f *faulty
	cfg := loadConfig(t, agentConfig("node-1", db, fmt.Sprintf(`
job "safe" {
  ttl         = "3s"
  renew_every = "500ms"
  retry_every = "200ms"
  run {
    command      = ["sh", "-c", "trap '' TERM; echo $$ > %s/pid; while :; do sleep 0.05; done"]
    stop_timeout = "1s"
  }
}`, dir)))
	a := startAgent(t, cfg, func(o *Options) {
		open := o.Open
		o.Open = func(ctx context.Context, p config.Provider) (providers.Provider, error) {
			inner, err := open(ctx, p)
			f = newFaulty(inner, realClock{})
			return f, err
		}
	})
	var pid int
	eventually(t, 10*time.Second, "child running", func() bool {
		b, err := os.ReadFile(dir + "/pid")
		pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil && pid > 0
	})
	eventually(t, 10*time.Second, "a renewal succeeded", func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		return !f.lastRenew.IsZero()
	})
	f.setRenew(nil, true) // the store hangs from now on
	var dead time.Time
	eventually(t, 10*time.Second, "child killed", func() bool {
		if pidAlive(pid) {
			return false
		}
		dead = time.Now()
		return true
	})
	f.mu.Lock()
	validUntil := f.lastRenew.Add(3 * time.Second * 99 / 100)
	f.mu.Unlock()
	if dead.After(validUntil) {
		t.Errorf("child died %s after its term ended", dead.Sub(validUntil))
	} else {
		t.Logf("child dead %s before the term ended", validUntil.Sub(dead).Round(time.Millisecond))
	}
	_ = a
}

// The agent's second signal: Kill ends every child at once.
func TestKill(t *testing.T) {
	db, dir := sqliteDB(t), t.TempDir()
	a := startAgent(t, loadConfig(t, agentConfig("node-1", db, fmt.Sprintf(`
job "k" {
%s
  run {
    command      = ["sh", "-c", "trap '' TERM; echo $$ > %s/pid; while :; do sleep 0.05; done"]
    stop_timeout = "1s"
  }
}`, quick, dir))))
	var pid int
	eventually(t, 10*time.Second, "child running", func() bool {
		b, err := os.ReadFile(dir + "/pid")
		pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil && pid > 0
	})
	a.Kill()
	eventually(t, 10*time.Second, "child killed", func() bool { return !pidAlive(pid) })
}

// A command that starts after the agent's second signal (it was starting
// when Kill ran, or started later) is killed as soon as it is known: Kill
// found no process to kill for a command whose start had not yet returned
// (TestKill under make test's load).
func TestKillCoversCommandsStartedAfter(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	r := &runner{job: "k", log: hclog.NewNullLogger(), shim: self}
	r.killAll()
	s, err := r.start("run", config.Command{Argv: config.ListOf("sh", "-c", "trap '' TERM; while :; do sleep 0.05; done")}, config.Event{Type: "elected"})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("a command started after Kill still runs 10s later")
	}
	r.reap(s, false)
}
