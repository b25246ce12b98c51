package faults

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// faultRec is one injected fault: what, on which node ("" for all or the
// store), and from when to when it acted.
type faultRec struct {
	kind     string
	node     string
	from, to time.Time
}

// The fault kinds. Connection faults need a networked store; restart needs
// a store the test runs itself.
const (
	faultKill       = "kill-9"        // SIGKILL the leading agent; start it again once another leads
	faultKillRejoin = "kill-9-rejoin" // SIGKILL the leading agent and start it again at once: the same node id returns
	faultPause      = "pause"         // SIGSTOP the leading agent for longer than ttl, then SIGCONT
	faultCutLeader  = "cut-leader"    // reset the leader's store connections, refuse new ones
	faultCutAll     = "cut-all"       // the same for every agent
	faultFreeze     = "freeze-leader" // the leader's connections stop moving bytes (partition)
	faultFreezeAll  = "freeze-all"
	faultStall      = "store-stall"   // the store stops answering (lock, SIGSTOP)
	faultRestart    = "store-restart" // the store server killed and started again
	faultHUP        = "sighup-burst"  // SIGHUP ×10 to every agent: nothing may change
	faultHandover   = "handover"      // SIGTERM the leader: exit 0, another takes over
	// The leader's child crashes, and the agent is paused during restart_wait:
	// on SIGCONT its term is over, and it must not start the child again.
	faultPauseRestart = "pause-in-restart"

	// What an operator or a child does to the agent (operator_test.go).
	faultDupNode        = "dup-node-id"      // a second agent with the leader's node_id and config, then SIGTERM
	faultClosedOutput   = "closed-output"    // the leader's stdout/stderr reader closed, then SIGTERM
	faultBadReload      = "bad-reload"       // broken configurations for the leader, SIGHUP each: nothing may change
	faultCannotStart    = "cannot-start"     // the leader's run command made a missing program, SIGHUP
	faultSetsid         = "setsid-child"     // the child starts a setsid grandchild; SIGKILL or SIGTERM of the agent
	faultStopAfterStart = "stop-after-start" // SIGTERM of a new leader as soon as its child reports
)

// steadyKinds are the faults that assert that the leader's child runs on,
// alone, through them.
var steadyKinds = map[string]bool{faultHUP: true, faultBadReload: true}

// agentKinds are the faults about the agent and its children rather than
// the store. The short form spreads them over the stores it runs, each
// once in all (each takes up to 6 s); the long form draws them on every
// store.
var agentKinds = []string{faultCannotStart, faultDupNode, faultBadReload, faultSetsid, faultStopAfterStart, faultClosedOutput}

// allStores are the stores of the suite, in the order they run.
var allStores = []string{"sqlite", "postgres", "mysql", "redis", "etcd", "zookeeper", "nats"}

// kinds is the faults a store supports, in the order the short form runs them.
func kinds(st *store) []string {
	k := []string{faultKill, faultKillRejoin, faultPause, faultPauseRestart, faultHUP, faultHandover}
	k = append(k, agentKinds...)
	if st.upstream != "" {
		k = append(k, faultCutLeader, faultCutAll, faultFreeze, faultFreezeAll)
	}
	if st.stall != nil {
		k = append(k, faultStall)
	}
	if st.restart != nil {
		k = append(k, faultRestart)
	}
	var out []string
	for _, kind := range k {
		if selected(*kindList, kind) {
			out = append(out, kind)
		}
	}
	return out
}

// shortForm is the short form's share of kinds for store name: every kind,
// except that each agent-side kind runs on one of the selected stores only,
// in turn (all of them when -faults.kinds names them).
func shortForm(name string, kinds []string) []string {
	if *kindList != "" {
		return kinds
	}
	var stores []string
	for _, s := range allStores {
		if wantStore(s) {
			stores = append(stores, s)
		}
	}
	share := map[string]bool{}
	for i, k := range agentKinds {
		share[k] = stores[i%len(stores)] == name
	}
	var out []string
	for _, k := range kinds {
		if mine, agentSide := share[k]; !agentSide || mine {
			out = append(out, k)
		}
	}
	return out
}

func TestFaults(t *testing.T) {
	if testing.Short() {
		t.Skip("starts agents on every store: skipped under -short")
	}
	// The stores run side by side, -parallel at a time (see TestMain).
	// Each has its own cluster, proxies, recorder and store server (a
	// table of its own on the shared PostgreSQL and MySQL). The summary
	// waits for them all: a cleanup runs after the subtests.
	var (
		mu      sync.Mutex
		reports = map[string]*report{}
	)
	t.Cleanup(func() {
		var ordered []*report
		for _, name := range allStores {
			if r := reports[name]; r != nil {
				ordered = append(ordered, r)
			}
		}
		if len(ordered) > 0 {
			writeSummary(t, ordered)
		}
	})
	for _, name := range allStores {
		if !wantStore(name) {
			continue
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if r := runStore(t, name); r != nil {
				mu.Lock()
				reports[name] = r
				mu.Unlock()
			}
		})
	}
}

