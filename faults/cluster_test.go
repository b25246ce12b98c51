package faults

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	ec "github.com/electd/electd/internal/cluster"
)

// Timings of every job: short so that faults cycle fast, and passing
// electd check (renew_every*2 + stop_timeout < ttl*0.99).
const (
	ttl         = 3 * time.Second
	renewEvery  = 500 * time.Millisecond
	retryEvery  = 250 * time.Millisecond
	stopTimeout = 1 * time.Second
	slotEvery   = time.Second // the schedule of both task jobs
	// holdOff is how long a node that gave the worker job away (its run
	// command cannot start) stays out of the election.
	holdOff = 5 * time.Second
)

// The jobs every agent runs. Their names are the lease keys.
const (
	jobRun       = "worker"      // a supervised run child writing to the fenced recorder
	jobTickLead  = "tick-leader" // @every 1s task, mode leader
	jobTickLock  = "tick-lock"   // @every 1s task, mode lock
	agentsPerRun = 3
)

// cluster is N agents on one store, each reaching a networked store
// through a proxy of its own.
type cluster struct {
	t       *testing.T
	dir     string
	st      *store
	rec     *recorder
	nodes   []string
	proxies map[string]*proxy
	addrs   map[string]string // the store address in each node's config (its proxy)

	mu       sync.Mutex
	agents   map[string]*agentProc // by node, and a dup-node-id twin while it runs
	pauses   []window              // SIGSTOP → SIGCONT per node
	faults   []faultRec            // what was injected, in order
	failures []string              // checks made while the run went on (SIGHUP, exits)
	observed map[string]int        // how the agent-side faults went, for the report
	setsidN  int                   // setsid-child faults so far: the variants take turns
}

// agentProc is one `electd run` process. Its stdout and stderr are a pipe
// the test copies into its log (Out is the read end), so that a fault can
// close the reader.
type agentProc = ec.Agent

// window is a time range of one node (a pause). A zero to is still open.
type window struct {
	node     string
	from, to time.Time
}

