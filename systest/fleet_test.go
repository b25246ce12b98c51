package systest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/electd/electd/agent"
	"github.com/electd/electd/internal/cluster"
	"github.com/electd/electd/internal/teststore"
)

// fleetStores are the stores the placement, health, balance and drain tests
// run on: the embedded default and a server.
var fleetStores = []string{"sqlite", "postgres"}

// fleetNode starts `electd run` for node with the agent attributes and jobs
// given, its API on a free port.
func fleetNode(t *testing.T, dir string, p cluster.Provider, node string, agentAttrs []string, jobs string) *cluster.Agent {
	t.Helper()
	port, err := teststore.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	listen := teststore.Addr(port)
	cfg := filepath.Join(dir, node+".hcl")
	if err := cluster.WriteConfig(cfg, cluster.AgentBlock(node, listen, agentAttrs...), p.Block, jobs); err != nil {
		t.Fatal(err)
	}
	a, err := cluster.StartProcess(cluster.Spec{Name: node, Argv: []string{binary, "run", "-config", cfg}, Dir: dir,
		Env: p.Env, LogPath: cluster.LogPath(dir, node), API: listen})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		a.Stop(15 * time.Second)
		if t.Failed() {
			t.Logf("%s's log:\n%s", node, a.Log())
		}
	})
	return a
}

func jobsOf(t *testing.T, a *cluster.Agent) []agent.JobStatus {
	t.Helper()
	var jobs []agent.JobStatus
	resp, err := http.Get(a.URL("/v1/jobs"))
	if err != nil {
		return nil // not up yet, or gone
	}
	defer resp.Body.Close()
	if json.NewDecoder(resp.Body).Decode(&jobs) != nil {
		return nil
	}
	return jobs
}

// leading is how many jobs each agent says it leads, and whether one term
// of a job (its fencing token) is claimed by two agents. The agents are
// asked one after the other, so two claims with different tokens are a
// handover between two questions, not an overlap (the fault suite's
// checker judges overlaps from the children's own records).
func leading(t *testing.T, agents []*cluster.Agent) (counts []int, twice string) {
	type term struct {
		job   string
		token uint64
	}
	seen := map[term]string{}
	for _, a := range agents {
		n := 0
		for _, j := range jobsOf(t, a) {
			if j.State != agent.StateLeader {
				continue
			}
			n++
			k := term{j.Job, j.Token}
			if other, ok := seen[k]; ok && twice == "" {
				twice = fmt.Sprintf("%s term %d claimed by %s and %s", j.Job, j.Token, other, a.Node)
			}
			seen[k] = a.Node
		}
		counts = append(counts, n)
	}
	return counts, twice
}

func electdCLI(t *testing.T, args ...string) (string, int) {
	t.Helper()
	out, err := exec.Command(binary, args...).CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return string(out), code
}

