package systest

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/electd/electd/actions/proc"
)

// binary is the electd binary built once for the whole package.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "electd-systest-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "electd")
	build := exec.Command("go", "build", "-o", binary, "../cmd/electd")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building electd:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func randomSuffix() string {
	b := make([]byte, 4)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// childScript is the supervised `run` command: it appends
// "start TOKEN PID NODE UNIXNANO" when it starts and "stop ..." when it is
// asked to stop, so the test can rebuild every term's interval.
const childScript = `log="$1"
now() { date +%s%N; }
echo "start $ELECTD_TOKEN $$ $ELECTD_NODE $(now)" >> "$log"
trap 'echo "stop $ELECTD_TOKEN $$ $ELECTD_NODE $(now)" >> "$log"; exit 0' TERM
while :; do sleep 0.05; done
`

// timings used by every cluster: short, and passing electd check's rule
// (renew_every*2 + stop_timeout < ttl*0.99).
const (
	ttl         = 4 * time.Second
	renewEvery  = 1 * time.Second
	retryEvery  = 500 * time.Millisecond
	stopTimeout = 1 * time.Second
)

type cluster struct {
	t        *testing.T
	dir      string
	childLog string
	agents   map[string]*agentProc // by node id
	env      []string              // added to each agent's environment
}

// timing is a job's ttl, renew_every, retry_every and stop_timeout.
type timing struct{ ttl, renew, retry, stop time.Duration }

// defaultTiming is short, and passes electd check's rule
// (renew_every*2 + stop_timeout < ttl*0.99).
var defaultTiming = timing{ttl, renewEvery, retryEvery, stopTimeout}

type agentProc struct {
	node string
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// newCluster writes one config per node and starts n agents.
func newCluster(t *testing.T, n int, providerBlock string) *cluster {
	t.Helper()
	return newClusterWith(t, n, providerBlock, defaultTiming, nil)
}

// newClusterWith is newCluster with the job's timings and extra environment.
func newClusterWith(t *testing.T, n int, providerBlock string, tm timing, env []string) *cluster {
	t.Helper()
	c := &cluster{t: t, dir: t.TempDir(), agents: map[string]*agentProc{}, env: env}
	c.childLog = filepath.Join(c.dir, "children.log")
	script := filepath.Join(c.dir, "child.sh")
	if err := os.WriteFile(script, []byte(childScript), 0o755); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= n; i++ {
		node := fmt.Sprintf("node-%d", i)
		cfg := fmt.Sprintf(`
agent {
  node_id = %q
  listen  = ""
  shutdown_timeout = "10s"
}
%s
job "worker" {
  ttl         = %q
  renew_every = %q
  retry_every = %q
  run {
    command      = ["sh", %q, %q]
    stop_timeout = %q
  }
}
`, node, providerBlock, tm.ttl, tm.renew, tm.retry, script, c.childLog, tm.stop)
		path := filepath.Join(c.dir, node+".hcl")
		if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}
		c.start(node, path)
	}
	t.Cleanup(c.stopAll)
	return c
}

func (c *cluster) start(node, cfg string) {
	logf, err := os.Create(filepath.Join(c.dir, node+".log"))
	if err != nil {
		c.t.Fatal(err)
	}
	cmd := exec.Command(binary, "run", "-config", cfg)
	cmd.Env = append(os.Environ(), c.env...)
	cmd.Dir = c.dir
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	p := &agentProc{node: node, cmd: cmd, done: make(chan struct{})}
	go func() { p.err = cmd.Wait(); logf.Close(); close(p.done) }()
	c.agents[node] = p
}

// stopAll ends every agent still running (SIGTERM, then SIGKILL) and prints
// the agents' logs when the test failed.
func (c *cluster) stopAll() {
	for _, p := range c.agents {
		p.cmd.Process.Signal(syscall.SIGTERM)
	}
	for _, p := range c.agents {
		select {
		case <-p.done:
		case <-time.After(15 * time.Second):
			p.cmd.Process.Kill()
			<-p.done
		}
	}
	if c.t.Failed() {
		for node := range c.agents {
			b, _ := os.ReadFile(filepath.Join(c.dir, node+".log"))
			c.t.Logf("--- log of %s:\n%s", node, b)
		}
		b, _ := os.ReadFile(c.childLog)
		c.t.Logf("--- children.log:\n%s", b)
	}
}

type record struct {
	kind  string // start | stop
	token uint64
	pid   int
	node  string
	at    time.Time
}

func (c *cluster) records() []record {
	f, err := os.Open(c.childLog)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		c.t.Fatal(err)
	}
	defer f.Close()
	var out []record
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) != 5 {
			continue // a line being written right now
		}
		tok, err1 := strconv.ParseUint(fields[1], 10, 64)
		pid, err2 := strconv.Atoi(fields[2])
		ns, err3 := strconv.ParseInt(fields[4], 10, 64)
		if err1 != nil || err2 != nil || err3 != nil {
			c.t.Fatalf("bad line in children.log: %q", sc.Text())
		}
		out = append(out, record{fields[0], tok, pid, fields[3], time.Unix(0, ns)})
	}
	return out
}

