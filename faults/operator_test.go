package faults

import (
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The faults an operator or a job's command brings about rather than the
// machine or the store: a second agent with the same node_id, an agent
// whose output has gone, configurations that cannot be loaded or a command
// that cannot start, a child that leaves its process group, a stop at the
// moment a child starts. Each runs against the current leader and returns
// once the fault is over; the checker then judges the whole history.

// dupNode starts a second agent with the leader's node_id and configuration
// (the same file), keeps it until it has reported the clash, and stops it
// with SIGTERM. The two processes must never both run the child (the
// checker's overlap rule); the twin must say "node_id clash" once the other
// has kept the lease for longer than ttl + retry_every.
func (c *cluster) dupNode(lead childLife) error {
	node := lead.node
	twin := node + "-twin"
	off := c.logSize(twin) // an earlier twin's log comes before
	began := time.Now()
	p := c.spawn(twin, c.cfgPath(node))
	c.mu.Lock()
	c.agents[twin] = p
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.agents, twin)
		c.mu.Unlock()
	}()

	// The twin first sees the lease held under its node_id by another
	// process; the clash is an error once that lasts ttl + retry_every
	// (give it one more retry, with jitter, and some scheduling slack).
	_, warned := c.waitLog(twin, off, 10*time.Second, "job=worker", "held by another process with this node_id")
	clash, clashed := "", false
	if warned {
		clash, clashed = c.waitLog(twin, off, ttl+retryEvery+retryEvery*6/5+2*time.Second, "job=worker", "node_id clash")
	}
	// Whether the leader kept the lease all along: its child ran alone,
	// and no child started since the twin did.
	kept := true
	for _, ch := range c.rec.snapshot().children {
		if ch.id != lead.id && ch.start.After(began) {
			kept = false
		}
	}
	if run := c.rec.running(); len(run) != 1 || run[0].id != lead.id {
		kept = false
	}
	ranFor := time.Since(began)
	switch {
	case clashed:
		c.note("dup-node-id: the twin logged the node_id clash")
		if testing.Verbose() && !*longForm {
			c.t.Logf("dup-node-id: twin of %s after %s: %s", node, ranFor.Round(time.Millisecond), strings.TrimSpace(clash))
		}
	case kept:
		c.failf("dup-node-id: the twin of %s ran %s while %s kept the lease, and logged no node_id clash (warned: %v)",
			node, ranFor.Round(time.Millisecond), node, warned)
	default:
		c.note("dup-node-id: the leader changed before the clash was due")
	}

	p.Signal(syscall.SIGTERM)
	select {
	case <-p.Done():
		if p.Err() != nil {
			c.failf("dup-node-id: the twin of %s exited with %v after SIGTERM, want exit 0", node, p.Err())
		}
	case <-time.After(20 * time.Second):
		return fmt.Errorf("the twin of %s did not exit within 20s of SIGTERM", node)
	}
	return nil
}

