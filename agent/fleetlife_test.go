package agent

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/electd/electd/config"
	"github.com/electd/electd/internal/syncbuf"
	"github.com/hashicorp/go-hclog"
)

// The fleet's ordinary life, on three agents and on SQLite and PostgreSQL
// alike: a rollout of jobs one node at a time, a one-line reload of a
// preferred job, a drain with and without another agent that can take the
// jobs. Each test asserts the fewest moves the scenario needs. A period in
// which nothing may move is one defined by events: a number of membership
// views taken by every agent (each view is a balance decision).

// lifeSlots is how many fleet tests run at once: each runs three agents
// that mostly wait for membership views, so two at a time halve the
// package's time without loading the machine enough to slow the views.
var lifeSlots = make(chan struct{}, 2)

// lifeStores runs f on each store the fleet tests use, with its provider
// block: a SQLite file of the test's own, or a table of the test's own on
// the machine's PostgreSQL ($ELECTD_TEST_POSTGRES_DSN). The test runs in
// parallel with the other fleet tests, two at a time.
func lifeStores(t *testing.T, f func(t *testing.T, provider string)) {
	t.Parallel()
	lifeSlots <- struct{}{}
	defer func() { <-lifeSlots }()
	for _, name := range []string{"sqlite", "postgres"} {
		t.Run(name, func(t *testing.T) {
			var block string
			switch name {
			case "sqlite":
				block = fmt.Sprintf("provider \"sql\" \"s\" {\n  driver = \"sqlite\"\n  dsn    = %q\n}\n", sqliteDB(t))
			case "postgres":
				dsn := os.Getenv("ELECTD_TEST_POSTGRES_DSN")
				if dsn == "" {
					dsn = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
				}
				table := fmt.Sprintf("electd_t_life_%d", time.Now().UnixNano()%1_000_000_000)
				block = fmt.Sprintf("provider \"sql\" \"s\" {\n  driver = \"postgres\"\n  dsn    = %q\n  table  = %q\n}\n", dsn, table)
			}
			f(t, block)
		})
	}
}

// logged keeps an agent's log at info level, shown only when the test
// fails: the handovers and elections that a move count is made of.
func logged(t *testing.T, node string) agentOpt {
	return func(o *Options) {
		buf := &syncbuf.Buffer{}
		o.Logger = hclog.New(&hclog.LoggerOptions{Name: node, Level: hclog.Info, Output: buf})
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("log of %s:\n%s", node, buf.String())
			}
		})
	}
}

// lifeConfig is a balancing agent on provider with tags and jobs.
func lifeConfig(node, provider, tags, jobs string) string {
	return fleetAgent(node, tags, true) + provider + "\n" + jobs
}

// lifeJobs are leadership-only jobs with the fast timings.
func lifeJobs(names ...string) string {
	var b strings.Builder
	for _, n := range names {
		fmt.Fprintf(&b, "job %q {\n%s}\n", n, fastTimings)
	}
	return b.String()
}

func names(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%02d", prefix, i)
	}
	return out
}

// settle waits until every agent has taken n more membership views.
func settle(t *testing.T, n int64, agents ...*testAgent) {
	t.Helper()
	start := make([]int64, len(agents))
	for i, a := range agents {
		start[i] = a.fleet.views.Load()
	}
	eventually(t, time.Duration(n)*10*time.Second, fmt.Sprintf("%d membership views on every agent", n), func() bool {
		for i, a := range agents {
			if a.fleet.views.Load() < start[i]+n {
				return false
			}
		}
		return true
	})
}

// terms counts each job's terms (elections) in the agents' histories.
func terms(jobs []string, agents ...*testAgent) map[string]int {
	out := map[string]int{}
	for _, a := range agents {
		for _, j := range jobs {
			h, _ := a.History(j)
			for _, tr := range h {
				if tr.Type == config.EventElected {
					out[j]++
				}
			}
		}
	}
	return out
}

// movesSince is how many terms each job began since before, and in all.
func movesSince(before, now map[string]int) (map[string]int, int) {
	out, total := map[string]int{}, 0
	for j, n := range now {
		if d := n - before[j]; d > 0 {
			out[j] = d
			total += d
		}
	}
	return out, total
}

// fewest is the fewest moves from the loads before to the loads after: a
// job leaves each agent that leads fewer.
func fewest(before, after []int) int {
	n := 0
	for i := range before {
		n += max(0, before[i]-after[i])
	}
	return n
}

