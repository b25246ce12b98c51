package agent

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/electd/electd/internal/syncbuf"
	"github.com/electd/electd/providers"
)

// fleetAgent is the agent block of the fleet tests: node, its tags, and
// whether it balances.
func fleetAgent(node, tags string, balance bool) string {
	return fmt.Sprintf(`
agent {
  node_id          = %q
  listen           = ""
  shutdown_timeout = "10s"
  tags             = { %s }
  balance          = %v
}
`, node, tags, balance)
}

// fleetConfig is agentConfig with the agent block's tags and balance.
func fleetConfig(node, db, tags string, balance bool, jobs string) string {
	return fleetAgent(node, tags, balance) + fmt.Sprintf(`provider "sql" "s" {
  driver = "sqlite"
  dsn    = %q
}
%s`, db, jobs)
}

const fastTimings = `  ttl         = "3s"
  renew_every = "500ms"
  retry_every = "300ms"
`

func quiet(o *Options) { o.Logger = hclog.NewNullLogger() }

// leaders counts the jobs each agent leads.
func leaders(agents ...*testAgent) []int {
	out := make([]int, len(agents))
	for i, a := range agents {
		for _, j := range a.Jobs() {
			if j.State == StateLeader {
				out[i]++
			}
		}
	}
	return out
}

// noJobLedTwice fails when two agents say they lead one job at once.
func noJobLedTwice(t *testing.T, agents ...*testAgent) {
	t.Helper()
	seen := map[string]string{}
	for _, a := range agents {
		for _, j := range a.Jobs() {
			if j.State != StateLeader {
				continue
			}
			if other, ok := seen[j.Job]; ok {
				t.Fatalf("job %s led by %s and %s at once", j.Job, other, j.Leader)
			}
			seen[j.Job] = j.Leader
		}
	}
}

// statusOf is a job's status, zero until the agent has started it.
func statusOf(a *testAgent, job string) JobStatus {
	for _, j := range a.Jobs() {
		if j.Job == job {
			return j
		}
	}
	return JobStatus{}
}

func reasons(a *testAgent, job, typ string) []string {
	h, _ := a.History(job)
	var out []string
	for _, tr := range h {
		if tr.Type == typ {
			out = append(out, tr.Reason)
		}
	}
	return out
}

// A job whose constraint does not match a node's tags never leads there,
// and says so; a matching node leads it.
func TestConstraintKeepsAJobOnMatchingNodes(t *testing.T) {
	db := sqliteDB(t)
	jobs := `job "gpu" {
  constraint = { role = "gpu" }
` + fastTimings + `}
job "any" {
` + fastTimings + `}
job "pinned" {
  constraint = { node = "gpu-1" }
` + fastTimings + `}
`
	web := startAgent(t, loadConfig(t, fleetConfig("web", db, `role = "web"`, false, jobs)))
	eventually(t, 10*time.Second, "web leads the unconstrained job", func() bool { return web.job("any").state == StateLeader })
	turns(t, 2, web, "gpu") // it looked at the store twice, and stayed out
	st := statusOf(web, "gpu")
	if st.State != StateNotEligible || st.Eligible || st.Competing || !strings.Contains(st.Waiting, "not eligible") {
		t.Fatalf("gpu job on a web node: %+v; want not_eligible, not competing, a reason", st)
	}
	gpu := startAgent(t, loadConfig(t, fleetConfig("gpu-1", db, `role = "gpu"`, false, jobs)))
	eventually(t, 10*time.Second, "the gpu node leads the gpu job", func() bool { return gpu.job("gpu").state == StateLeader })
	eventually(t, 10*time.Second, "the node named by a constraint on node leads its job", func() bool {
		return gpu.job("pinned").state == StateLeader
	})
	if s := statusOf(web, "pinned"); s.Eligible {
		t.Errorf("a job pinned to gpu-1 is eligible on web: %+v", s)
	}
	eventually(t, 10*time.Second, "the web node shows the gpu job's leader", func() bool {
		s := web.job("gpu")
		return s.state == StateNotEligible && s.leader == "gpu-1"
	})
}