// 100 leadership-only jobs, 5 agents started a second apart: every agent
// comes to lead 20 ± 1 with no job led twice and no more handovers than
// jobs; SIGKILL one and the other four share its jobs (25 ± 1).
func TestBalanceAcrossAgents(t *testing.T) {
	t.Parallel()
	for _, name := range fleetStores {
		t.Run(name, func(t *testing.T) {
			p := cluster.MustProvider(t, name)
			dir := t.TempDir()
			const n, agents = 100, 5
			tm := cluster.Timing{TTL: 4 * time.Second, Renew: time.Second, Retry: 500 * time.Millisecond}
			var jobs strings.Builder
			for i := range n {
				jobs.WriteString(cluster.LeaseJob(fmt.Sprintf("job-%03d", i), tm))
			}
			var as []*cluster.Agent
			for i := range agents {
				as = append(as, fleetNode(t, dir, p, fmt.Sprintf("node-%d", i+1), nil, jobs.String()))
				time.Sleep(time.Second) // a deliberate stagger: agents that join one after another, as in a rollout
			}
			last := time.Now()
			spread := func(want int, of []*cluster.Agent) (bool, []int) {
				counts, twice := leading(t, of)
				if twice != "" {
					t.Fatalf("a job led twice at once: %s", twice)
				}
				total := 0
				ok := true
				for _, c := range counts {
					ok = ok && c >= want-1 && c <= want+1
					total += c
				}
				return ok && total == n, counts
			}
			var counts []int
			if !cluster.Until(30*time.Second, 200*time.Millisecond, func() (ok bool) { ok, counts = spread(n/agents, as); return ok }) {
				t.Fatalf("not 20 ± 1 each within 30 s of the last start: %v", counts)
			}
			converged := time.Since(last)
			moves := balancedMoves(t, as, n)
			t.Logf("%s: %d jobs on %d agents: %v within %s of the last start, %d handovers", name, n, agents, counts,
				converged.Round(100*time.Millisecond), moves)
			if moves > n {
				t.Errorf("%d handovers to spread %d jobs: want at most %d", moves, n, n)
			}
			as[agents-1].Kill()
			killed := time.Now()
			rest := as[:agents-1]
			if !cluster.Until(tm.TTL+15*time.Second, 200*time.Millisecond, func() (ok bool) { ok, counts = spread(n/(agents-1), rest); return ok }) {
				t.Fatalf("after a SIGKILL, not 25 ± 1 each within ttl + 15 s: %v", counts)
			}
			t.Logf("%s: after SIGKILL of one agent, %v within %s (ttl %s)", name, counts, time.Since(killed).Round(100*time.Millisecond), tm.TTL)

			// Back again: the spread returns, one handover at a time (no
			// burst: about the 20 jobs it needs, not a reshuffle).
			before := balancedMoves(t, rest, n)
			back := fleetNode(t, dir, p, "node-6", nil, jobs.String())
			restarted := time.Now()
			all := append(rest, back)
			if !cluster.Until(30*time.Second, 200*time.Millisecond, func() (ok bool) { ok, counts = spread(n/agents, all); return ok }) {
				t.Fatalf("after a fifth agent joined again, not 20 ± 1 each within 30 s: %v", counts)
			}
			moved := balancedMoves(t, rest, n) - before
			t.Logf("%s: a fifth agent joins again: %v within %s, %d handovers", name, counts, time.Since(restarted).Round(100*time.Millisecond), moved)
			if moved > 2*n/agents {
				t.Errorf("%d handovers to give a new agent its %d jobs: a burst", moved, n/agents)
			}
		})
	}
}