// writeSummary logs the table of reports and appends it to -faults.summary.
func writeSummary(t *testing.T, reports []*report) {
	table := summaryTable(reports)
	t.Log("\n" + table)
	if *summary == "" {
		return
	}
	f, err := os.OpenFile(*summary, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	form := "short"
	if *longForm {
		form = fmt.Sprintf("long, %d faults per store", *nFaults)
	}
	fmt.Fprintf(f, "\n### %s (%s)\n\n%s", time.Now().UTC().Format(time.RFC3339), form, table)
}

// runStore runs one store's cluster through its faults and checks it.
func runStore(t *testing.T, name string) *report {
	st := newStore(t, name)
	c := newCluster(t, st, agentsPerRun)
	began := time.Now()
	if _, err := c.leader(30*time.Second, time.Second); err != nil {
		t.Fatalf("no leader at start: %v", err)
	}

	plan := shortForm(name, kinds(st))
	rng := rand.New(rand.NewPCG(1, 1))
	if *longForm {
		s := *seed
		if s == 0 {
			s = time.Now().UnixNano()
		}
		t.Logf("long form: %d faults, seed %d (-faults.seed=%d repeats the sequence)", *nFaults, s, s)
		rng = rand.New(rand.NewPCG(uint64(s), 0))
		all := kinds(st)
		plan = make([]string, *nFaults)
		for i := range plan {
			// Every kind at least once, then at random.
			if i < len(all) {
				plan[i] = all[i]
			} else {
				plan[i] = all[rng.IntN(len(all))]
			}
		}
	}
	var prev time.Time // when the last fault began
	for i, kind := range plan {
		settle := 300 * time.Millisecond
		if steadyKinds[kind] {
			// The fault before may still end the leader's term: a renewal
			// that failed during it steps the leader down less than ttl
			// after it began. A kind that asserts that nothing changes
			// starts only after that (and retry_every of slack).
			settle = max(settle, ttl+retryEvery-time.Since(prev))
		}
		lead, err := c.leader(30*time.Second, settle)
		if err != nil {
			c.failf("before fault %d (%s): %v", i+1, kind, err)
			break
		}
		prev = time.Now()
		f, err := c.inject(kind, lead, rng)
		if err != nil {
			c.failf("fault %d (%s): %v", i+1, kind, err)
			break
		}
		if testing.Verbose() && (!*longForm || (i+1)%20 == 0) {
			t.Logf("fault %d/%d %s on %s: %s", i+1, len(plan), kind, orAll(f.node), f.to.Sub(f.from).Round(time.Millisecond))
		}
	}
	if _, err := c.leader(30*time.Second, 500*time.Millisecond); err != nil {
		c.failf("after the last fault: %v", err)
	}
	end := time.Now()
	c.shutdown()

	r := check(c.rec.snapshot(), c.faults, c.pauses, end)
	r.store, r.elapsed, r.observed = name, time.Since(began), c.observed
	r.failures = append(c.failures, r.failures...)
	t.Log(r.text())
	for _, f := range r.failures {
		t.Error(f)
	}
	if t.Failed() {
		c.dumpLogs()
	}
	return r
}

func orAll(node string) string {
	if node == "" {
		return "all"
	}
	return node
}

// faultLen is how long a cut, freeze, stall or pause lasts: in the short
// form a little over ttl (leadership must move); in the long form drawn
// from a range that also has blips the leader should ride out.
func faultLen(kind string, rng *rand.Rand) time.Duration {
	if !*longForm {
		if kind == faultPause || kind == faultPauseRestart {
			return ttl + 1500*time.Millisecond
		}
		return ttl + time.Second
	}
	if kind == faultPause || kind == faultPauseRestart { // always longer than ttl: a paused leader
		return ttl + 500*time.Millisecond + time.Duration(rng.Int64N(int64(ttl)))
	}
	return ttl/4 + time.Duration(rng.Int64N(int64(ttl*7/4)))
}

// inject runs one fault against the current leader and returns once the
// fault is over (not once the cluster has recovered).
func (c *cluster) inject(kind string, lead childLife, rng *rand.Rand) (faultRec, error) {
	node := lead.node
	f := faultRec{kind: kind, node: node, from: time.Now()}
	d := faultLen(kind, rng)
	var err error
	switch kind {
	case faultKill, faultKillRejoin:
		c.agent(node).Signal(syscall.SIGKILL)
		if _, ok := c.waitExit(node, 10*time.Second); !ok {
			return f, fmt.Errorf("agent %s still running 10s after SIGKILL", node)
		}
		if kind == faultKill {
			// Measure the failover to another node: the killed node's
			// lease must expire first. The node comes back afterwards.
			if _, err := c.leader(ttl+10*time.Second, 0); err != nil {
				c.failf("kill-9 of %s: %v", node, err)
			}
		}
		c.start(node)
	case faultPauseRestart:
		syscall.Kill(lead.pid, syscall.SIGUSR1)
		for deadline := time.Now().Add(2 * time.Second); c.rec.ours(lead.pid) && time.Now().Before(deadline); {
			time.Sleep(5 * time.Millisecond)
		}
		// The agent sees the exit and schedules the restart (restart_wait
		// 250ms); pause it before the restart is due.
		time.Sleep(50 * time.Millisecond)
		c.pause(node)
		time.Sleep(d)
		c.resume(node)
	case faultPause:
		c.pause(node)
		time.Sleep(d)
		c.resume(node)
	case faultCutLeader, faultFreeze:
		state := map[string]string{faultCutLeader: "cut", faultFreeze: "freeze"}[kind]
		c.proxies[node].set(state)
		time.Sleep(d)
		c.proxies[node].set("up")
	case faultCutAll, faultFreezeAll:
		f.node = ""
		state := map[string]string{faultCutAll: "cut", faultFreezeAll: "freeze"}[kind]
		for _, p := range c.proxies {
			p.set(state)
		}
		time.Sleep(d)
		for _, p := range c.proxies {
			p.set("up")
		}
	case faultStall:
		f.node = ""
		err = c.st.stall(d)
	case faultRestart:
		f.node = ""
		err = c.st.restart()
	case faultHUP:
		f.node = ""
		err = c.hupBurst(lead)
	case faultHandover:
		c.agent(node).Signal(syscall.SIGTERM)
		if err := c.stopped(kind, node, 20*time.Second); err != nil {
			return f, err
		}
		c.childStopped(kind, lead)
		c.start(node)
	case faultDupNode:
		err = c.dupNode(lead)
	case faultClosedOutput:
		err = c.closedOutput(lead)
	case faultBadReload:
		err = c.badReload(lead)
	case faultCannotStart:
		err = c.cannotStart(lead)
	case faultSetsid:
		err = c.setsidChild(lead)
	case faultStopAfterStart:
		err = c.stopAfterStart(lead)
	default:
		return f, fmt.Errorf("unknown fault %q", kind)
	}
	f.to = time.Now()
	c.mu.Lock()
	c.faults = append(c.faults, f)
	c.mu.Unlock()
	return f, err
}

// hupBurst sends ten SIGHUPs to every agent, 50 ms apart. A reload that
// changes nothing must not touch any job: the same child keeps running
// and no agent exits.
func (c *cluster) hupBurst(lead childLife) error {
	for range 10 {
		for _, node := range c.nodes {
			c.agent(node).Signal(syscall.SIGHUP)
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(2 * time.Second)
	for _, node := range c.nodes {
		select {
		case <-c.agent(node).Done():
			c.failf("sighup-burst: agent %s exited (%v)", node, c.agent(node).Err())
			c.start(node)
		default:
		}
	}
	run := c.rec.running()
	if len(run) != 1 || run[0].id != lead.id {
		ids := make([]string, 0, len(run))
		for _, r := range run {
			ids = append(ids, fmt.Sprintf("%s/token %d", r.node, r.token))
		}
		c.failf("sighup-burst: the leader's child (%s, token %d) did not keep running alone; running now: [%s]",
			lead.node, lead.token, strings.Join(ids, " "))
	}
	return nil
}

// stopped waits for node's agent to exit after a SIGTERM: it must exit 0.
func (c *cluster) stopped(kind, node string, within time.Duration) error {
	exitErr, ok := c.waitExit(node, within)
	switch {
	case !ok:
		return fmt.Errorf("agent %s did not exit within %s of SIGTERM", node, within)
	case exitErr != nil:
		c.failf("%s: agent %s exited with %v after SIGTERM, want exit 0", kind, node, exitErr)
	}
	return nil
}

// childStopped checks that a child its agent stopped got the stop signal
// (it said "stop"), rather than SIGKILL at stop_timeout.
func (c *cluster) childStopped(kind string, child childLife) {
	deadline := time.Now().Add(3 * time.Second)
	for {
		for _, ch := range c.rec.snapshot().children {
			if ch.id != child.id {
				continue
			}
			if ch.stopped {
				return
			}
			if ch.ended || time.Now().After(deadline) {
				c.failf("%s: the child of %s (token %d, pid %d) ended without getting the stop signal (killed at stop_timeout?)",
					kind, child.node, child.token, child.pid)
				return
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// dumpLogs copies the agents' logs where the failure message says, since
// a failed long run's logs are too big for the test output.
func (c *cluster) dumpLogs() {
	dir, err := os.MkdirTemp("", "electd-faults-logs-")
	if err != nil {
		return
	}
	logs, _ := filepath.Glob(filepath.Join(c.dir, "*.log"))
	for _, l := range logs {
		if b, err := os.ReadFile(l); err == nil {
			os.WriteFile(filepath.Join(dir, filepath.Base(l)), b, 0o644)
		}
	}
	c.t.Logf("agents' logs kept in %s", dir)
}