// A leader whose health check fails steps down (reason unhealthy, in
// on_demoted and the history) and another node takes over at once; the
// failing node competes again only after `successes` passes.
func TestUnhealthyLeaderStepsDown(t *testing.T) {
	db := sqliteDB(t)
	dir := t.TempDir()
	job := func(node string) string {
		return fmt.Sprintf(`job "etl" {
%s  health {
    command   = ["test", "-e", %q]
    interval  = "500ms"
    timeout   = "500ms"
    failures  = 2
    successes = 3
  }
  on_demoted {
    exec {
      command = ["sh", "-c", "echo $ELECTD_REASON >> %s"]
    }
  }
}
`, fastTimings, filepath.Join(dir, node+".ok"), filepath.Join(dir, node+".demoted"))
	}
	ok := func(node string, on bool) {
		p := filepath.Join(dir, node+".ok")
		if on {
			os.WriteFile(p, nil, 0o644)
		} else {
			os.Remove(p)
		}
	}
	ok("a", true)
	a := startAgent(t, loadConfig(t, fleetConfig("a", db, "", false, job("a"))))
	eventually(t, 10*time.Second, "a leads", func() bool { return a.job("etl").state == StateLeader })
	b := startAgent(t, loadConfig(t, fleetConfig("b", db, "", false, job("b"))))
	eventually(t, 10*time.Second, "b's check fails", func() bool {
		h := statusOf(b, "etl").Health
		return h != nil && h.Status == HealthFailing
	})
	if st := statusOf(b, "etl"); st.Competing || !strings.Contains(st.Waiting, "health") {
		t.Fatalf("an unhealthy candidate: %+v; want it out of the election", st)
	}
	ok("b", true)
	ok("a", false)
	eventually(t, 10*time.Second, "b leads after a's check fails", func() bool { return b.job("etl").state == StateLeader })
	noJobLedTwice(t, a, b)
	eventually(t, 10*time.Second, "a's on_demoted says why", func() bool {
		return strings.Join(lines(t, filepath.Join(dir, "a.demoted")), ",") == ReasonUnhealthy
	})
	if got := reasons(a, "etl", "demoted"); len(got) != 1 || got[0] != ReasonUnhealthy {
		t.Errorf("a's history of demotions: %v, want [unhealthy]", got)
	}
	if h := statusOf(a, "etl").Health; h == nil || h.Status != HealthFailing || h.LastError == "" {
		t.Errorf("a's health: %+v", h)
	}
	// Healthy again: a competes (b keeps the lease: no preference here).
	ok("a", true)
	eventually(t, 10*time.Second, "a competes again", func() bool { return statusOf(a, "etl").Competing })
	if statusOf(a, "etl").Health.ConsecutiveSuccesses < 3 {
		t.Errorf("a competes after %d passes, want 3", statusOf(a, "etl").Health.ConsecutiveSuccesses)
	}
}

// Drain hands every job over and keeps the node out until cancelled.
func TestDrainHandsEverythingOver(t *testing.T) {
	db := sqliteDB(t)
	var jobs strings.Builder
	for i := range 4 {
		fmt.Fprintf(&jobs, "job \"d%d\" {\n%s}\n", i, fastTimings)
	}
	a := startAgent(t, loadConfig(t, fleetConfig("a", db, "", false, jobs.String())), quiet)
	eventually(t, 10*time.Second, "a leads all", func() bool { return leaders(a)[0] == 4 })
	b := startAgent(t, loadConfig(t, fleetConfig("b", db, "", false, jobs.String())), quiet)
	if d := a.Drain(true, false); len(d) != 4 {
		t.Errorf("Drain says a led %d jobs, want 4: %+v", len(d), d)
	}
	eventually(t, 10*time.Second, "b leads all", func() bool { return leaders(b)[0] == 4 })
	noJobLedTwice(t, a, b)
	if !a.Info().Draining {
		t.Error("Info does not say draining")
	}
	for _, j := range a.Jobs() {
		if j.Competing || j.Waiting != "the agent is draining" {
			t.Errorf("a draining agent's job: %+v", j)
		}
		if got := reasons(a, j.Job, "demoted"); len(got) != 1 || got[0] != ReasonDrained {
			t.Errorf("job %s demoted for %v, want [drained]", j.Job, got)
		}
	}
	a.Drain(false, false)
	eventually(t, 10*time.Second, "a competes again", func() bool { return statusOf(a, "d0").Competing })
	b.stop(t)
	eventually(t, 10*time.Second, "a leads again once b is gone", func() bool { return leaders(a)[0] == 4 })
}

