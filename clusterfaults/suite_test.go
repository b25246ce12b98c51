package clusterfaults

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	ec "github.com/electd/electd/internal/cluster"
)

// timing is every agent's job timing: the fault suite's (faults/), passing
// electd check. A leader's step-down point is 1.87 s after its last
// successful renewal was sent.
var timing = ec.Timing{TTL: 3 * time.Second, Renew: 500 * time.Millisecond, Retry: 250 * time.Millisecond, Stop: time.Second}

// hold is how long a partition lasts when nothing is expected to change:
// two ttls.
var hold = 2 * timing.TTL

// store is a store running as a cluster, one member per host.
type store interface {
	name() string
	block() string                // the agents' provider block
	leader(from int) (int, error) // the host of the store's own leader, asked from host from
	kill(i int)                   // SIGKILL of host i's member
	restart(i int)                // host i's member again, on its data; waits until it serves
	healthy(from int) bool        // every member answers host from
	electionTime() time.Duration  // how much later than ttl a lease can end when the store loses its leader
	logs() string
}

// figure is what one fault did.
type figure struct {
	fault     string
	stepDowns int           // terms that ended while the fault lasted
	takeover  time.Duration // fault to the next leader's start, when leadership moved
	gap       time.Duration // the previous leader's stop to the next one's start
	target    time.Duration // most takeover allowed; 0: leadership must not move
	mustMove  bool          // the leader was cut off: leadership must move
}

func (f figure) met() bool {
	switch {
	case f.stepDowns == 0:
		return !f.mustMove
	case f.target == 0:
		return false
	}
	return f.takeover <= f.target
}

func (f figure) String() string {
	s := fmt.Sprintf("%-28s step-downs %d", f.fault, f.stepDowns)
	if f.stepDowns > 0 {
		s += fmt.Sprintf(", new leader %s after the fault, %s after the old one stopped", f.takeover.Round(time.Millisecond), f.gap.Round(time.Millisecond))
	}
	switch {
	case f.mustMove:
		s += fmt.Sprintf(" (target: new leader within %s)", f.target)
	case f.target > 0:
		s += fmt.Sprintf(" (target: none, or a new leader within %s)", f.target)
	default:
		s += " (target: none)"
	}
	return s
}

// suite is three hosts, each with a store member and an agent.
type suite struct {
	t   *testing.T
	h   *hosts
	st  store
	c   *ec.Cluster
	log []figure
	// failovers are the times of the replicated stores' failovers (see
	// window).
	failovers [][2]time.Time
}

// agentAPI is every agent's API, on its own host's loopback.
const agentAPI = "127.0.0.1:7070"

func TestClusters(t *testing.T) {
	if testing.Short() {
		t.Skip("starts store clusters in network namespaces: skipped under -short")
	}
	for _, s := range []struct {
		name  string
		start func(t *testing.T, h *hosts) store
	}{
		{"etcd", newEtcd},
		{"zookeeper", newZooKeeper},
		{"nats", newNATS},
		{"redlock", newRedlock},
		{"postgres", newPostgres},
		{"redis", newRedisReplicated},
	} {
		t.Run(s.name, func(t *testing.T) {
			if !wantStore(s.name) {
				t.Skipf("not selected (-clusters.stores %q)", *storeList)
			}
			h := newHosts(t, 3)
			runSuite(t, h, s.start(t, h))
		})
	}
}

