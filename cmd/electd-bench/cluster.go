package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// childScript is the supervised command of every contender, electd or
// anchor: it appends "start TOKEN PID NODE UNIXNANO" as soon as it runs, and
// "stop ..." when asked to stop. The start line's own timestamp is the end
// of a measurement, so how often the log is polled does not matter.
const childScript = `log="$1"
tok="${ELECTD_TOKEN:-${ETCD_LOCK_REV:-0}}"
echo "start $tok $$ $ELECTD_NODE $(date +%s%N)" >> "$log"
trap 'echo "stop $tok $$ $ELECTD_NODE $(date +%s%N)" >> "$log"; exit 0' TERM
while :; do sleep 0.05; done
`

// proc is one contender process: an electd agent, an etcdctl, or this
// binary re-executed as an anchor contender.
type proc struct {
	node string
	cmd  *exec.Cmd
	done chan struct{}
	err  error
	api  string // electd only: base URL of its HTTP API
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// startProc starts argv in its own process group with output to logPath.
func startProc(node, logPath string, env []string, argv ...string) (*proc, error) {
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	// Own group: a signal to the group reaches the contender and its
	// command, as Ctrl-C would. Pdeathsig: an interrupted bench leaves no
	// contender behind.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start %s: %w", node, err)
	}
	p := &proc{node: node, cmd: cmd, done: make(chan struct{})}
	go func() { p.err = cmd.Wait(); logf.Close(); close(p.done) }()
	return p, nil
}

// kind says how one family of contenders is started, made ready, crashed and
// stopped.
type kind struct {
	name  string
	spawn func(dir, node, childLog, script string) (*proc, error)
	// ready returns once the contender is campaigning.
	ready func(ctx context.Context, dir string, p *proc) error
	// crash is kill -9 of the contender alone (its command may survive:
	// that is what is measured for etcdctl).
	crash func(p *proc)
	// term is the graceful stop the tool documents.
	term func(p *proc)
}

func crashPid(p *proc) { p.cmd.Process.Signal(syscall.SIGKILL) }
func termPid(p *proc)  { p.cmd.Process.Signal(syscall.SIGTERM) }

