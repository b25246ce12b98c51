package cluster

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/electd/electd/internal/teststore"
)

// Options describe the agents of a cluster: each runs one job, "worker",
// whose run block is ChildScript writing to the cluster's child log.
type Options struct {
	Binary   string // the electd binary
	Provider Provider
	Timing   Timing
	Env      []string // added to every agent's environment, after Provider.Env
	API      bool     // every agent serves its API on a free loopback port
	Agent    []string // more agent block attributes (see AgentBlock)
	Group    bool     // every agent in a process group of its own
}

// Cluster is agents (or other contenders) that supervise ChildScript,
// which writes to one child log, in one directory: dir/NODE.hcl, dir/NODE.log,
// dir/children.log.
type Cluster struct {
	Dir      string
	Script   string // ChildScript, written to dir/child.sh
	Children *ChildLog

	spawn func(c *Cluster, node string) (*Agent, error)

	mu     sync.Mutex
	agents map[string]*Agent // by node, while they are part of the cluster
	used   map[string]bool   // every node id started
	seq    int
}

// New is a cluster of electd agents as o says. No agent runs yet: Start or
// StartNew adds them.
func New(dir string, o Options) (*Cluster, error) {
	if o.Binary == "" {
		return nil, errors.New("cluster: no electd binary")
	}
	return NewWith(dir, func(c *Cluster, node string) (*Agent, error) { return c.startElectd(o, node) })
}

// NewWith is a cluster whose members spawn starts: contenders other than
// electd that run c.Script with c.Children.Path as its argument.
func NewWith(dir string, spawn func(c *Cluster, node string) (*Agent, error)) (*Cluster, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	c := &Cluster{Dir: dir, Script: filepath.Join(dir, "child.sh"), Children: NewChildLog(filepath.Join(dir, "children.log")),
		spawn: spawn, agents: map[string]*Agent{}, used: map[string]bool{}}
	if err := os.WriteFile(c.Script, []byte(ChildScript), 0o755); err != nil {
		return nil, err
	}
	return c, nil
}

// ConfigPath is the configuration file of node.
func (c *Cluster) ConfigPath(node string) string { return filepath.Join(c.Dir, node+".hcl") }

func (c *Cluster) startElectd(o Options, node string) (*Agent, error) {
	listen := ""
	if o.API {
		port, err := teststore.FreePort()
		if err != nil {
			return nil, err
		}
		listen = teststore.Addr(port)
	}
	cfg := c.ConfigPath(node)
	err := WriteConfig(cfg, AgentBlock(node, listen, o.Agent...), o.Provider.Block,
		RunJob("worker", o.Timing, "sh", c.Script, c.Children.Path))
	if err != nil {
		return nil, err
	}
	return StartProcess(Spec{Name: node, Argv: []string{o.Binary, "run", "-config", cfg}, Dir: c.Dir,
		Env: append(append([]string(nil), o.Provider.Env...), o.Env...), LogPath: LogPath(c.Dir, node),
		Group: o.Group, API: listen})
}

// Start starts node (again, if it ran before under that id).
func (c *Cluster) Start(node string) (*Agent, error) {
	a, err := c.spawn(c, node)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.agents[node], c.used[node] = a, true
	c.mu.Unlock()
	return a, nil
}

// StartNew starts a member under a node id never used in this cluster
// ("node-N"): a node restarted under its old id would get its own
// unexpired lease back at once, which is not a failover.
func (c *Cluster) StartNew() (*Agent, error) {
	c.mu.Lock()
	var node string
	for node == "" || c.used[node] {
		c.seq++
		node = fmt.Sprintf("node-%d", c.seq)
	}
	c.used[node] = true
	c.mu.Unlock()
	return c.Start(node)
}

// Agent is node's process, nil when it is not part of the cluster.
func (c *Cluster) Agent(node string) *Agent {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.agents[node]
}

// Agents are the members, by node id.
func (c *Cluster) Agents() []*Agent {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]*Agent, 0, len(c.agents))
	for _, a := range c.agents {
		out = append(out, a)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Node < out[j].Node })
	return out
}

// Forget takes node out of the cluster (after it was stopped): StopAll
// leaves it alone.
func (c *Cluster) Forget(node string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.agents, node)
}

// StopAll sends every member SIGTERM (to its group, when it has one) and
// waits up to within for each, then kills what is left, and what they left
// in their groups. It returns how members that did not exit 0 exited.
func (c *Cluster) StopAll(within time.Duration) []error {
	agents := c.Agents()
	for _, a := range agents {
		a.SignalGroup(syscall.SIGTERM)
	}
	var errs []error
	deadline := time.Now().Add(within)
	for _, a := range agents {
		err, ok := a.Wait(time.Until(deadline))
		if !ok {
			err = fmt.Errorf("%s: %w", a.Node, ErrStopTimeout)
		} else if err != nil {
			err = fmt.Errorf("%s: %w", a.Node, err)
		}
		a.Kill()
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// Logs is every log of the cluster's directory (agents' and the child
// log), for a failure report.
func (c *Cluster) Logs() string {
	paths, _ := filepath.Glob(filepath.Join(c.Dir, "*.log"))
	var b strings.Builder
	for _, p := range paths {
		data, _ := os.ReadFile(p)
		fmt.Fprintf(&b, "--- %s:\n%s\n", filepath.Base(p), data)
	}
	return b.String()
}

// Leader is the member whose child runs, when exactly one child runs.
func (c *Cluster) Leader() (*Agent, Record, error) {
	run, err := c.Children.Running()
	if err != nil {
		return nil, Record{}, err
	}
	if len(run) != 1 {
		return nil, Record{}, fmt.Errorf("want exactly one running child, have %d: %v", len(run), run)
	}
	a := c.Agent(run[0].Node)
	if a == nil {
		return nil, run[0], fmt.Errorf("the running child %d belongs to %s, which is not in the cluster", run[0].PID, run[0].Node)
	}
	return a, run[0], nil
}

// ExactlyOneFor samples the running children for d and fails when there is
// ever more or less than one.
func (c *Cluster) ExactlyOneFor(d time.Duration) error {
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		run, err := c.Children.Running()
		if err != nil {
			return err
		}
		if len(run) != 1 {
			return fmt.Errorf("%d children running, want exactly 1: %v", len(run), run)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return nil
}

// WaitGone waits until pid has exited and returns when it was seen gone.
func WaitGone(pid int, within time.Duration) (time.Time, error) {
	var at time.Time
	if !Until(within, 10*time.Millisecond, func() bool { at = time.Now(); return !Alive(pid) }) {
		return at, fmt.Errorf("process %d still running after %s", pid, within)
	}
	return at, nil
}