func runSuite(t *testing.T, h *hosts, st store) {
	bin := electd(t)
	dir := t.TempDir()
	c, err := ec.NewWith(dir, func(c *ec.Cluster, node string) (*ec.Agent, error) {
		var i int
		fmt.Sscanf(node, "node-%d", &i)
		cfg := c.ConfigPath(node)
		err := ec.WriteConfig(cfg, ec.AgentBlock(node, agentAPI, ec.Str("log_level", "debug")), st.block(),
			ec.RunJob("worker", timing, "sh", c.Script, c.Children.Path))
		if err != nil {
			return nil, err
		}
		return ec.StartProcess(ec.Spec{Name: node, Argv: h.in(i, bin, "run", "-config", cfg), Dir: dir,
			LogPath: ec.LogPath(dir, node), Group: true})
	})
	if err != nil {
		t.Fatal(err)
	}
	s := &suite{t: t, h: h, st: st, c: c}
	t.Cleanup(func() {
		c.StopAll(15 * time.Second)
		if t.Failed() || os.Getenv("CLUSTERS_LOGS") != "" {
			t.Logf("logs:\n%s\n%s", c.Logs(), st.logs())
		}
	})
	for i := 1; i <= h.n; i++ {
		if _, err := c.Start(fmt.Sprintf("node-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Children.WaitStarts(1, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	for r := 0; r < faultRounds(); r++ {
		if rs, ok := st.(replicated); ok {
			s.failoverRound(rs)
			continue
		}
		s.bystander()
		s.isolateStoreLeader()
		s.killStoreLeader()
		s.isolateLeader()
	}
	s.report(time.Since(began))
}

// settled waits until exactly one child runs, has run for two renewals
// (a Redlock term won on two servers while a rival's attempt held the
// third has the third join it on a renewal), and every member answers
// every host; it returns the leading agent's host.
func (s *suite) settled() int {
	s.t.Helper()
	var host int
	ok := ec.Until(60*time.Second, 100*time.Millisecond, func() bool {
		for i := 1; i <= s.h.n; i++ {
			if !s.st.healthy(i) {
				return false
			}
		}
		if st, err := s.c.Children.Starts(); err != nil || len(st) == 0 || time.Since(st[len(st)-1].At) < 2*timing.Renew {
			return false
		}
		a, _, err := s.c.Leader()
		if err != nil {
			return false
		}
		fmt.Sscanf(a.Node, "node-%d", &host)
		return true
	})
	if !ok {
		s.t.Fatalf("no single leader with a healthy store within 60s")
	}
	return host
}

func (s *suite) storeLeader(from int) int {
	s.t.Helper()
	var l int
	var err error
	if !ec.Until(10*time.Second, 100*time.Millisecond, func() bool { l, err = s.st.leader(from); return err == nil }) {
		s.t.Fatalf("%s leader: %v", s.st.name(), err)
	}
	return l
}

func (s *suite) starts() int {
	st, err := s.c.Children.Starts()
	if err != nil {
		s.t.Fatal(err)
	}
	return len(st)
}

// measure makes the figure of a fault that began at t0 while n0 children
// had started.
func (s *suite) measure(fault string, t0 time.Time, n0 int, target time.Duration, mustMove bool) figure {
	s.t.Helper()
	recs, err := s.c.Children.Records()
	if err != nil {
		s.t.Fatal(err)
	}
	f := figure{fault: fault, target: target, mustMove: mustMove}
	var starts []ec.Record
	stops := map[int]time.Time{}
	for _, r := range recs {
		switch r.Kind {
		case "start":
			starts = append(starts, r)
		case "stop":
			stops[r.PID] = r.At
		}
	}
	f.stepDowns = len(starts) - n0
	if f.stepDowns > 0 {
		next := starts[n0]
		f.takeover = next.At.Sub(t0)
		if end, ok := stops[starts[n0-1].PID]; ok {
			f.gap = next.At.Sub(end)
		}
	}
	s.log = append(s.log, f)
	s.t.Log(f)
	if !f.met() {
		s.t.Errorf("%s: target missed: %s", s.st.name(), f)
	}
	return f
}

// bystander isolates a host that runs neither the leading agent nor the
// store's leader: nothing may change.
func (s *suite) bystander() {
	l := s.settled()
	sl := s.storeLeader(l)
	b := 1
	for b == l || b == sl {
		b++
	}
	n0, t0 := s.starts(), time.Now()
	s.h.isolate(b)
	time.Sleep(hold)
	s.h.heal(b)
	time.Sleep(2 * time.Second)
	s.measure(fmt.Sprintf("isolate a bystander (h%d)", b), t0, n0, 0, false)
}

// isolateLeader isolates the leading agent's host: the others take over
// once its lease expires.
func (s *suite) isolateLeader() {
	l := s.settled()
	sl := s.storeLeader(l)
	target := timing.TTL + 2*time.Second
	what := fmt.Sprintf("isolate the leader (h%d)", l)
	if sl == l {
		// The store elects a new leader too, which restarts every lease's
		// ttl (etcd) or must first take over the session (ZooKeeper).
		target += s.st.electionTime()
		what = fmt.Sprintf("isolate leader+store's (h%d)", l)
	}
	n0, t0 := s.starts(), time.Now()
	s.h.isolate(l)
	_, err := s.c.Children.WaitStart(context.Background(), n0, fmt.Sprintf("node-%d", l), 60*time.Second)
	if err != nil {
		s.t.Errorf("%s: no new leader within 60s of isolating the leader's host h%d", s.st.name(), l)
	}
	s.h.heal(l)
	s.measure(what, t0, n0, target, true)
}

// isolateStoreLeader isolates the store leader's host (when the leading
// agent runs there, see isolateLeader). The store elects a new leader, and
// a term whose renewals wait for that longer than its step-down point
// allows ends: a new leader must then run within ttl + the store's
// election time.
func (s *suite) isolateStoreLeader() {
	l := s.settled()
	sl := s.storeLeader(l)
	if sl == l {
		s.isolateLeader()
		return
	}
	n0, t0 := s.starts(), time.Now()
	s.h.isolate(sl)
	time.Sleep(hold)
	s.h.heal(sl)
	time.Sleep(2 * time.Second)
	s.measure(fmt.Sprintf("isolate the store's leader (h%d)", sl), t0, n0, timing.TTL+s.st.electionTime(), false)
}

// killStoreLeader kills the store's leader (kill -9), then restarts it
// once any takeover is due:
// as isolateStoreLeader, a term may end, and a new leader must then run
// within ttl + the store's election time.
func (s *suite) killStoreLeader() {
	l := s.settled()
	sl := s.storeLeader(l)
	n0, t0 := s.starts(), time.Now()
	s.st.kill(sl)
	time.Sleep(timing.TTL + s.st.electionTime())
	s.st.restart(sl)
	s.measure(fmt.Sprintf("kill -9 the store's leader (h%d)", sl), t0, n0, timing.TTL+s.st.electionTime(), false)
}

// report checks the whole history and logs the figures. An overlap of at
// most one ttl that began during a failover of a replicated store is the
// documented asynchronous-replication window (docs/providers/sql.md and
// redis.md, "Running it as a cluster"): counted apart, not a failure.
// Every other overlap, and every token repeat or regression, is.
func (s *suite) report(took time.Duration) {
	h, err := s.c.Children.History(nil)
	if err != nil {
		s.t.Fatal(err)
	}
	var windowed []string
	bad := 0
	for _, o := range h.Overlaps {
		if s.inFailover(o.Later.At) && o.For <= timing.TTL {
			windowed = append(windowed, o.For.Round(time.Millisecond).String())
			s.t.Logf("%s: within the asynchronous-replication window: %s", s.st.name(), o)
			continue
		}
		bad++
		s.t.Errorf("%s: %s", s.st.name(), o)
	}
	for _, p := range h.Problems()[len(h.Overlaps):] {
		bad++
		s.t.Errorf("%s: %s", s.st.name(), p)
	}
	var lines []string
	for _, f := range s.log {
		lines = append(lines, "  "+f.String())
	}
	extra := ""
	if _, ok := s.st.(replicated); ok {
		extra = fmt.Sprintf("; overlaps within the asynchronous-replication window: %d [%s]; regressions the agents reported: %s",
			len(windowed), strings.Join(windowed, " "), s.regressions())
	}
	s.t.Logf("%s ×3, ttl %s: %d faults in %s, %d terms; overlaps and token repeats or regressions: %d (repeats %d, regressions %d); a fence would accept %d of %d terms%s\n%s",
		s.st.name(), timing.TTL, len(s.log), took.Round(time.Second), h.Terms, bad, len(h.Repeats), len(h.Regressions),
		h.Terms-h.FenceRefused, h.Terms, extra, strings.Join(lines, "\n"))
}

func (s *suite) inFailover(at time.Time) bool {
	for _, w := range s.failovers {
		if !at.Before(w[0]) && !at.After(w[1]) {
			return true
		}
	}
	return false
}