func reload(t *testing.T, a *testAgent, src string) Plan {
	t.Helper()
	p, err := a.Reload(t.Context(), loadConfig(t, src))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// A new job rolled out one node at a time never leaves the node that has
// it for one that has not (the flapping of issue #27), and the rollout
// moves no job more than once: here exactly one move, the one the spread
// needs once a second agent has the new jobs.
func TestLifeRolloutOfANewJob(t *testing.T) {
	lifeStores(t, func(t *testing.T, provider string) {
		base := names("base", 6)
		added := []string{"new0", "new1"}
		all := append(slices.Clone(base), added...)
		var agents []*testAgent
		for _, n := range []string{"a", "b", "c"} {
			agents = append(agents, startAgent(t, loadConfig(t, lifeConfig(n, provider, "", lifeJobs(base...))), logged(t, n)))
		}
		eventually(t, 30*time.Second, "2 jobs each", func() bool { return slices.Equal(leaders(agents...), []int{2, 2, 2}) })
		settle(t, 3, agents...)
		start := terms(all, agents...)

		withNew := lifeJobs(all...)
		for i, a := range agents {
			before := leaders(agents...)
			p := reload(t, a, lifeConfig(a.fleet.node, provider, "", withNew))
			if !slices.Equal(p.Added, added) || len(p.Restarted)+len(p.Updated) != 0 {
				t.Fatalf("reload of %s: %+v", a.fleet.node, p)
			}
			if i == 0 {
				eventually(t, 10*time.Second, "a leads the new jobs", func() bool {
					return statusOf(a, "new0").State == StateLeader && statusOf(a, "new1").State == StateLeader
				})
				for _, j := range added {
					start[j] = 1 // their first terms, on a, are no moves
				}
			}
			settle(t, 4, agents...)
			noJobLedTwice(t, agents...)
			t.Logf("after the reload of %s: %v (before %v)", a.fleet.node, leaders(agents...), before)
			if i == 0 {
				// Nobody else has the new jobs: a keeps them.
				if _, n := movesSince(start, terms(all, agents...)); n != 0 {
					t.Errorf("%d moves while only a had the new jobs; want none", n)
				}
			}
		}
		moved, total := movesSince(start, terms(all, agents...))
		t.Logf("rollout of 2 jobs over 3 agents holding 6: %d moves %v, leaders %v", total, moved, leaders(agents...))
		for j, n := range moved {
			if n > 1 {
				t.Errorf("job %s moved %d times in the rollout; want at most once", j, n)
			}
		}
		if total != 1 {
			t.Errorf("%d moves in the rollout; the spread needs exactly one (a's third job, once b has the new ones)", total)
		}
		if got := leaders(agents...); slices.Max(got)-slices.Min(got) > 1 {
			t.Errorf("not spread after the rollout: %v", got)
		}
	})
}

// 30 jobs rolled out over 3 agents one node at a time: each step moves the
// fewest jobs its spread needs, and none twice.
func TestLifeRolloutOf30Jobs(t *testing.T) {
	lifeStores(t, func(t *testing.T, provider string) {
		jobs := names("r", 30)
		var agents []*testAgent
		for _, n := range []string{"a", "b", "c"} {
			agents = append(agents, startAgent(t, loadConfig(t, lifeConfig(n, provider, "", "")), logged(t, n)))
		}
		all := lifeJobs(jobs...)
		grand := 0
		for i, a := range agents {
			before := leaders(agents...)
			start := terms(jobs, agents...)
			reload(t, a, lifeConfig(a.fleet.node, provider, "", all))
			eventually(t, 30*time.Second, "every job led", func() bool {
				sum := 0
				for _, n := range leaders(agents...) {
					sum += n
				}
				return sum == len(jobs)
			})
			// Spread over the agents that have the jobs, within one.
			eventually(t, 60*time.Second, "spread", func() bool {
				got := leaders(agents[:i+1]...)
				return slices.Max(got)-slices.Min(got) <= 1
			})
			settle(t, 4, agents[:i+1]...) // the others are on no store yet
			noJobLedTwice(t, agents...)
			after := leaders(agents...)
			moved, total := movesSince(start, terms(jobs, agents...))
			if i == 0 {
				total -= len(jobs) // the first terms of the new jobs
				for j := range moved {
					moved[j]--
				}
			}
			grand += total
			t.Logf("reload of %s: %v → %v, %d moves (fewest %d)", a.fleet.node, before, after, total, fewest(before, after))
			if total != fewest(before, after) {
				t.Errorf("reload of %s: %d moves from %v to %v; the fewest is %d", a.fleet.node, total, before, after, fewest(before, after))
			}
			for j, n := range moved {
				if n > 1 {
					t.Errorf("reload of %s: job %s moved %d times", a.fleet.node, j, n)
				}
			}
		}
		t.Logf("rollout of 30 jobs over 3 agents: %d moves in all", grand)
		if grand != 25 {
			t.Errorf("%d moves in all; the fewest is 25 (15 to the second agent, then 5 from each to the third)", grand)
		}
	})
}

// A one-line reload of a preferred job's run.stop_timeout on the preferred
// node keeps its command running there: same token, no step-down, no other
// node leads meanwhile; the plan says it is applied in place.
func TestLifeReloadOfAPreferredJob(t *testing.T) {
	lifeStores(t, func(t *testing.T, provider string) {
		dir := t.TempDir()
		job := func(stop string) string {
			return fmt.Sprintf(`job "queue" {
  prefer        = { zone = "eu" }
  prefer_settle = "1s"
%s  run {
    command      = ["sh", "-c", "echo \"$$ $ELECTD_TOKEN\" > %s/queue-$ELECTD_NODE.pid; exec sleep 600"]
    stop_timeout = %q
  }
}
`, fastTimings, dir, stop)
		}
		zones := map[string]string{"eu-1": "eu", "us-1": "us", "us-2": "us"}
		var agents []*testAgent
		for _, n := range []string{"us-1", "us-2", "eu-1"} {
			agents = append(agents, startAgent(t, loadConfig(t, lifeConfig(n, provider, fmt.Sprintf("zone = %q", zones[n]), job("1s"))), logged(t, n)))
		}
		eu := agents[2]
		eventually(t, 30*time.Second, "eu-1 leads", func() bool { return statusOf(eu, "queue").State == StateLeader })
		settle(t, 3, agents...)
		st := statusOf(eu, "queue")
		pid, tok := readPidToken(t, dir+"/queue-eu-1.pid")
		start := terms([]string{"queue"}, agents...)

		for _, a := range []*testAgent{eu, agents[0], agents[1]} {
			src := lifeConfig(a.fleet.node, provider, fmt.Sprintf("zone = %q", zones[a.fleet.node]), job("1500ms"))
			want := Plan{Updated: []Change{{Job: "queue", Attributes: []string{"run.stop_timeout"}}}}
			if p := a.Plan(loadConfig(t, src)); !planEqual(p, want) {
				t.Errorf("plan on %s: %+v, want %+v", a.fleet.node, p, want)
			}
			reload(t, a, src)
			settle(t, 3, agents...)
		}
		if _, n := movesSince(start, terms([]string{"queue"}, agents...)); n != 0 {
			t.Errorf("%d moves for a reload of run.stop_timeout; want none", n)
		}
		now := statusOf(eu, "queue")
		if now.State != StateLeader || now.Token != st.Token || tok != st.Token {
			t.Errorf("eu-1 after the reload: %+v, want leader with token %d", now, st.Token)
		}
		if p, tk := readPidToken(t, dir+"/queue-eu-1.pid"); p != pid || tk != tok || !pidAlive(pid) {
			t.Errorf("eu-1's command after the reload: pid %d token %d, want pid %d (alive) token %d", p, tk, pid, tok)
		}
		if got := reasons(eu, "queue", "demoted"); len(got) != 0 {
			t.Errorf("eu-1 stepped down: %v", got)
		}
	})
}

func planEqual(p, want Plan) bool {
	return fmt.Sprintf("%+v", p) == fmt.Sprintf("%+v", want)
}

// A drain hands each job over to an agent that can lead it: one move per
// job it led, none for the others. A job that no other agent can lead
// stays, the drain says so, and it stays over a period of membership views;
// forced, it goes.
func TestLifeDrain(t *testing.T) {
	lifeStores(t, func(t *testing.T, provider string) {
		jobs := names("d", 6)
		solo := `job "solo" {
  constraint = { node = "a" }
` + fastTimings + `}
`
		var agents []*testAgent
		for _, n := range []string{"a", "b", "c"} {
			agents = append(agents, startAgent(t, loadConfig(t, lifeConfig(n, provider, "", lifeJobs(jobs...)+solo)), logged(t, n)))
		}
		a := agents[0]
		eventually(t, 30*time.Second, "spread, a leads solo", func() bool {
			got := leaders(agents...)
			return statusOf(a, "solo").State == StateLeader && got[0] >= 2 && got[1] >= 2 && got[2] >= 2
		})
		settle(t, 3, agents...)
		all := append(slices.Clone(jobs), "solo")
		start := terms(all, agents...)
		var led []string
		for _, j := range a.Jobs() {
			if j.State == StateLeader && j.Job != "solo" {
				led = append(led, j.Job)
			}
		}
		soloTok := statusOf(a, "solo").Token

		rep := a.Drain(true, false)
		t.Logf("drain: %+v", rep)
		if len(rep) != len(led)+1 {
			t.Fatalf("drain reported %d jobs; a led %d", len(rep), len(led)+1)
		}
		for _, d := range rep {
			switch {
			case d.Job == "solo" && (!d.Kept || len(d.Takers) > 0):
				t.Errorf("solo, which only a can lead: %+v, want kept", d)
			case d.Job != "solo" && (d.Kept || len(d.Takers) == 0 || slices.Contains(d.Takers, "a")):
				// b or c may hold a job off for a ttl after a balance move.
				t.Errorf("%s: %+v, want handed over with b or c as takers", d.Job, d)
			}
		}
		eventually(t, 30*time.Second, "b and c lead a's jobs", func() bool {
			for _, j := range led {
				if s := statusOf(a, j); s.State == StateLeader || s.State == StateStopping || s.Leader == "" || s.Leader == "a" {
					return false
				}
			}
			return true
		})
		settle(t, 4, agents...)
		noJobLedTwice(t, agents...)
		moved, total := movesSince(start, terms(all, agents...))
		t.Logf("drain of a leading %d jobs (and solo): %d moves %v", len(led), total, moved)
		if total != len(led) {
			t.Errorf("%d moves to drain %d jobs; want exactly one each", total, len(led))
		}
		if s := statusOf(a, "solo"); s.State != StateLeader || s.Token != soloTok || s.Waiting != drainKeptWhy {
			t.Errorf("solo on the draining a: %+v, want still leading with token %d and why", s, soloTok)
		}
		if !a.Info().Draining {
			t.Error("a does not say it drains")
		}

		rep = a.Drain(true, true)
		if len(rep) != 1 || rep[0].Job != "solo" || !rep[0].Forced {
			t.Errorf("forced drain: %+v, want solo given up", rep)
		}
		eventually(t, 10*time.Second, "solo released", func() bool { return len(reasons(a, "solo", "demoted")) > 0 })
		if got := reasons(a, "solo", "demoted"); !slices.Equal(got, []string{ReasonDrained}) {
			t.Errorf("solo demoted for %v, want [drained]", got)
		}
	})
}

// The scenario of issue #27: the only other agent that has the job holds
// it off after a step-down when the drain comes. The drain keeps the job
// (no leaderless gap) while the other holds it off, then hands it over
// once it can: one move.
func TestLifeDrainWaitsForAHoldOff(t *testing.T) {
	lifeStores(t, func(t *testing.T, provider string) {
		job := `job "x" {
  ttl         = "8s"
  renew_every = "500ms"
  retry_every = "300ms"
}
`
		a := startAgent(t, loadConfig(t, lifeConfig("a", provider, "", job)), logged(t, "a"))
		eventually(t, 10*time.Second, "a leads", func() bool { return statusOf(a, "x").State == StateLeader })
		b := startAgent(t, loadConfig(t, lifeConfig("b", provider, "", job)), logged(t, "b"))
		settle(t, 2, a, b)
		// b leads, then steps down: it holds x off for a ttl, and a leads.
		if err := a.StepDown(t.Context(), "x"); err != nil {
			t.Fatal(err)
		}
		eventually(t, 10*time.Second, "b leads", func() bool { return statusOf(b, "x").State == StateLeader })
		eventually(t, 20*time.Second, "a's hold-off over", func() bool { return statusOf(a, "x").Competing })
		if err := b.StepDown(t.Context(), "x"); err != nil {
			t.Fatal(err)
		}
		eventually(t, 10*time.Second, "a leads again", func() bool { return statusOf(a, "x").State == StateLeader })
		start := terms([]string{"x"}, a, b)
		tok := statusOf(a, "x").Token

		t.Logf("drain: %+v", a.Drain(true, false))
		eventually(t, 10*time.Second, "a keeps x while b holds it off", func() bool {
			s := statusOf(a, "x")
			if s.State != StateLeader || s.Token != tok {
				t.Fatalf("a let x go while b held it off: %+v", s)
			}
			return s.Waiting == drainKeptWhy
		})
		eventually(t, 20*time.Second, "b leads x once its hold-off is over", func() bool { return statusOf(b, "x").State == StateLeader })
		settle(t, 2, a, b)
		if _, n := movesSince(start, terms([]string{"x"}, a, b)); n != 1 {
			t.Errorf("%d moves for the drain; want one", n)
		}
	})
}

// leaderOf is the agent that leads job, nil when none does.
func leaderOf(job string, agents ...*testAgent) *testAgent {
	for _, a := range agents {
		if statusOf(a, job).State == StateLeader {
			return a
		}
	}
	return nil
}

// Removing a job, then changing another's placement, one node at a time
// with the leader last (operations.md): the removed job never moves and
// ends when its leader is reloaded; the placed job moves once, to the node
// its constraint names; nothing else moves.
func TestLifeRolloutOfARemovalAndAPlacement(t *testing.T) {
	lifeStores(t, func(t *testing.T, provider string) {
		jobs := names("p", 6)
		var agents []*testAgent
		for _, n := range []string{"a", "b", "c"} {
			agents = append(agents, startAgent(t, loadConfig(t, lifeConfig(n, provider, "", lifeJobs(jobs...))), logged(t, n)))
		}
		eventually(t, 30*time.Second, "2 jobs each", func() bool { return slices.Equal(leaders(agents...), []int{2, 2, 2}) })
		settle(t, 3, agents...)
		leaderLast := func(job string) []*testAgent {
			l := leaderOf(job, agents...)
			if l == nil {
				t.Fatalf("nobody leads %s", job)
			}
			var order []*testAgent
			for _, a := range agents {
				if a != l {
					order = append(order, a)
				}
			}
			return append(order, l)
		}

		gone, kept := jobs[0], jobs[1:]
		start := terms(jobs, agents...)
		for _, a := range leaderLast(gone) {
			p := reload(t, a, lifeConfig(a.fleet.node, provider, "", lifeJobs(kept...)))
			if !slices.Equal(p.Removed, []string{gone}) || len(p.Added)+len(p.Restarted)+len(p.Updated) != 0 {
				t.Fatalf("reload of %s without %s: %+v", a.fleet.node, gone, p)
			}
			settle(t, 3, agents...)
			noJobLedTwice(t, agents...)
		}
		if moved, n := movesSince(start, terms(jobs, agents...)); n != 0 {
			t.Errorf("removing %s, leader last: %d moves %v; want none", gone, n, moved)
		}
		if l := leaderOf(gone, agents...); l != nil {
			t.Errorf("%s is removed everywhere, and %s still leads it", gone, l.fleet.node)
		}

		placed := kept[0]
		from := leaderOf(placed, agents...)
		to := agents[0]
		if to == from {
			to = agents[1]
		}
		withConstraint := strings.Replace(lifeJobs(kept...), fmt.Sprintf("job %q {\n", placed),
			fmt.Sprintf("job %q {\n  constraint = { node = %q }\n", placed, to.fleet.node), 1)
		start = terms(kept, agents...)
		for _, a := range leaderLast(placed) {
			src := lifeConfig(a.fleet.node, provider, "", withConstraint)
			want := Plan{Updated: []Change{{Job: placed, Attributes: []string{"constraint"}}}, Kept: kept[1:]}
			if p := reload(t, a, src); !planEqual(p, want) {
				t.Fatalf("reload of %s: %+v, want %+v", a.fleet.node, p, want)
			}
			settle(t, 3, agents...)
			noJobLedTwice(t, agents...)
		}
		eventually(t, 10*time.Second, placed+" led by "+to.fleet.node, func() bool { return statusOf(to, placed).State == StateLeader })
		settle(t, 3, agents...)
		moved, n := movesSince(start, terms(kept, agents...))
		if n != 1 || moved[placed] != 1 {
			t.Errorf("placing %s on %s (it was on %s), leader last: %d moves %v; want one, of %s", placed, to.fleet.node, from.fleet.node, n, moved, placed)
		}
	})
}