// Agents sharing a store spread its jobs: each leads its share, within one,
// with no more handovers than needed; when one stops, the others share its
// jobs.
func TestBalanceSpreadsJobs(t *testing.T) {
	db := sqliteDB(t)
	const n = 30
	var jobs strings.Builder
	for i := range n {
		fmt.Fprintf(&jobs, "job \"b%02d\" {\n%s}\n", i, fastTimings)
	}
	var agents []*testAgent
	for i := range 3 {
		agents = append(agents, startAgent(t, loadConfig(t, fleetConfig(fmt.Sprintf("n%d", i), db, "", true, jobs.String())), quiet))
		time.Sleep(time.Second) // a deliberate stagger: agents that join one after another, as in a rollout
	}
	spread := func(want int) func() bool {
		return func() bool {
			total := 0
			for _, c := range leaders(agents...) {
				if c < want-1 || c > want+1 {
					return false
				}
				total += c
			}
			return total == n
		}
	}
	eventually(t, 30*time.Second, "every agent leads 10 ± 1", spread(n/3))
	noJobLedTwice(t, agents...)
	moves := 0
	for _, a := range agents {
		for _, j := range a.Jobs() {
			for _, r := range reasons(a, j.Job, "demoted") {
				if r == ReasonBalanced {
					moves++
				}
			}
		}
	}
	t.Logf("spread %v after %d handovers", leaders(agents...), moves)
	if moves > n {
		t.Errorf("%d handovers to spread %d jobs: want at most %d", moves, n, n)
	}
	agents[2].stop(t)
	agents = agents[:2]
	eventually(t, 30*time.Second, "the other two lead 15 ± 1", spread(n/2))
	noJobLedTwice(t, agents...)
}

// With balance off, leadership stays where it landed.
func TestNoBalanceIsSticky(t *testing.T) {
	db := sqliteDB(t)
	var jobs strings.Builder
	for i := range 6 {
		fmt.Fprintf(&jobs, "job \"s%d\" {\n%s}\n", i, fastTimings)
	}
	a := startAgent(t, loadConfig(t, fleetConfig("a", db, "", false, jobs.String())), quiet)
	eventually(t, 10*time.Second, "a leads all", func() bool { return leaders(a)[0] == 6 })
	b := startAgent(t, loadConfig(t, fleetConfig("b", db, "", false, jobs.String())), quiet)
	// b tried each job and was refused, and both took the views in which
	// a balancing fleet would have moved jobs to b.
	turns(t, 3, b, "s0", "s1", "s2", "s3", "s4", "s5")
	settle(t, 4, a, b)
	if got := leaders(a, b); got[0] != 6 || got[1] != 0 {
		t.Errorf("with balance = false the leaders moved: %v", got)
	}
}

// A preferred node takes a job over by a graceful handover once it has been
// fit for prefer_settle; a node that is not preferred does not take it back.
func TestPreferMovesTheJob(t *testing.T) {
	db := sqliteDB(t)
	job := `job "etl" {
  prefer        = { zone = "eu" }
  prefer_settle = "1s"
` + fastTimings + `}
`
	us := startAgent(t, loadConfig(t, fleetConfig("us-1", db, `zone = "us"`, false, job)))
	eventually(t, 10*time.Second, "us-1 leads while alone", func() bool { return us.job("etl").state == StateLeader })
	first := us.job("etl").token
	eu := startAgent(t, loadConfig(t, fleetConfig("eu-1", db, `zone = "eu"`, false, job)))
	start := time.Now()
	eventually(t, 15*time.Second, "eu-1 takes over", func() bool { return eu.job("etl").state == StateLeader })
	t.Logf("preferred node leads %s after its start", time.Since(start).Round(10*time.Millisecond))
	if time.Since(start) < time.Second {
		t.Errorf("the preferred node led before prefer_settle")
	}
	noJobLedTwice(t, us, eu)
	if got := reasons(us, "etl", "demoted"); len(got) != 1 || got[0] != ReasonPreempted {
		t.Errorf("us-1 demoted for %v, want [preempted]", got)
	}
	if tok := eu.job("etl").token; tok != first+1 {
		t.Errorf("token %d after one handover from %d: want the next", tok, first)
	}
	// us-1 asked the store three times more, and both agents took three
	// views (each a chance to move the job back).
	turns(t, 3, us, "etl")
	settle(t, 3, us, eu)
	if s := eu.job("etl"); s.state != StateLeader || s.token != first+1 {
		t.Errorf("the preferred node lost the job again: %+v", s)
	}
}