func (c *cluster) starts() []record {
	var s []record
	for _, r := range c.records() {
		if r.kind == "start" {
			s = append(s, r)
		}
	}
	return s
}

// waitStarts waits until at least n children have started, and returns them.
func (c *cluster) waitStarts(n int, within time.Duration) []record {
	c.t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		if s := c.starts(); len(s) >= n {
			return s
		}
		time.Sleep(20 * time.Millisecond)
	}
	c.t.Fatalf("fewer than %d children started within %s: %v", n, within, c.starts())
	return nil
}

func alive(pid int) bool { return proc.Alive(pid) }

// running returns the children that are alive now.
func (c *cluster) running() []record {
	var out []record
	for _, r := range c.starts() {
		if alive(r.pid) {
			out = append(out, r)
		}
	}
	return out
}

// checkHistory asserts (d): tokens strictly increase from one child to the
// next, and no child started before the previous one had gone.
func (c *cluster) checkHistory(ends map[int]time.Time) {
	c.t.Helper()
	var prev *record
	recs := c.records()
	stops := map[int]time.Time{}
	for _, r := range recs {
		if r.kind == "stop" {
			stops[r.pid] = r.at
		}
	}
	for pid, at := range ends { // children killed without a stop line
		if _, ok := stops[pid]; !ok {
			stops[pid] = at
		}
	}
	for i := range recs {
		r := recs[i]
		if r.kind != "start" {
			continue
		}
		if prev != nil {
			if r.token <= prev.token {
				c.t.Errorf("token did not grow: child %d has token %d after token %d", r.pid, r.token, prev.token)
			}
			end, ok := stops[prev.pid]
			if !ok && alive(prev.pid) {
				c.t.Errorf("child %d (token %d) started while child %d (token %d) was still running", r.pid, r.token, prev.pid, prev.token)
			} else if ok && end.After(r.at) {
				c.t.Errorf("child %d (token %d) started %s before child %d (token %d) stopped", r.pid, r.token, end.Sub(r.at), prev.pid, prev.token)
			}
		}
		prev = &r
	}
}

func (c *cluster) leader() *agentProc {
	c.t.Helper()
	run := c.running()
	if len(run) != 1 {
		c.t.Fatalf("want exactly one running child, have %d: %v", len(run), run)
	}
	return c.agents[run[0].node]
}

// waitGone waits until pid has exited and returns when it was seen gone.
func waitGone(t *testing.T, pid int, within time.Duration) time.Time {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	for {
		if !alive(pid) {
			return time.Now()
		}
		select {
		case <-ctx.Done():
			t.Fatalf("child %d still running %s after its agent went away", pid, within)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// exactlyOneFor samples the running children for d and fails if there is
// ever more or less than one.
func (c *cluster) exactlyOneFor(d time.Duration) {
	c.t.Helper()
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		if n := len(c.running()); n != 1 {
			c.t.Fatalf("%d children running, want exactly 1: %v", n, c.running())
		}
		time.Sleep(50 * time.Millisecond)
	}
}
