package systest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/electd/electd/agent"
	"github.com/electd/electd/internal/cluster"
)

// Scheduled tasks as an operator watches them: three agents, one task job
// run now (electd trigger) as a control file says: it succeeds, fails,
// times out, and is killed by a step-down. Every agent shows each outcome
// (the slot record travels with the lease); the node that ran it fires
// on_task_failed / on_task_succeeded, exec and webhook, with the run's last
// lines and the configuration's secrets masked. Then triggers sent to a
// follower while the leader steps down or is killed run at most once each.
func TestTaskRunsSeenEverywhere(t *testing.T) {
	t.Parallel()
	p := cluster.MustProvider(t, "postgres")
	dir := t.TempDir()
	const secret = "tok-task-s3cret-4711" // the agents' api_token: a secret
	mode := filepath.Join(dir, "mode")
	setMode := func(m string) {
		if err := os.WriteFile(mode, []byte(m), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	setMode("ok")
	runs := filepath.Join(dir, "runs")   // "TRIGGER NODE" per run started
	hooks := filepath.Join(dir, "hooks") // "EVENT RESULT EXIT_CODE NODE TRIGGER" per hook

	var mu sync.Mutex
	var bodies []map[string]string
	hookSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var b map[string]string
		raw, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(raw, &b); err != nil {
			t.Errorf("webhook body %q: %v", raw, err)
		}
		mu.Lock()
		bodies = append(bodies, b)
		mu.Unlock()
	}))
	defer hookSrv.Close()

	job := fmt.Sprintf(`job "report" {
  ttl         = "3s"
  renew_every = "1s"
  retry_every = "500ms"
  task {
    schedule     = "@every 24h"
    command      = ["sh", "-c", <<-EOT
      echo "$ELECTD_TRIGGER $ELECTD_NODE" >> %[1]s
      case $(cat %[2]s) in
      ok)   echo "report written"; exit 0 ;;
      fail) echo "line one"; echo "cannot connect with %[3]s" >&2; exit 3 ;;
      hang) trap 'exit 143' TERM; sleep 600 & wait ;;
      esac
    EOT
    ]
    timeout      = "3s"
    stop_timeout = "500ms"
  }
  on_task_failed {
    exec { command = ["sh", "-c", "echo \"$ELECTD_EVENT $ELECTD_RESULT $ELECTD_EXIT_CODE $ELECTD_NODE $ELECTD_TRIGGER\" >> %[4]s"] }
    webhook { url = "%[5]s/failed" }
  }
  on_task_succeeded {
    exec { command = ["sh", "-c", "echo \"$ELECTD_EVENT $ELECTD_RESULT $ELECTD_EXIT_CODE $ELECTD_NODE $ELECTD_TRIGGER\" >> %[4]s"] }
  }
}
`, runs, mode, secret, hooks, hookSrv.URL)
	agentAttrs := []string{fmt.Sprintf("api_token = %q", secret)}
	nodes := map[string]*cluster.Agent{}
	var all []*cluster.Agent
	for _, n := range []string{"node-1", "node-2", "node-3"} {
		a := fleetNode(t, dir, p, n, agentAttrs, job)
		nodes[n] = a
		all = append(all, a)
	}
	report := func(a *cluster.Agent) (agent.JobStatus, bool) {
		for _, j := range jobsOf(t, a) {
			if j.Job == "report" {
				return j, true
			}
		}
		return agent.JobStatus{}, false
	}
	leader := func() *cluster.Agent {
		var l *cluster.Agent
		cluster.Until(20*time.Second, 100*time.Millisecond, func() bool {
			for _, a := range all {
				if a.Exited() {
					continue
				}
				if j, ok := report(a); ok && j.State == agent.StateLeader {
					l = a
					return true
				}
			}
			return false
		})
		if l == nil {
			t.Fatal("no agent leads the report")
		}
		return l
	}
	// follower is a running agent other than not whose API answers: one
	// still starting (the leader's API may be up before it) is waited for.
	follower := func(not *cluster.Agent) *cluster.Agent {
		var f *cluster.Agent
		cluster.Until(20*time.Second, 100*time.Millisecond, func() bool {
			for _, a := range all {
				if _, ok := report(a); ok && a != not && !a.Exited() {
					f = a
					return true
				}
			}
			return false
		})
		if f == nil {
			t.Fatal("no follower answers")
		}
		return f
	}
	// seenEverywhere waits until every running agent shows the run of
	// request n with result, and returns it as the first agent shows it.
	seenEverywhere := func(n uint64, result string) *agent.TaskRun {
		t.Helper()
		var last []string
		var run *agent.TaskRun
		ok := cluster.Until(20*time.Second, 100*time.Millisecond, func() bool {
			last, run = nil, nil
			for _, a := range all {
				if a.Exited() {
					continue
				}
				j, _ := report(a)
				if j.Task == nil || j.Task.LastRun == nil {
					last = append(last, a.Node+": no run")
					continue
				}
				r := j.Task.LastRun
				last = append(last, fmt.Sprintf("%s: trigger %d %s on %s", a.Node, r.Trigger, r.Result, r.Node))
				if r.Trigger != n || r.Result != result || j.Task.NextRun == nil {
					return false
				}
				if run == nil {
					run = r
				} else if run.Node != r.Node || run.Token != r.Token || !run.StartedAt.Equal(*r.StartedAt) {
					t.Fatalf("agents disagree on the run: %+v and %+v", run, r)
				}
			}
			return true
		})
		if !ok {
			t.Fatalf("request %d not shown as %s on every agent: %s", n, result, strings.Join(last, "; "))
		}
		return run
	}
	trigger := func(a *cluster.Agent, wait bool) (uint64, string, int) {
		t.Helper()
		args := []string{"trigger", "report", "-addr", a.API, "-token", secret}
		if wait {
			args = append(args, "-wait", "-timeout", "30s")
		}
		out, code := electdCLI(t, args...)
		var n uint64
		if _, err := fmt.Sscanf(out[strings.Index(out, "(request ")+len("(request "):], "%d", &n); err != nil {
			t.Fatalf("electd trigger printed %q (exit %d): no request number", out, code)
		}
		return n, out, code
	}

	l := leader()
	f := follower(l)

	// Succeeds: asked of a follower, run by the leader, -wait exits 0.
	n, out, code := trigger(f, true)
	if code != 0 || !strings.Contains(out, "succeeded on "+l.Node) {
		t.Fatalf("trigger -wait of a succeeding run: exit %d, %q", code, out)
	}
	r := seenEverywhere(n, agent.ResultSucceeded)
	if r.Node != l.Node || r.ExitCode == nil || *r.ExitCode != 0 || r.EndedAt == nil {
		t.Errorf("succeeded run %+v, want run by %s with exit code 0", r, l.Node)
	}
	if j, _ := report(f); j.Task.LastSuccessAt == nil || !j.Task.LastSuccessAt.Equal(*r.EndedAt) {
		t.Errorf("a follower's last_success_at %v, want the run's end %v", j.Task.LastSuccessAt, r.EndedAt)
	}

	// Fails: exit code 3 everywhere, -wait exits 3, on_task_failed fires.
	setMode("fail")
	n, out, code = trigger(f, true)
	if code != 3 || !strings.Contains(out, "failed") {
		t.Fatalf("trigger -wait of a failing run: exit %d, %q; want exit 3", code, out)
	}
	if r = seenEverywhere(n, agent.ResultFailed); r.ExitCode == nil || *r.ExitCode != 3 {
		t.Errorf("failed run %+v, want exit code 3", r)
	}

	// Times out: SIGTERM at 3s; its trap exits 143.
	setMode("hang")
	n, _, code = trigger(f, true)
	if code != 143 {
		t.Errorf("trigger -wait of a run that timed out: exit %d, want 143", code)
	}
	seenEverywhere(n, agent.ResultTimedOut)

	// Killed by a step-down, recorded with the release. The step-down comes
	// once the command has started: a leader shows the run as running while
	// its record is still on its way to the store, and a step-down then
	// leaves the request to the next leader (it never started here).
	n, _, _ = trigger(f, false)
	if !cluster.Until(10*time.Second, 50*time.Millisecond, func() bool {
		return slices.Contains(readLines(runs), fmt.Sprintf("%d %s", n, l.Node))
	}) {
		t.Fatalf("request %d did not start on %s: runs %q", n, l.Node, readLines(runs))
	}
	if out, code := electdCLI(t, "step-down", "report", "-addr", l.API, "-token", secret); code != 0 {
		t.Fatalf("step-down: exit %d: %s", code, out)
	}
	if r = seenEverywhere(n, agent.ResultKilled); r.Node != l.Node || !strings.Contains(r.Why, "released") {
		t.Errorf("killed run %+v, want run by %s, why naming the step-down", r, l.Node)
	}

	// The hooks fired once per run, on the node that ran it.
	want := []string{
		fmt.Sprintf("task_succeeded succeeded 0 %s", l.Node),
		fmt.Sprintf("task_failed failed 3 %s", l.Node),
		fmt.Sprintf("task_failed timed_out 143 %s", l.Node),
		fmt.Sprintf("task_failed killed 143 %s", l.Node),
	}
	var got []string
	cluster.Until(10*time.Second, 100*time.Millisecond, func() bool { got = readLines(hooks); return len(got) >= len(want) })
	if len(got) != len(want) {
		t.Errorf("hook runs %q, want %d", got, len(want))
	}
	for i := range min(len(got), len(want)) {
		if !strings.HasPrefix(got[i], want[i]+" ") {
			t.Errorf("hook run %d: %q, want %q and the request", i, got[i], want[i])
		}
	}
	cluster.Until(10*time.Second, 100*time.Millisecond, func() bool { mu.Lock(); defer mu.Unlock(); return len(bodies) >= 3 })
	mu.Lock()
	if len(bodies) != 3 {
		t.Errorf("%d webhook deliveries for the 3 failed runs", len(bodies))
	} else {
		b := bodies[0]
		if b["type"] != "task_failed" || b["result"] != "failed" || b["exit_code"] != "3" || b["job"] != "report" || b["slot"] == "" {
			t.Errorf("webhook body %v: want the failed run's fields", b)
		}
		if !strings.Contains(b["output"], "line one") || !strings.Contains(b["output"], "cannot connect with") {
			t.Errorf("webhook output %q: want the run's last lines", b["output"])
		}
		if strings.Contains(b["output"], secret) {
			t.Errorf("webhook output %q carries the api_token", b["output"])
		}
	}
	mu.Unlock()

	// Every agent tells the story: status columns, history, metrics.
	out, _ = electdCLI(t, "status", "-addr", f.API)
	row := tableRow(t, out, "report")
	if row["RESULT"] != "killed (143)" || !strings.HasSuffix(row["LAST RUN"], "on "+l.Node) || row["NEXT"] == "-" {
		t.Errorf("electd status on a follower: %v\n%s", row, out)
	}
	out, _ = electdCLI(t, "history", "report", "-addr", f.API)
	for _, w := range []string{"task_run", "succeeded", "failed (exit code 3)", "timed_out (exit code 143)", "killed (exit code 143): stopped: released"} {
		if !strings.Contains(out, w) {
			t.Errorf("electd history on a follower lacks %q:\n%s", w, out)
		}
	}
	ms := (&apiNode{Agent: f, t: t, addr: f.API}).metrics()
	if len(find(ms, "electd_task_last_success_timestamp_seconds", map[string]string{"job": "report"})) != 1 ||
		len(find(ms, "electd_task_next_run_timestamp_seconds", map[string]string{"job": "report"})) != 1 {
		t.Errorf("a follower's /metrics lacks the task's last success or next run")
	}
	// The last run was killed: not a success, on the follower too.
	if m := find(ms, "electd_task_last_run_succeeded", map[string]string{"job": "report"}); len(m) != 1 || m[0].value != 0 {
		t.Errorf("a follower's electd_task_last_run_succeeded{job=\"report\"}: %v, want 0 (the last run was killed)", m)
	}
	ms = (&apiNode{Agent: l, t: t, addr: l.API}).metrics()
	for _, res := range []string{"succeeded", "failed", "timed_out", "killed"} {
		if m := find(ms, "electd_task_runs_total", map[string]string{"job": "report", "result": res}); len(m) != 1 || m[0].value != 1 {
			t.Errorf("the leader's electd_task_runs_total{result=%q}: %v, want 1", res, m)
		}
	}

	// Triggers while the leader moves: each runs at most once. One taken
	// by a leader that is killed may be lost (at most once), and then shows
	// as killed; one whose leader steps down runs.
	setMode("ok")
	var requests []uint64
	mayBeLost := map[uint64]bool{}
	for i, how := range []string{"step-down", "kill", "step-down"} {
		l = leader()
		f = follower(l)
		n, _, _ := trigger(f, false)
		requests = append(requests, n)
		switch how {
		case "step-down":
			electdCLI(t, "step-down", "report", "-addr", l.API, "-token", secret)
		case "kill":
			l.Signal(syscall.SIGKILL)
			<-l.Done()
			mayBeLost[n] = true
		}
		var last *agent.TaskRun
		if !cluster.Until(30*time.Second, 100*time.Millisecond, func() bool {
			j, _ := report(f)
			if j.Task != nil {
				last = j.Task.LastRun
			}
			return last != nil && last.Trigger >= n && last.Result != agent.ResultRunning
		}) {
			t.Fatalf("request %d not ended after the %s of %s: last run %+v", n, how, l.Node, last)
		}
		if last.Result != agent.ResultSucceeded && !(mayBeLost[n] && last.Result == agent.ResultKilled && last.Node == l.Node) {
			t.Errorf("request %d after the %s of %s: %+v, want succeeded", n, how, l.Node, last)
		}
		t.Logf("move %d (%s of %s): request %d: %s on %s %s", i, how, l.Node, n, last.Result, last.Node, last.Why)
	}
	// A request run again would be run by the leader that took over, when
	// it first read the requests: before it ran the next request.
	count := map[string]int{}
	for _, line := range readLines(runs) {
		count[strings.Fields(line)[0]]++
	}
	for _, n := range requests {
		if c := count[fmt.Sprint(n)]; c > 1 || (c == 0 && !mayBeLost[n]) {
			t.Errorf("request %d ran %d times, want once (runs: %q)", n, c, readLines(runs))
		}
	}
}

func readLines(path string) []string {
	b, _ := os.ReadFile(path)
	var out []string
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if l != "" {
			out = append(out, l)
		}
	}
	return out
}