// closedOutput closes the reader of the leader's stdout and stderr (as
// when `electd run | tee log` is interrupted), makes the agent write to the
// broken pipe (SIGHUP), then stops it with SIGTERM: it must exit 0 (not die of
// SIGPIPE), its child must get the stop signal, and another node must take
// over at once, since the lease was released rather than left to expire.
// The agent is then started again with a new pipe.
func (c *cluster) closedOutput(lead childLife) error {
	node := lead.node
	p := c.agent(node)
	if f, err := os.OpenFile(c.logPath(node), os.O_APPEND|os.O_WRONLY, 0); err == nil {
		fmt.Fprintf(f, "=== faults: closed the reader of the agent's output at %s\n", time.Now().Format(time.RFC3339Nano))
		f.Close()
	}
	p.Out.Close()
	// A reload (of the same file) makes the agent write at once; the tick
	// jobs make every node write once a second anyway.
	p.Signal(syscall.SIGHUP)
	time.Sleep(500 * time.Millisecond)
	if !c.agentRunning(node) {
		c.failf("closed-output: agent %s exited (%v) once its output was closed", node, p.Err())
		c.start(node)
		return nil
	}
	term := time.Now()
	p.Signal(syscall.SIGTERM)
	if err := c.stopped(faultClosedOutput, node, 20*time.Second); err != nil {
		return err
	}
	c.childStopped(faultClosedOutput, lead)
	next, ok := c.rec.nextStart(func(ch childLife) bool { return !ch.start.After(term) }, ttl+10*time.Second)
	switch {
	case !ok:
		c.failf("closed-output: no node took over within %s of stopping %s", ttl+10*time.Second, node)
	case next.start.Sub(term) >= ttl*2/3:
		// A lease left to expire is taken ttl after the last renewal, at
		// least ttl - renew_every after the SIGTERM.
		c.failf("closed-output: %s took over %s after SIGTERM of %s: the lease was not released",
			next.node, next.start.Sub(term).Round(time.Millisecond), node)
	}
	c.start(node)
	return nil
}

// A reload of each of these must be rejected and change nothing.
var badConfigs = []struct {
	what string
	src  func(good string) string
}{
	{"100,000 nested [", func(string) string { return "x = " + strings.Repeat("[", 100_000) + "\n" }},
	{"a syntax error", func(good string) string { return good + "\njob \"broken\" {\n  ttl =\n" }},
	{"an unknown attribute", func(good string) string {
		return strings.Replace(good, "restart_wait =", "restart_wiat =", 1)
	}},
	{"an invalid value", func(good string) string {
		return strings.Replace(good, `restart      = "always"`, `restart      = "sometimes"`, 1)
	}},
}

// badReload writes each broken configuration to the leader's file and
// sends SIGHUP: the reload must be rejected, the agent keep running, and
// its child be the same one, alone. The good file is then restored and
// reloaded, which must keep the job as it is.
func (c *cluster) badReload(lead childLife) error {
	node := lead.node
	path := c.cfgPath(node)
	good, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	sameChild := func(after string) bool {
		if run := c.rec.running(); len(run) != 1 || run[0].id != lead.id {
			c.failf("bad-reload: after %s the child of %s (token %d) is not running alone: %s",
				after, node, lead.token, describe(run))
			return false
		}
		return true
	}
	for _, bad := range badConfigs {
		if err := os.WriteFile(path, []byte(bad.src(string(good))), 0o600); err != nil {
			return err
		}
		off := c.logSize(node)
		c.agent(node).Signal(syscall.SIGHUP)
		rejected := false
		for deadline := time.Now().Add(10 * time.Second); !rejected && c.agentRunning(node) && time.Now().Before(deadline); {
			_, rejected = c.waitLog(node, off, 50*time.Millisecond, "reload rejected")
		}
		if !c.agentRunning(node) {
			c.failf("bad-reload: agent %s exited (%v) on a reload of %s", node, c.agent(node).Err(), bad.what)
			if err := os.WriteFile(path, good, 0o600); err != nil {
				return err
			}
			c.start(node)
			return nil
		}
		if !rejected {
			c.failf("bad-reload: %s did not reject a configuration with %s within 10s", node, bad.what)
		}
		if !sameChild("a reload of " + bad.what) {
			break
		}
	}
	if err := os.WriteFile(path, good, 0o600); err != nil {
		return err
	}
	off := c.logSize(node)
	c.agent(node).Signal(syscall.SIGHUP)
	if l, ok := c.waitLog(node, off, 10*time.Second, "configuration reloaded"); !ok || !strings.Contains(l, "restarted=[]") {
		c.failf("bad-reload: reloading the restored configuration of %s: %q, want a reload that restarts nothing", node, strings.TrimSpace(l))
	}
	sameChild("the restored configuration")
	return nil
}

// missingProgram is the run command of cannot-start: nothing is there.
const missingProgram = "/nonexistent/electd-faults-child"