func newCluster(t *testing.T, st *store, n int) *cluster {
	t.Helper()
	c := &cluster{t: t, dir: t.TempDir(), st: st, rec: newRecorder(t),
		proxies: map[string]*proxy{}, addrs: map[string]string{}, agents: map[string]*agentProc{}, observed: map[string]int{}}
	for i := 1; i <= n; i++ {
		node := fmt.Sprintf("node-%d", i)
		c.nodes = append(c.nodes, node)
		addr := ""
		if st.upstream != "" {
			p := newProxy(t, st.upstream)
			c.proxies[node] = p
			addr = p.addr()
		}
		c.addrs[node] = addr
		if err := os.WriteFile(c.cfgPath(node), []byte(c.config(node, self)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(c.kill)
	for _, node := range c.nodes {
		c.start(node)
	}
	return c
}

func (c *cluster) cfgPath(node string) string { return filepath.Join(c.dir, node+".hcl") }

// config is node's configuration; runProgram is the worker's command (the
// test binary, or a program that does not exist for cannot-start).
func (c *cluster) config(node, runProgram string) string {
	addr := c.addrs[node]
	task := func(name, mode string) string {
		return fmt.Sprintf(`
job %q {
  mode        = %q
  ttl         = %q
  renew_every = %q
  retry_every = %q
  task {
    schedule     = "@every %s"
    command      = [%q, "task"]
    env          = { %s = %q }
    timeout      = "5s"
    stop_timeout = %q
  }
}
`, name, mode, ttl, renewEvery, retryEvery, slotEvery, self, envChild, c.rec.addr(), stopTimeout)
	}
	return ec.AgentBlock(node, "", ec.Str("log_level", "debug"), ec.Str("shutdown_timeout", "15s")) + fmt.Sprintf(`
%s
job %q {
  ttl         = %q
  renew_every = %q
  retry_every = %q
  run {
    command      = [%q, "run"]
    env          = { %s = %q }
    stop_timeout = %q
    restart      = "always"
    restart_wait = "250ms"
    hold_off     = %q
  }
}
`, c.st.block(addr), jobRun, ttl, renewEvery, retryEvery, runProgram, envChild, c.rec.addr(), stopTimeout, holdOff) +
		task(jobTickLead, "leader") + task(jobTickLock, "lock")
}

// start runs the agent of node, its output appended to node.log.
func (c *cluster) start(node string) {
	p := c.spawn(node, c.cfgPath(node))
	c.mu.Lock()
	c.agents[node] = p
	c.mu.Unlock()
}

// spawn starts `electd run -config cfg`, its output appended to name.log
// through a pipe. An interrupted test leaves no agent behind (their
// children follow them through electd's own parent-death shim).
func (c *cluster) spawn(name, cfg string) *agentProc {
	p, err := ec.StartProcess(ec.Spec{Name: name, Argv: []string{binary, "run", "-config", cfg}, Dir: c.dir,
		LogPath: c.logPath(name), AppendLog: true, Pipe: true})
	if err != nil {
		c.t.Fatal(err)
	}
	return p
}

func (c *cluster) logPath(name string) string { return ec.LogPath(c.dir, name) }

// logSize is how much of name's log is written, to read what comes after.
func (c *cluster) logSize(name string) int64 {
	fi, err := os.Stat(c.logPath(name))
	if err != nil {
		return 0
	}
	return fi.Size()
}

// logLines is the lines of name's log from offset on.
func (c *cluster) logLines(name string, offset int64) []string {
	f, err := os.Open(c.logPath(name))
	if err != nil {
		return nil
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return nil
	}
	b, _ := io.ReadAll(f)
	if i := strings.LastIndexByte(string(b), '\n'); i >= 0 {
		b = b[:i] // a line still being written is not there yet
	} else {
		return nil
	}
	return strings.Split(string(b), "\n")
}

// waitLog waits for a line of name's log, past offset, that holds every
// one of words, and returns it.
func (c *cluster) waitLog(name string, offset int64, within time.Duration, words ...string) (string, bool) {
	deadline := time.Now().Add(within)
	for {
		for _, l := range c.logLines(name, offset) {
			if hasAll(l, words) {
				return l, true
			}
		}
		if time.Now().After(deadline) {
			return "", false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func hasAll(line string, words []string) bool {
	for _, w := range words {
		if !strings.Contains(line, w) {
			return false
		}
	}
	return true
}

// logTime is the time an agent's log line was written (hclog's format).
func logTime(line string) (time.Time, bool) {
	ts, _, ok := strings.Cut(line, " ")
	if !ok {
		return time.Time{}, false
	}
	t, err := time.Parse("2006-01-02T15:04:05.000Z0700", ts)
	return t, err == nil
}

// note counts how an agent-side fault went (the report lists the counts).
func (c *cluster) note(what string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.observed[what]++
}

func (c *cluster) agent(node string) *agentProc {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.agents[node]
}

func (c *cluster) failf(format string, a ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	msg := fmt.Sprintf(format, a...)
	c.failures = append(c.failures, msg)
	c.t.Log("FAILURE: " + msg)
}

func (c *cluster) pause(node string) {
	c.agent(node).Signal(syscall.SIGSTOP)
	c.mu.Lock()
	c.pauses = append(c.pauses, window{node: node, from: time.Now()})
	c.mu.Unlock()
}

func (c *cluster) resume(node string) {
	c.mu.Lock()
	for i := range c.pauses {
		if c.pauses[i].node == node && c.pauses[i].to.IsZero() {
			c.pauses[i].to = time.Now()
		}
	}
	c.mu.Unlock()
	c.agent(node).Signal(syscall.SIGCONT)
}

// waitExit waits for node's agent to exit and returns its error.
func (c *cluster) waitExit(node string, within time.Duration) (error, bool) {
	return c.agent(node).Wait(within)
}

// leader waits until exactly one run child is alive, its agent running
// (not paused), for settle in a row, and returns it.
func (c *cluster) leader(within, settle time.Duration) (childLife, error) {
	deadline := time.Now().Add(within)
	var since time.Time
	var last childLife
	for time.Now().Before(deadline) {
		run := c.rec.running()
		if len(run) == 1 && !c.paused(run[0].node) {
			if since.IsZero() || run[0].id != last.id {
				since, last = time.Now(), run[0]
			} else if time.Since(since) >= settle {
				return last, nil
			}
		} else {
			since = time.Time{}
		}
		time.Sleep(20 * time.Millisecond)
	}
	run := c.rec.running()
	desc := make([]string, 0, len(run))
	for _, r := range run {
		desc = append(desc, fmt.Sprintf("%s token %d pid %d", r.node, r.token, r.pid))
	}
	return childLife{}, fmt.Errorf("no single leader's child for %s within %s (running: %s)", settle, within, strings.Join(desc, ", "))
}

func (c *cluster) paused(node string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, w := range c.pauses {
		if w.node == node && w.to.IsZero() {
			return true
		}
	}
	return false
}

// agentRunning reports whether node's agent has not exited.
func (c *cluster) agentRunning(node string) bool { return !c.agent(node).Exited() }

// shutdown is the end of a run: every agent gets SIGTERM and must exit 0
// within its shutdown_timeout, leaving no child behind.
func (c *cluster) shutdown() {
	for _, node := range c.nodes {
		if c.paused(node) {
			c.resume(node)
		}
	}
	for _, node := range c.nodes {
		c.agent(node).Signal(syscall.SIGTERM)
	}
	for _, node := range c.nodes {
		err, ok := c.waitExit(node, 20*time.Second)
		switch {
		case !ok:
			c.failf("agent %s did not exit within 20s of SIGTERM", node)
		case err != nil:
			c.failf("agent %s exited with %v after SIGTERM, want exit 0", node, err)
		}
	}
	// The recorder sees a child's end when its connection closes; give
	// that a moment, then look at the processes themselves.
	deadline := time.Now().Add(3 * time.Second)
	for len(c.rec.running()) > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	h := c.rec.snapshot()
	for _, ch := range h.children {
		if c.rec.ours(ch.pid) {
			c.failf("run child %d of %s (token %d) still running after every agent exited", ch.pid, ch.node, ch.token)
		}
	}
	for _, s := range h.slots {
		if c.rec.ours(s.pid) {
			c.failf("task %d of %s (%s) still running after every agent exited", s.pid, s.node, s.job)
		}
	}
}

// kill ends whatever is left, so a failed test leaves no agent behind.
func (c *cluster) kill() {
	c.mu.Lock()
	agents := make([]*agentProc, 0, len(c.agents))
	for _, p := range c.agents {
		agents = append(agents, p)
	}
	c.mu.Unlock()
	for _, p := range agents {
		p.Kill()
	}
}
