package agent

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/electd/electd/config"
	"github.com/electd/electd/metrics"
	"github.com/electd/electd/providers"
	sqlprovider "github.com/electd/electd/providers/sql"
)

// Tests of what an operator's mistake or an odd child must not break.

const quickTimings = `
  ttl         = "3s"
  renew_every = "500ms"
  retry_every = "200ms"
`

// Two agent processes given the same node_id never lead at once: the lease
// names the process, not only the node. The one that waits reports the
// clash once the other has kept the lease for longer than a ttl.
func TestSameNodeIDNeverBothLead(t *testing.T) {
	db := sqliteDB(t)
	jobs := "job \"dup\" {\n" + quickTimings + "}\n"
	a := startAgent(t, loadConfig(t, agentConfig("same", db, jobs)))
	eventually(t, 10*time.Second, "the first agent leads", func() bool { return a.job("dup").state == "leader" })
	b := startAgent(t, loadConfig(t, agentConfig("same", db, jobs)))

	// Watched until the twin has seen the clash and has been refused ten
	// times more since: never both leaders meanwhile.
	clashSeen, lastErr := uint64(0), ""
	deadline := time.Now().Add(30 * time.Second)
	for clashSeen == 0 || leaseOps(b, "dup") < clashSeen+10 {
		if a.job("dup").state == "leader" && b.job("dup").state == "leader" {
			t.Fatal("both agents with node_id \"same\" lead")
		}
		if time.Now().After(deadline) {
			t.Fatalf("the twin showed no clash and ten refusals since within 30s: last_error %q", lastErr)
		}
		for _, j := range b.Jobs() {
			lastErr = j.LastError
		}
		if clashSeen == 0 && strings.Contains(lastErr, "node_id clash") {
			clashSeen = leaseOps(b, "dup")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if s := a.job("dup"); s.state != "leader" {
		t.Fatalf("the first agent lost the job to its twin: %+v", s)
	}
	var errText string
	for _, j := range b.Jobs() {
		errText = j.LastError
	}
	if !strings.Contains(errText, "node_id clash") || !strings.Contains(errText, `"same"`) {
		t.Errorf("the waiting twin shows no clash naming the node_id: last_error %q", errText)
	}
	if l := observe(t, db, "dup"); NodeOf(l.Holder) != "same" || l.Holder == "same" {
		t.Errorf("holder %q: want node_id \"same\" with the process's incarnation", l.Holder)
	}
}

// A restarted agent under the same node_id finds the lease of its earlier
// process (killed without releasing) and waits for it to expire: it cannot
// know that process is dead.
func TestRestartedAgentWaitsForItsOldLease(t *testing.T) {
	db := sqliteDB(t)
	p := sqliteProvider(t, db)
	asked := time.Now() // the old lease expires 3s after this, or later
	old, err := p.Acquire(t.Context(), providers.AcquireRequest{Key: "job1", Holder: holderOf("node-1", "0badcafe"), TTL: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	a := startAgent(t, loadConfig(t, agentConfig("node-1", db, "job \"job1\" {\n"+quickTimings+"}\n")))
	turns(t, 2, a, "job1") // it asked twice
	if s := a.job("job1"); s.state == "leader" && time.Since(asked) < 3*time.Second {
		t.Fatalf("took the unexpired lease of an earlier process: %+v", s)
	}
	eventually(t, 10*time.Second, "leads once the old lease expired", func() bool {
		s := a.job("job1")
		return s.state == "leader" && s.token > old.Token
	})
	// Whenever it asked, it was elected only once the old lease expired.
	h, _ := a.History("job1")
	for _, tr := range h {
		if tr.Type == config.EventElected && tr.Time.Sub(asked) < 3*time.Second {
			t.Fatalf("elected %s after the old lease was taken, before its 3s ttl ended: %+v",
				tr.Time.Sub(asked), tr)
		}
	}
}

// A run command that exits at once under restart = "never" gives up the
// lease each time, and the terms are spaced: no election storm.
func TestTermsAreSpaced(t *testing.T) {
	dir := t.TempDir()
	m := metrics.New("test", "x")
	a := startAgent(t, loadConfig(t, agentConfig("node-1", sqliteDB(t), fmt.Sprintf(`
job "quick" {
  ttl         = "3s"
  renew_every = "500ms"
  retry_every = "100ms"
  run {
    command = ["sh", "-c", "echo x >> %s/starts"]
    restart      = "never"
    stop_timeout = "1s"
  }
}`, dir))), func(o *Options) { o.Metrics = m })
	// Without spacing the terms follow each other within milliseconds;
	// the pause after each doubles from retry_every: 100, 200, 400, 800ms.
	eventually(t, 15*time.Second, "five terms", func() bool { return len(lines(t, dir+"/starts")) >= 5 })
	h, _ := a.History("quick")
	var demoted time.Time
	pause, terms := 100*time.Millisecond, 0
	for _, tr := range h {
		switch tr.Type {
		case config.EventDemoted:
			demoted = tr.Time
		case config.EventElected:
			terms++
			if demoted.IsZero() {
				continue
			}
			if gap := tr.Time.Sub(demoted); gap < pause {
				t.Errorf("term %d began %s after the last ended, want at least %s", terms, gap, pause)
			}
			pause *= 2
		}
	}
	if terms < 5 {
		t.Errorf("%d terms in the history, want 5 or more: %+v", terms, h)
	}
}

// A node whose run command cannot start gives the job away, reports why,
// and another node, where the command exists, runs it.
func TestCannotStartGivesTheJobAway(t *testing.T) {
	db, dir := sqliteDB(t), t.TempDir()
	job := func(cmd string) string {
		return fmt.Sprintf(`
job "work" {
%s
  run {
    command      = [%s]
    hold_off     = "30s"
    stop_timeout = "1s"
  }
}`, quickTimings, cmd)
	}
	m := metrics.New("test", "x")
	broken := startAgent(t, loadConfig(t, agentConfig("broken", db, job(`"/nonexistent/electd-test-program"`))),
		func(o *Options) { o.Metrics = m })
	eventually(t, 10*time.Second, "the broken node gives the job away", func() bool {
		return testutil.ToFloat64(m.GivenAway.WithLabelValues("work", "cannot_start"))+
			testutil.ToFloat64(m.GivenAway.WithLabelValues("work", "failing")) >= 1
	})
	var last string
	for _, j := range broken.Jobs() {
		last = j.LastError
	}
	if !strings.Contains(last, "/nonexistent/electd-test-program") && !strings.Contains(last, "failed") {
		t.Errorf("last_error %q does not say why", last)
	}
	startAgent(t, loadConfig(t, agentConfig("healthy", db, job(fmt.Sprintf(`"sh", "-c", "echo $ELECTD_NODE >> %s/ran; sleep 60"`, dir)))))
	eventually(t, 15*time.Second, "the healthy node runs the job", func() bool {
		r := lines(t, filepath.Join(dir, "ran"))
		return len(r) > 0 && r[0] == "healthy"
	})
	if s := broken.job("work"); s.state == "leader" {
		t.Errorf("the broken node leads again within its hold_off: %+v", s)
	}
}

// A command that fails max_failures times in a row within failure_window
// makes the node give the job away for hold_off.
func TestFailingCommandGivesTheJobAway(t *testing.T) {
	m := metrics.New("test", "x")
	a := startAgent(t, loadConfig(t, agentConfig("node-1", sqliteDB(t), `
job "flaky" {
`+quickTimings+`
  run {
    command        = ["false"]
    restart        = "always"
    restart_wait   = "50ms"
    max_failures   = 3
    failure_window = "1m"
    hold_off       = "1h"
    stop_timeout   = "1s"
  }
}`)), func(o *Options) { o.Metrics = m })
	eventually(t, 10*time.Second, "gives the job away", func() bool {
		return testutil.ToFloat64(m.GivenAway.WithLabelValues("flaky", "failing")) == 1
	})
	if n := testutil.ToFloat64(m.ActionRuns.WithLabelValues("flaky", "elected", "run", "failed")); n != 3 {
		t.Errorf("%v failed runs before giving the job away, want 3", n)
	}
	turns(t, 3, a, "flaky") // it looked at the store three times while holding off
	if s := a.job("flaky"); s.state == "leader" {
		t.Errorf("leads again within hold_off: %+v", s)
	}
}

// A reload that restarts a job keeps what the job knew of the leader:
// on_elected's previous_leader names the node that led before.
func TestReloadKeepsPreviousLeader(t *testing.T) {
	db, dir := sqliteDB(t), t.TempDir()
	plain := "job \"j\" {\n" + quickTimings + "}\n"
	b := startAgent(t, loadConfig(t, agentConfig("node-b", db, plain)))
	eventually(t, 10*time.Second, "node-b leads", func() bool { return b.job("j").state == "leader" })
	a := startAgent(t, loadConfig(t, agentConfig("node-a", db, plain)))
	eventually(t, 10*time.Second, "node-a follows node-b", func() bool { return a.job("j").leader == "node-b" })
	var since *time.Time
	for _, j := range a.Jobs() {
		since = j.Since
	}
	hooked := fmt.Sprintf("job \"j\" {\n%s\n  on_elected {\n    exec {\n      command = [\"sh\", \"-c\", \"echo ${event.previous_leader} > %s/prev\"]\n    }\n  }\n}\n", quickTimings, dir)
	if _, err := a.Reload(t.Context(), loadConfig(t, agentConfig("node-a", db, hooked))); err != nil {
		t.Fatal(err)
	}
	for _, j := range a.Jobs() {
		if j.State != "follower" || j.Since == nil || since == nil || !j.Since.Equal(*since) {
			t.Errorf("after the reload: %s since %v, want follower since %v", j.State, j.Since, since)
		}
	}
	b.stop(t)
	eventually(t, 10*time.Second, "on_elected ran on node-a", func() bool {
		p, _ := os.ReadFile(filepath.Join(dir, "prev"))
		return len(p) > 0
	})
	if p, _ := os.ReadFile(filepath.Join(dir, "prev")); strings.TrimSpace(string(p)) != "node-b" {
		t.Errorf("previous_leader %q, want node-b", strings.TrimSpace(string(p)))
	}
}

// The holder format round-trips, and the agent's addition to the node_id is
// what `electd check` reserves for it.
func TestHolder(t *testing.T) {
	inc := newIncarnation()
	h := holderOf("web-1#x", inc)
	if node, got := SplitHolder(h); node != "web-1#x" || got != inc {
		t.Errorf("SplitHolder(%q) = %q, %q", h, node, got)
	}
	if node, got := SplitHolder("web-1"); node != "web-1" || got != "" {
		t.Errorf("a holder without incarnation: %q, %q", node, got)
	}
	if extra := len(h) - len("web-1#x"); extra != config.HolderReserve {
		t.Errorf("the holder adds %d bytes to the node_id; config.HolderReserve says %d", extra, config.HolderReserve)
	}
}

func sqliteProvider(t *testing.T, db string) providers.Provider {
	t.Helper()
	p, err := sqlprovider.New(t.Context(), sqlprovider.Settings{Driver: "sqlite", DSN: db}, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}
