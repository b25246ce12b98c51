package faults

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	ec "github.com/electd/electd/internal/cluster"
)

// recorder is the resource the children write to, guarded by the fencing
// token: a write is accepted only when its token is at least the highest
// token accepted so far. It records every child's life (start, stop, end
// of its connection), every write and every task run, on one clock.
type recorder struct {
	ln net.Listener

	mu       sync.Mutex
	changed  chan struct{} // closed and replaced when a run child starts
	children []*childLife
	writes   []write
	slots    []slotRun
	maxToken uint64 // highest token accepted
	errs     []string
}

// childLife is one run child as the recorder saw it, or a process that
// child started in a session of its own (a setsid grandchild), which works
// under the child's token and is a life of its own: its parent's end is not
// its end.
type childLife struct {
	id      int
	sub     bool // a grandchild, started by the life parent
	parent  int
	node    string
	token   uint64
	pid     int
	start   time.Time
	end     time.Time // connection closed, or found dead when another started
	stopped bool      // said "stop": it got its agent's stop signal
	ended   bool
}

// write is one work write.
type write struct {
	child    int
	token    uint64
	at       time.Time
	accepted bool
	highest  uint64 // highest accepted token when this write arrived
}

// slotRun is one run of a task.
type slotRun struct {
	job   string
	node  string
	token uint64
	slot  time.Time
	at    time.Time
	end   time.Time // when the task's connection closed (it exits after its answer); zero if it never did
	pid   int
}

func newRecorder(t *testing.T) *recorder {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &recorder{ln: ln, changed: make(chan struct{})}
	go r.serve()
	t.Cleanup(func() { ln.Close() })
	return r
}

func (r *recorder) addr() string { return r.ln.Addr().String() }

func (r *recorder) serve() {
	for {
		c, err := r.ln.Accept()
		if err != nil {
			return
		}
		go r.conn(c)
	}
}

func (r *recorder) fail(format string, a ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, fmt.Sprintf(format, a...))
}

func (r *recorder) conn(c net.Conn) {
	defer c.Close()
	in := bufio.NewReader(c)
	var me *childLife
	slot := -1 // the index in r.slots of this connection's task run
	defer func() {
		if slot >= 0 {
			r.mu.Lock()
			r.slots[slot].end = time.Now()
			r.mu.Unlock()
		}
		if me == nil {
			return
		}
		r.mu.Lock()
		if !me.ended {
			me.ended, me.end = true, time.Now()
		}
		r.mu.Unlock()
	}()
	for {
		line, err := in.ReadString('\n')
		if err != nil {
			return
		}
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		reply := "ok"
		switch {
		case f[0] == "run" && len(f) == 4 && me == nil:
			tok, err1 := strconv.ParseUint(f[2], 10, 64)
			pid, err2 := strconv.Atoi(f[3])
			if err1 != nil || err2 != nil {
				r.fail("bad run line %q", line)
				return
			}
			me = r.started(f[1], tok, pid, 0)
		case f[0] == "sub" && len(f) == 5 && me == nil:
			tok, err1 := strconv.ParseUint(f[2], 10, 64)
			pid, err2 := strconv.Atoi(f[3])
			ppid, err3 := strconv.Atoi(f[4])
			if err1 != nil || err2 != nil || err3 != nil {
				r.fail("bad sub line %q", line)
				return
			}
			me = r.started(f[1], tok, pid, ppid)
		case f[0] == "work" && me != nil:
			if !r.work(me) {
				reply = "stale"
			}
		case f[0] == "stop" && me != nil:
			r.mu.Lock()
			me.stopped = true
			r.mu.Unlock()
		case f[0] == "slot" && len(f) == 6:
			tok, err1 := strconv.ParseUint(f[3], 10, 64)
			at, err2 := time.Parse(time.RFC3339, f[4])
			pid, err3 := strconv.Atoi(f[5])
			if err1 != nil || err2 != nil || err3 != nil {
				r.fail("bad slot line %q (ELECTD_TOKEN or ELECTD_SLOT missing or malformed)", strings.TrimSpace(line))
				return
			}
			r.mu.Lock()
			r.slots = append(r.slots, slotRun{job: f[1], node: f[2], token: tok, slot: at, at: time.Now(), pid: pid})
			slot = len(r.slots) - 1
			r.mu.Unlock()
		default:
			r.fail("unexpected line %q", strings.TrimSpace(line))
			return
		}
		if _, err := c.Write([]byte(reply + "\n")); err != nil {
			return
		}
	}
}