// cannotStart makes the leader's run command a program that does not exist
// and sends SIGHUP. The job restarts on that node; if the node wins the
// lease again it cannot start the command, must give the job away and stay
// out of the election for hold_off. Either way another node must run the
// child within a few seconds. The good configuration is then restored.
func (c *cluster) cannotStart(lead childLife) error {
	node := lead.node
	path := c.cfgPath(node)
	good, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, []byte(c.config(node, missingProgram)), 0o600); err != nil {
		return err
	}
	off := c.logSize(node)
	hup := time.Now()
	c.agent(node).Signal(syscall.SIGHUP)
	next, ok := c.rec.nextStart(func(ch childLife) bool { return !ch.start.After(hup) }, ttl+10*time.Second)
	switch {
	case !ok:
		c.failf("cannot-start: no child started within %s of breaking %s's run command", ttl+10*time.Second, node)
	case next.node == node:
		c.failf("cannot-start: %s started a child (token %d) with a run command that does not exist", node, next.token)
	case next.start.Sub(hup) >= ttl:
		c.failf("cannot-start: %s ran the child %s after the SIGHUP of %s, want within ttl (%s)",
			next.node, next.start.Sub(hup).Round(time.Millisecond), node, ttl)
	}
	// If the broken node led, it gave the job away: watch it through its
	// hold_off. A node that never led had nothing to give away.
	gave, gaveAway := c.waitLog(node, off, 2*time.Second, "job=worker", "cannot do the work: gave the job away")
	if gaveAway {
		if at, ok := logTime(gave); ok {
			time.Sleep(time.Until(at.Add(holdOff + 300*time.Millisecond)))
		} else {
			time.Sleep(holdOff)
		}
	}
	var gaveAt time.Time
	elected := 0
	for _, l := range c.logLines(node, off) {
		at, ok := logTime(l)
		switch {
		case !ok:
		case hasAll(l, []string{"job=worker", "gave the job away"}) && gaveAt.IsZero():
			gaveAt = at
		case hasAll(l, []string{"electd.agent: elected:", "job=worker"}):
			elected++
			if !gaveAt.IsZero() && at.Before(gaveAt.Add(holdOff)) {
				c.failf("cannot-start: %s led again %s after giving the job away, within its hold_off (%s): %s",
					node, at.Sub(gaveAt).Round(time.Millisecond), holdOff, strings.TrimSpace(l))
			}
		}
	}
	switch {
	case gaveAway:
		c.note("cannot-start: the broken node led, gave the job away and kept out for hold_off")
	case elected > 0:
		c.failf("cannot-start: %s led with a run command that cannot start and did not give the job away", node)
	default:
		c.note("cannot-start: another node took the lease before the broken node")
	}

	if err := os.WriteFile(path, good, 0o600); err != nil {
		return err
	}
	off = c.logSize(node)
	c.agent(node).Signal(syscall.SIGHUP)
	if _, ok := c.waitLog(node, off, 10*time.Second, "configuration reloaded"); !ok {
		c.failf("cannot-start: %s did not reload its restored configuration within 10s", node)
	}
	return nil
}