// jobHistory is job's history as agent a's API gives it.
func jobHistory(t *testing.T, a *cluster.Agent, job string) []agent.Transition {
	t.Helper()
	resp, err := http.Get(a.URL("/v1/jobs/" + job + "/history"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var hist []agent.Transition
	if err := json.NewDecoder(resp.Body).Decode(&hist); err != nil {
		t.Fatalf("history of %s: %v", job, err)
	}
	return hist
}

// balancedMoves counts the handovers for balance in the agents' histories
// of job-000 to job-(n-1).
func balancedMoves(t *testing.T, agents []*cluster.Agent, n int) int {
	t.Helper()
	moves := 0
	for _, a := range agents {
		for i := range n {
			for _, h := range jobHistory(t, a, fmt.Sprintf("job-%03d", i)) {
				if h.Type == "demoted" && h.Reason == agent.ReasonBalanced {
					moves++
				}
			}
		}
	}
	return moves
}

// One job, three agents: the preferred node leads once settled; a failing
// health check hands it over (reason unhealthy) and a passing one brings it
// back (preempted); a drain hands it over and a cancelled drain brings it
// back; `electd history` and `electd status` tell the story.
func TestHealthPreferDrain(t *testing.T) {
	t.Parallel()
	for _, name := range fleetStores {
		t.Run(name, func(t *testing.T) {
			p := cluster.MustProvider(t, name)
			dir := t.TempDir()
			job := func(node string) string {
				return fmt.Sprintf(`job "etl" {
  ttl           = "4s"
  renew_every   = "1s"
  retry_every   = "500ms"
  prefer        = { zone = "eu" }
  prefer_settle = "1s"
  health {
    command   = ["test", "-e", %q]
    interval  = "500ms"
    timeout   = "500ms"
    failures  = 2
    successes = 2
  }
}
`, filepath.Join(dir, node+".ok"))
			}
			healthy := func(node string, on bool) {
				if on {
					os.WriteFile(filepath.Join(dir, node+".ok"), nil, 0o644)
				} else {
					os.Remove(filepath.Join(dir, node+".ok"))
				}
			}
			for _, n := range []string{"us-1", "us-2", "eu-1"} {
				healthy(n, true)
			}
			us1 := fleetNode(t, dir, p, "us-1", []string{`tags = { zone = "us" }`}, job("us-1"))
			us2 := fleetNode(t, dir, p, "us-2", []string{`tags = { zone = "us" }`}, job("us-2"))
			eu := fleetNode(t, dir, p, "eu-1", []string{`tags = { zone = "eu" }`}, job("eu-1"))
			all := []*cluster.Agent{us1, us2, eu}
			leaderIs := func(want string) func() bool {
				return func() bool {
					counts, twice := leading(t, all)
					if twice != "" {
						t.Fatalf("led twice at once: %s", twice)
					}
					for i, a := range all {
						if (a.Node == want) != (counts[i] == 1) {
							return false
						}
					}
					return true
				}
			}
			if !cluster.Until(20*time.Second, 100*time.Millisecond, leaderIs("eu-1")) {
				t.Fatal("the preferred node does not lead")
			}

			healthy("eu-1", false)
			if !cluster.Until(15*time.Second, 100*time.Millisecond, func() bool { return !leaderIs("eu-1")() && (leaderIs("us-1")() || leaderIs("us-2")()) }) {
				t.Fatal("an unhealthy preferred leader kept the job")
			}
			healthy("eu-1", true)
			if !cluster.Until(15*time.Second, 100*time.Millisecond, leaderIs("eu-1")) {
				t.Fatal("the preferred node did not take the job back once healthy")
			}

			out, code := electdCLI(t, "drain", "-addr", eu.API, "-wait", "20s")
			if code != 0 || !strings.Contains(out, "drained") {
				t.Fatalf("electd drain: exit %d: %s", code, out)
			}
			if !cluster.Until(15*time.Second, 100*time.Millisecond, func() bool { return leaderIs("us-1")() || leaderIs("us-2")() }) {
				t.Fatal("nobody leads after the drain")
			}
			out, _ = electdCLI(t, "status", "-addr", eu.API)
			if !strings.Contains(out, "draining") {
				t.Errorf("electd status of a draining agent does not say so:\n%s", out)
			}
			out, code = electdCLI(t, "drain", "-cancel", "-addr", eu.API)
			if code != 0 {
				t.Fatalf("electd drain -cancel: exit %d: %s", code, out)
			}
			if !cluster.Until(15*time.Second, 100*time.Millisecond, leaderIs("eu-1")) {
				t.Fatal("the preferred node did not lead again after the drain ended")
			}

			out, code = electdCLI(t, "history", "-addr", eu.API, "etl")
			if code != 0 {
				t.Fatalf("electd history: exit %d: %s", code, out)
			}
			for _, reason := range []string{agent.ReasonElected, agent.ReasonUnhealthy, agent.ReasonDrained} {
				if !strings.Contains(out, reason) {
					t.Errorf("eu-1's history does not say %q:\n%s", reason, out)
				}
			}
			var preempted bool
			for _, a := range []*cluster.Agent{us1, us2} {
				out, _ := electdCLI(t, "history", "-json", "-addr", a.API, "etl")
				preempted = preempted || strings.Contains(out, `"reason": "preempted"`)
			}
			if !preempted {
				t.Error("no us node's history says it was preempted")
			}
			// A clean stop leaves no lease behind: the others take over at once.
			eu.Signal(syscall.SIGTERM)
			if !cluster.Until(10*time.Second, 100*time.Millisecond, func() bool {
				c, _ := leading(t, []*cluster.Agent{us1, us2})
				return c[0]+c[1] == 1
			}) {
				t.Error("no us node took over after the preferred node stopped")
			}
		})
	}
}