// When every membership slot on the store is taken, the agent still elects
// and says why the others will not count it.
func TestMembershipSlotsFull(t *testing.T) {
	db := sqliteDB(t)
	cfg := loadConfig(t, fleetConfig("late", db, "", true, "job \"j\" {\n"+fastTimings+"}\n"))
	p, err := cfg.Providers[0].Settings.Open(context.Background(), hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	for i := range memberSlots {
		if _, err := p.Acquire(context.Background(), providers.AcquireRequest{Key: memberKey(i), Holder: fmt.Sprintf("other-%d#1", i), TTL: time.Minute}); err != nil {
			t.Fatal(err)
		}
	}
	p.Close()
	var log syncbuf.Buffer
	a := startAgent(t, cfg, func(o *Options) {
		o.Logger = hclog.New(&hclog.LoggerOptions{Level: hclog.Warn, Output: &log})
	})
	eventually(t, 10*time.Second, "the job leads and the full slots are logged", func() bool {
		return a.job("j").state == StateLeader && strings.Contains(log.String(), "every membership slot on the store is taken")
	})
	settle(t, 4, a) // a view follows each try for a slot: three more tries at least
	if n := strings.Count(log.String(), "every membership slot"); n != 1 {
		t.Errorf("the full slots were logged %d times, want once:\n%s", n, log.String())
	}
}

// An agent that begins to stop releases its membership record at once,
// while its children are still stopping, not after its jobs' releases:
// its write then does not fall between a job's release and the next
// leader's Acquire.
func TestMembershipLeftAsStopBegins(t *testing.T) {
	db := sqliteDB(t)
	dir := t.TempDir()
	cfg := loadConfig(t, fleetConfig("n1", db, "", true, fmt.Sprintf(`job "j" {
  ttl         = "10s"
  renew_every = "500ms"
  retry_every = "300ms"
  run {
    command      = ["sh", "-c", "trap 'touch %[1]s/stopping; while [ ! -e %[1]s/go ]; do sleep 0.05; done; exit 0' TERM; touch %[1]s/running; while :; do sleep 0.05; done"]
    stop_timeout = "8s"
  }
}
`, dir)))
	p, err := cfg.Providers[0].Settings.Open(context.Background(), hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	member := func() string {
		l, err := p.Observe(context.Background(), memberKey(0))
		if err != nil {
			t.Fatal(err)
		}
		return l.Holder
	}
	a := startAgent(t, cfg, quiet)
	eventually(t, 10*time.Second, "the job leads, its child has its trap set, and the agent holds a membership slot", func() bool {
		_, err := os.Stat(filepath.Join(dir, "running"))
		return a.job("j").state == StateLeader && err == nil && member() != ""
	})
	a.cancel()
	eventually(t, 10*time.Second, "the child's stop began", func() bool {
		_, err := os.Stat(filepath.Join(dir, "stopping"))
		return err == nil
	})
	// The child stops only once the test says so (or its 8 s stop_timeout
	// passes): the record is released meanwhile, while the job's lease is
	// still held.
	eventually(t, 6*time.Second, "the membership record released while the child still stops", func() bool {
		return member() == ""
	})
	if l, err := p.Observe(context.Background(), "j"); err != nil || l.Holder == "" {
		t.Fatalf("job j while its child stops: %+v, %v; want still held", l, err)
	}
	select {
	case err := <-a.done:
		t.Fatalf("the agent stopped while its child was still stopping: %v", err)
	default:
	}
	// The child's stop ends; the test's cleanup waits for the agent.
	if err := os.WriteFile(filepath.Join(dir, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
}