// setsidChild has the leader's child start a grandchild in a session of
// its own, which works under the same token and ignores the stop signal,
// then kills the leader's agent. In turn: SIGKILL or SIGTERM of the agent,
// and a grandchild left an orphan by a double fork or one the child keeps.
// The grandchild must be gone before another node's child starts: the
// checker's overlap rule holds it to that like any child.
func (c *cluster) setsidChild(lead childLife) error {
	node := lead.node
	c.mu.Lock()
	n := c.setsidN
	c.setsidN++
	c.mu.Unlock()
	sig, sigName := syscall.SIGKILL, "SIGKILL"
	if n%2 == 1 {
		sig, sigName = syscall.SIGTERM, "SIGTERM"
	}
	how, spawn := "an orphan (double fork)", syscall.SIGWINCH
	if n%4 >= 2 {
		how, spawn = "the child's own", syscall.SIGUSR2
	}

	syscall.Kill(lead.pid, spawn)
	var grand childLife
	for deadline := time.Now().Add(5 * time.Second); grand.pid == 0; {
		if time.Now().After(deadline) {
			return fmt.Errorf("the child of %s (pid %d) started no grandchild (%s) within 5s", node, lead.pid, how)
		}
		h := c.rec.snapshot()
		for _, ch := range h.children {
			if ch.sub && ch.parent == lead.id {
				for _, w := range h.writes {
					if w.child == ch.id && w.accepted {
						grand = ch // announced and working
					}
				}
			}
		}
		time.Sleep(10 * time.Millisecond)
	}

	killed := time.Now()
	c.agent(node).Signal(sig)
	if sig == syscall.SIGTERM {
		if err := c.stopped(faultSetsid, node, 20*time.Second); err != nil {
			return err
		}
	} else if _, ok := c.waitExit(node, 10*time.Second); !ok {
		return fmt.Errorf("agent %s still running 10s after SIGKILL", node)
	}
	next, ok := c.rec.nextStart(func(ch childLife) bool { return !ch.start.After(killed) }, ttl+10*time.Second)
	switch {
	case !ok:
		c.failf("setsid-child: no node took over within %s of the %s of %s", ttl+10*time.Second, sigName, node)
	case c.rec.ours(grand.pid):
		c.failf("setsid-child: the grandchild %d (%s) of %s's child was still running when %s's child started (after %s of %s)",
			grand.pid, how, node, next.node, sigName, node)
	}
	c.note("setsid-child: " + sigName + " of the agent, grandchild " + how)
	c.start(node)
	return nil
}

// stopAfterStart hands the job over with SIGTERM and, as soon as the new
// leader's child reports, stops that agent too: its child must get the stop
// signal (not SIGKILL at stop_timeout), the agent must exit 0, and the third
// node must take over. Both agents are then started again.
func (c *cluster) stopAfterStart(lead childLife) error {
	first := lead.node
	term := time.Now()
	c.agent(first).Signal(syscall.SIGTERM)
	next, ok := c.rec.nextStart(func(ch childLife) bool { return !ch.start.After(term) }, ttl+10*time.Second)
	if !ok {
		return fmt.Errorf("no node took over within %s of the SIGTERM of %s", ttl+10*time.Second, first)
	}
	second := next.node
	c.agent(second).Signal(syscall.SIGTERM)
	stopAt := time.Now()
	if testing.Verbose() && !*longForm {
		c.t.Logf("stop-after-start: SIGTERM of %s %s after its child reported", second, stopAt.Sub(next.start).Round(time.Microsecond))
	}
	if err := c.stopped(faultStopAfterStart, first, 20*time.Second); err != nil {
		return err
	}
	if err := c.stopped(faultStopAfterStart, second, 20*time.Second); err != nil {
		return err
	}
	c.childStopped(faultStopAfterStart, lead)
	c.childStopped(faultStopAfterStart, next)
	third, ok := c.rec.nextStart(func(ch childLife) bool { return !ch.start.After(stopAt) }, ttl+10*time.Second)
	switch {
	case !ok:
		c.failf("stop-after-start: no node took over within %s of the SIGTERM of %s", ttl+10*time.Second, second)
	case third.node == first || third.node == second:
		c.failf("stop-after-start: a child of %s started while its agent was stopped", third.node)
	}
	c.start(first)
	c.start(second)
	return nil
}

func describe(run []childLife) string {
	if len(run) == 0 {
		return "none"
	}
	d := make([]string, 0, len(run))
	for _, r := range run {
		d = append(d, fmt.Sprintf("%s token %d pid %d", r.node, r.token, r.pid))
	}
	return strings.Join(d, ", ")
}