// readyFile waits for the file the anchor contenders create once they
// campaign.
func readyFile(ctx context.Context, dir string, p *proc) error {
	path := filepath.Join(dir, p.node+".ready")
	for {
		if _, err := os.Stat(path); err == nil {
			return nil
		}
		if p.exited() {
			return fmt.Errorf("%s exited before it was ready: %v", p.node, p.err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not ready: %w", p.node, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

type record struct {
	kind  string // start | stop
	token string
	pid   int
	node  string
	at    time.Time
}

// cluster is three (by default) contenders of one kind on one store.
type cluster struct {
	k        kind
	dir      string
	childLog string
	script   string
	procs    map[string]*proc
	seq      int

	off    int64
	starts []record
	seen   int // starts accounted for: the first leader and each measured takeover
}

func newCluster(ctx context.Context, k kind, dir string, n int) (*cluster, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	c := &cluster{k: k, dir: dir, childLog: filepath.Join(dir, "children.log"),
		script: filepath.Join(dir, "child.sh"), procs: map[string]*proc{}}
	if err := os.WriteFile(c.script, []byte(childScript), 0o755); err != nil {
		return nil, err
	}
	for range n {
		if _, err := c.spawn(ctx); err != nil {
			c.stop()
			return nil, err
		}
	}
	if _, err := c.waitStart(ctx, 0, "", 60*time.Second); err != nil {
		c.stop()
		return nil, fmt.Errorf("%s: no leader: %w", k.name, err)
	}
	c.seen = 1
	return c, nil
}

// spawn starts a contender under a node id never used before (a restarted
// node with its old id would get its own lease back at once, which is not a
// failover) and waits until it campaigns.
func (c *cluster) spawn(ctx context.Context) (*proc, error) {
	c.seq++
	node := fmt.Sprintf("node-%d", c.seq)
	p, err := c.k.spawn(c.dir, node, c.childLog, c.script)
	if err != nil {
		return nil, err
	}
	c.procs[node] = p
	rctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := c.k.ready(rctx, c.dir, p); err != nil {
		return nil, fmt.Errorf("%s: %w\n%s", c.k.name, err, tail(filepath.Join(c.dir, node+".log")))
	}
	return p, nil
}

// stop ends every contender: SIGTERM to its group, then SIGKILL.
func (c *cluster) stop() {
	for _, p := range c.procs {
		syscall.Kill(-p.pid(), syscall.SIGTERM)
	}
	for _, p := range c.procs {
		select {
		case <-p.done:
		case <-time.After(15 * time.Second):
		}
		syscall.Kill(-p.pid(), syscall.SIGKILL)
	}
}

// poll reads the complete lines appended to the child log since last time.
func (c *cluster) poll() {
	f, err := os.Open(c.childLog)
	if err != nil {
		return
	}
	defer f.Close()
	if _, err := f.Seek(c.off, io.SeekStart); err != nil {
		return
	}
	r := bufio.NewReader(f)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return // an incomplete line is read again next time
		}
		c.off += int64(len(line))
		fs := strings.Fields(line)
		if len(fs) != 5 || fs[0] != "start" {
			continue
		}
		pid, err1 := strconv.Atoi(fs[2])
		ns, err2 := strconv.ParseInt(fs[4], 10, 64)
		if err1 != nil || err2 != nil {
			continue
		}
		c.starts = append(c.starts, record{fs[0], fs[1], pid, fs[3], time.Unix(0, ns)})
	}
}

// waitStart waits for a child start with index >= from by a node other
// than not.
func (c *cluster) waitStart(ctx context.Context, from int, not string, within time.Duration) (record, error) {
	deadline := time.Now().Add(within)
	for {
		c.poll()
		for i := from; i < len(c.starts); i++ {
			if c.starts[i].node != not {
				return c.starts[i], nil
			}
		}
		if time.Now().After(deadline) {
			return record{}, fmt.Errorf("no child started within %s", within)
		}
		select {
		case <-ctx.Done():
			return record{}, ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// runResult is one measured takeover.
type runResult struct {
	took time.Duration
	// oldAlive: the command of the contender that was stopped was still
	// running when the next one started (two at once).
	oldAlive bool
	// extra: leader changes nobody asked for since the previous run
	// (a lease lost under load, for instance).
	extra int
	// exitErr: a graceful stop that did not exit 0.
	exitErr error
}

var errNoLeader = errors.New("no running leader to stop")

// measure stops the current leader (crash or graceful), times until the next
// child runs, then replaces the stopped contender with a fresh one.
func (c *cluster) measure(ctx context.Context, crash bool, within time.Duration) (runResult, error) {
	var res runResult
	c.poll()
	if len(c.starts) == 0 {
		return res, errNoLeader
	}
	res.extra = len(c.starts) - c.seen
	lead := c.starts[len(c.starts)-1]
	p := c.procs[lead.node]
	if p == nil || p.exited() || !alive(lead.pid) {
		return res, fmt.Errorf("%w: last child %d of %s is gone", errNoLeader, lead.pid, lead.node)
	}
	from := len(c.starts)
	t0 := time.Now()
	if crash {
		c.k.crash(p)
	} else {
		c.k.term(p)
	}
	next, err := c.waitStart(ctx, from, lead.node, within)
	if err != nil {
		return res, fmt.Errorf("after stopping %s: %w", lead.node, err)
	}
	res.took = next.at.Sub(t0)
	res.oldAlive = alive(lead.pid)

	select {
	case <-p.done:
	case <-time.After(20 * time.Second):
		res.exitErr = errors.New("did not exit within 20s")
	}
	if !crash && p.err != nil {
		res.exitErr = p.err
	}
	// Whatever the stopped contender left (etcdctl's orphaned command),
	// and the contender itself when it hung.
	syscall.Kill(-p.pid(), syscall.SIGKILL)
	delete(c.procs, lead.node)

	if _, err := c.spawn(ctx); err != nil {
		return res, err
	}
	// Any start besides the one measured, from here to the next run, is a
	// leader change nobody asked for; the next measure counts it.
	c.seen = from + 1
	return res, nil
}

// alive reports whether pid runs; a zombie counts as gone.
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	rest := string(b[strings.LastIndexByte(string(b), ')')+1:])
	f := strings.Fields(rest)
	return len(f) > 0 && f[0] != "Z"
}

// tail returns the end of a log file, for error messages.
func tail(path string) string {
	b, _ := os.ReadFile(path)
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}

// series is the outcome of many runs of one kind.
type series struct {
	crash, handover     sample
	crashWant, termWant int
	failures            []string
	oldAlive            int // runs where the stopped contender's command outlived it
	extra               int
	badExits            int
}

// runSeries measures crash runs, then graceful runs, on a fresh cluster of
// three contenders. A failed run is noted and the cluster rebuilt.
func runSeries(ctx context.Context, k kind, dir string, crashRuns, termRuns int, crashWithin, termWithin time.Duration, logf func(string, ...any)) series {
	s := series{crashWant: crashRuns, termWant: termRuns}
	var c *cluster
	gen := 0
	defer func() {
		if c != nil {
			c.stop()
		}
	}()
	phase := func(crash bool, runs int, within time.Duration) {
		name := "handover"
		if crash {
			name = "crash"
		}
		for i := 0; i < runs && ctx.Err() == nil; i++ {
			if c == nil {
				gen++
				var err error
				c, err = newCluster(ctx, k, filepath.Join(dir, fmt.Sprintf("cluster-%d", gen)), 3)
				if err != nil {
					s.failures = append(s.failures, err.Error())
					logf("%s: %v", k.name, err)
					return
				}
			}
			r, err := c.measure(ctx, crash, within)
			if err != nil {
				s.failures = append(s.failures, fmt.Sprintf("%s run %d: %v", name, i+1, err))
				logf("%s %s run %d: %v", k.name, name, i+1, err)
				c.stop()
				c = nil
				continue
			}
			if crash {
				s.crash = append(s.crash, r.took)
			} else {
				s.handover = append(s.handover, r.took)
			}
			if r.oldAlive {
				s.oldAlive++
			}
			s.extra += r.extra
			if r.exitErr != nil {
				s.badExits++
				s.failures = append(s.failures, fmt.Sprintf("%s run %d: stopped contender: %v", name, i+1, r.exitErr))
			}
			logf("%s %s %d/%d: %s", k.name, name, i+1, runs, cell(r.took))
		}
	}
	phase(true, crashRuns, crashWithin)
	phase(false, termRuns, termWithin)
	return s
}