// started records a new run child, or with ppid a grandchild of the run
// child whose pid is ppid. A child whose connection is still open but whose
// process is already gone ended before this one started: its end is set
// now, so the order of the two events does not depend on which connection
// the recorder happened to read first.
func (r *recorder) started(node string, token uint64, pid, ppid int) *childLife {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := time.Now()
	for _, c := range r.children {
		if !c.ended && !r.ours(c.pid) {
			c.ended, c.end = true, now
		}
	}
	c := &childLife{id: len(r.children), node: node, token: token, pid: pid, start: time.Now()}
	if ppid != 0 {
		// The latest life of that pid on the same node and token: its own
		// parent, whether or not that one is still alive.
		for i := len(r.children) - 1; i >= 0; i-- {
			if p := r.children[i]; p.pid == ppid && p.node == node && p.token == token {
				c.sub, c.parent = true, p.id
				break
			}
		}
		if !c.sub {
			r.errs = append(r.errs, fmt.Sprintf("a grandchild (pid %d) names a parent (pid %d) that never announced itself", pid, ppid))
		}
	}
	r.children = append(r.children, c)
	close(r.changed)
	r.changed = make(chan struct{})
	return c
}

// nextStart waits until a run child (not a grandchild) other than those in
// seen has announced itself, and returns it; false after within.
func (r *recorder) nextStart(seen func(childLife) bool, within time.Duration) (childLife, bool) {
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	for {
		r.mu.Lock()
		changed := r.changed
		for _, c := range r.children {
			if !c.sub && !seen(*c) {
				r.mu.Unlock()
				return *c, true
			}
		}
		r.mu.Unlock()
		select {
		case <-changed:
		case <-deadline.C:
			return childLife{}, false
		}
	}
}

// work is one fenced write: accepted when its token is at least the
// highest accepted so far.
func (r *recorder) work(c *childLife) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	w := write{child: c.id, token: c.token, at: time.Now(), highest: r.maxToken}
	if c.token >= r.maxToken {
		w.accepted = true
		r.maxToken = c.token
	}
	r.writes = append(r.writes, w)
	return w.accepted
}

// history is a copy of what the recorder saw, for the checker.
type history struct {
	children []childLife
	writes   []write
	slots    []slotRun
	errs     []string
}

func (r *recorder) snapshot() history {
	r.mu.Lock()
	defer r.mu.Unlock()
	h := history{writes: append([]write(nil), r.writes...), slots: append([]slotRun(nil), r.slots...),
		errs: append([]string(nil), r.errs...)}
	for _, c := range r.children {
		h.children = append(h.children, *c)
	}
	return h
}

// running is the run children alive now (connection open, process alive).
func (r *recorder) running() []childLife {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []childLife
	for _, c := range r.children {
		if !c.ended && r.ours(c.pid) {
			out = append(out, *c)
		}
	}
	return out
}

// ours reports whether pid is alive and still a child of this recorder:
// over a long run the kernel reuses pids (pid_max is 32768 here), so a
// number alone says nothing about the process that once had it.
func (r *recorder) ours(pid int) bool {
	if !alive(pid) {
		return false
	}
	env, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		return false
	}
	want := envChild + "=" + r.addr()
	for _, kv := range strings.Split(string(env), "\x00") {
		if kv == want {
			return true
		}
	}
	return false
}

func alive(pid int) bool { return ec.Alive(pid) }
