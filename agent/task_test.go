package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/electd/electd/config"
	"github.com/electd/electd/providers"
	sqlprovider "github.com/electd/electd/providers/sql"
)

func TestSlots(t *testing.T) {
	every, err := config.ParseSchedule("@every 10s")
	if err != nil {
		t.Fatal(err)
	}
	at := func(s int64) time.Time { return time.Unix(s, 0) }
	if got := nextSlot(every, at(1_000_003)); !got.Equal(at(1_000_010)) {
		t.Errorf("@every 10s after 1000003 = %d, want 1000010 (aligned, the same on every node)", got.Unix())
	}
	if got := nextSlot(every, at(1_000_010)); !got.Equal(at(1_000_020)) {
		t.Errorf("@every 10s after 1000010 = %d, want 1000020", got.Unix())
	}
	for _, tc := range []struct {
		name      string
		last, now int64
		want      int64
	}{
		{"no slot ever run: no catch-up", 0, 1_000_055, 0},
		{"nothing missed", 1_000_050, 1_000_055, 0},
		{"one missed", 1_000_040, 1_000_055, 1_000_050},
		{"several missed: only the latest runs", 1_000_000, 1_000_055, 1_000_050},
		{"a slot due right now counts as missed", 1_000_040, 1_000_050, 1_000_050},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var last time.Time
			if tc.last != 0 {
				last = at(tc.last)
			}
			got := latestSlot(every, last, at(tc.now))
			if tc.want == 0 && !got.IsZero() || tc.want != 0 && got.Unix() != tc.want {
				t.Errorf("latestSlot = %v, want %d", got, tc.want)
			}
		})
	}
	if got := lastSlot(formatSlot(at(1_000_050))); !got.Equal(at(1_000_050)) {
		t.Errorf("slot value round trip: %v", got)
	}
	if !lastSlot("garbage").IsZero() || !lastSlot("").IsZero() {
		t.Error("a value that is not a slot must read as none")
	}
}

// taskJob is a task every second that appends its slot, node and token.
func taskJob(mode, out string) string {
	return fmt.Sprintf(`
job "tick" {
  mode = %q
%s
  task {
    schedule     = "@every 1s"
    command      = ["sh", "-c", "echo \"$ELECTD_SLOT $ELECTD_NODE $ELECTD_TOKEN\" >> %s"]
    timeout      = "5s"
    stop_timeout = "1s"
  }
}`, mode, quick, out)
}

// checkSlots fails when a slot ran twice, and returns how many ran.
func checkSlots(t *testing.T, out string) map[string]string {
	t.Helper()
	seen := map[string]string{}
	for _, l := range lines(t, out) {
		f := strings.Fields(l)
		if len(f) != 3 {
			t.Fatalf("bad line %q", l)
		}
		if prev, dup := seen[f[0]]; dup {
			t.Errorf("slot %s ran twice: by %s and by %s", f[0], prev, f[1]+" "+f[2])
		}
		seen[f[0]] = f[1] + " " + f[2]
	}
	return seen
}

// Three agents on one store: each slot runs exactly once across them, in
// both modes.
func TestTaskOncePerSlot(t *testing.T) {
	for _, mode := range []string{config.ModeLeader, config.ModeLock} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			db, out := sqliteDB(t), filepath.Join(t.TempDir(), "slots")
			var agents []*testAgent
			for i := 1; i <= 3; i++ {
				agents = append(agents, startAgent(t, loadConfig(t, agentConfig(fmt.Sprintf("node-%d", i), db, taskJob(mode, out)))))
			}
			// Five slots, each a chance for two agents to run one; the
			// agents stop after, and no slot ran twice meanwhile.
			eventually(t, 30*time.Second, "five slots ran", func() bool {
				slots := map[string]bool{}
				for _, l := range lines(t, out) {
					slots[strings.Fields(l)[0]] = true
				}
				return len(slots) >= 5
			})
			for _, a := range agents {
				a.stop(t)
			}
			seen := checkSlots(t, out)
			if len(seen) < 5 {
				t.Errorf("%d slots ran, want at least 5: %v", len(seen), lines(t, out))
			}
			nodes := map[string]bool{}
			for _, v := range seen {
				nodes[strings.Fields(v)[0]] = true
			}
			t.Logf("%d slots ran, on %d node(s)", len(seen), len(nodes))
		})
	}
}

// A leader that dies just before a slot does not lose it: the next leader
// runs the missed slot once, and a later leader does not run it again.
func TestMissedSlotRunsOnce(t *testing.T) {
	db, out := sqliteDB(t), filepath.Join(t.TempDir(), "slots")
	// The previous leader ran the slot two hours ago and died.
	p, err := sqlprovider.New(context.Background(), sqlprovider.Settings{Driver: "sqlite", DSN: db}, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	l, err := p.Acquire(context.Background(), providers.AcquireRequest{Key: "hourly", Holder: "old-node", TTL: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	hour := time.Now().Truncate(time.Hour)
	l.Value = formatSlot(hour.Add(-2 * time.Hour))
	if err := p.Release(context.Background(), l); err != nil {
		t.Fatal(err)
	}
	job := fmt.Sprintf(`
job "hourly" {
%s
  task {
    schedule     = "@every 1h"
    command      = ["sh", "-c", "echo \"$ELECTD_SLOT $ELECTD_NODE $ELECTD_TOKEN\" >> %s"]
    stop_timeout = "1s"
  }
}`, quick, out)
	a := startAgent(t, loadConfig(t, agentConfig("node-1", db, job)))
	eventually(t, 10*time.Second, "the missed slot runs", func() bool { return len(lines(t, out)) == 1 })
	a.stop(t)
	b := startAgent(t, loadConfig(t, agentConfig("node-2", db, job)))
	eventually(t, 10*time.Second, "node-2 leads", func() bool { return b.job("hourly").state == "leader" })
	// node-2 took over node-1's record, and renewed its lease twice since:
	// a run it decided on would have been recorded with the first.
	eventually(t, 10*time.Second, "node-2 shows node-1's run", func() bool {
		for _, j := range b.Jobs() {
			if j.Task != nil && j.Task.LastRun != nil && j.Task.LastRun.Node == "node-1" && j.Task.LastRun.Slot.Equal(hour) {
				return true
			}
		}
		return false
	})
	turns(t, 2, b, "hourly")
	for _, j := range b.Jobs() {
		if r := j.Task.LastRun; r == nil || r.Node != "node-1" || !r.Slot.Equal(hour) {
			t.Errorf("node-2's last run %+v, want node-1's of %s", r, hour)
		}
	}
	b.stop(t)
	got := lines(t, out)
	want := hour.UTC().Format(time.RFC3339) + " node-1 2"
	if len(got) != 1 || got[0] != want {
		t.Errorf("runs %q, want exactly [%q]: only the latest missed slot, once", got, want)
	}
}

// A node that wins the lock for a slot another node already ran (its clock
// or its store answer was late) does not run it again.
func TestRecordedSlotNotRepeated(t *testing.T) {
	db, out := sqliteDB(t), filepath.Join(t.TempDir(), "slots")
	p, err := sqlprovider.New(context.Background(), sqlprovider.Settings{Driver: "sqlite", DSN: db}, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	l, err := p.Acquire(context.Background(), providers.AcquireRequest{Key: "tick", Holder: "other-node", TTL: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	// The other node has already run every slot up to 3s from now.
	ranUpTo := time.Now().Truncate(time.Second).Add(3 * time.Second)
	l.Value = formatSlot(ranUpTo)
	if err := p.Release(context.Background(), l); err != nil {
		t.Fatal(err)
	}
	a := startAgent(t, loadConfig(t, agentConfig("node-1", db, taskJob(config.ModeLock, out))))
	eventually(t, 10*time.Second, "a later slot runs", func() bool { return len(lines(t, out)) >= 1 })
	a.stop(t)
	for slot := range checkSlots(t, out) {
		s, err := time.Parse(time.RFC3339, slot)
		if err != nil {
			t.Fatal(err)
		}
		if !s.After(ranUpTo) {
			t.Errorf("slot %s ran again, though slots up to %s were recorded as run", slot, ranUpTo.UTC().Format(time.RFC3339))
		}
	}
}

// A task past its timeout gets its stop signal, then SIGKILL to its whole
// group after stop_timeout; an exec hook past its timeout is killed too.
// Neither holds up the job: the next slot still runs.
func TestTimeoutsKillGroups(t *testing.T) {
	db, dir := sqliteDB(t), t.TempDir()
	a := startAgent(t, loadConfig(t, agentConfig("node-1", db, fmt.Sprintf(`
job "slow" {
%s
  task {
    schedule     = "@every 1s"
    command      = ["sh", "-c", "trap '' TERM; sh -c 'trap \"\" TERM; echo $$ >> %[2]s/task-grandchildren; sleep 600' & wait"]
    timeout      = "300ms"
    stop_timeout = "200ms"
  }
  on_elected {
    exec {
      command = ["sh", "-c", "sleep 600 & echo $! > %[2]s/hook-grandchild; wait"]
      timeout = "300ms"
    }
  }
}`, quick, dir))))
	_ = a
	var hookGC int
	eventually(t, 10*time.Second, "the hook's grandchild started", func() bool {
		ls := lines(t, dir+"/hook-grandchild")
		if len(ls) == 1 {
			hookGC, _ = strconv.Atoi(ls[0])
		}
		return hookGC > 0
	})
	eventually(t, 10*time.Second, "the hook's group killed at its timeout", func() bool { return !pidAlive(hookGC) })
	eventually(t, 15*time.Second, "three task runs", func() bool { return len(lines(t, dir+"/task-grandchildren")) >= 3 })
	runs := lines(t, dir+"/task-grandchildren")
	for _, l := range runs[:len(runs)-1] { // the newest may still be running
		// Each run is killed 300ms + 200ms after it starts.
		if pid, _ := strconv.Atoi(l); pid > 0 && pidAlive(pid) {
			t.Errorf("grandchild %d of a timed-out task still runs", pid)
		}
	}
}

// taskTimingJob runs a task job's loop on a fake clock over a real SQLite
// store. Its term is long enough that no renewal falls within a test: the
// clock moves only through the task's own timers.
func taskTimingJob(t *testing.T, task *config.Task) (*job, *faulty, *fakeClock) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return fakeClockJob(t, config.Job{Name: "spread", Provider: "sql.s", Mode: config.ModeLeader,
		TTL: 10 * time.Minute, RenewEvery: 5 * time.Minute, RetryEvery: time.Minute, Task: task}, Options{Shim: self}, nil)
}

// untilRenewal reads the calls until a renewal whose record satisfies ok.
func untilRenewal(t *testing.T, f *faulty, what string, ok func(slotRecord) bool) call {
	t.Helper()
	for {
		c := f.nextCall(t)
		if c.op == "renew" && c.err == nil && ok(parseRecord(c.value)) {
			return c
		}
		if c.op == "release" {
			t.Fatalf("released before %s", what)
		}
	}
}

// random_delay: a slot's run starts slotDelay after the slot, on the
// agent's own clock; the record names the slot (not the start), the run's
// outcome follows at its exit, and the next run shown includes the next
// slot's delay.
func TestTaskRandomDelay(t *testing.T) {
	t.Parallel()
	every, err := config.ParseSchedule("@every 1m")
	if err != nil {
		t.Fatal(err)
	}
	task := &config.Task{ScheduleText: "@every 1m", Schedule: every, RandomDelay: 30 * time.Second, StopTimeout: time.Second,
		Command: config.Command{Argv: config.ListOf("true")}}
	j, f, clk := taskTimingJob(t, task)
	t0 := clk.Now()
	expectCall(t, f, "acquire", t0)
	eventually(t, 10*time.Second, "it leads", func() bool { return j.get().State == StateLeader })
	slot := nextSlot(every, t0)
	d := slotDelay("spread", task, slot)
	if d <= 0 || d >= 30*time.Second {
		t.Fatalf("slotDelay = %s, want within (0, 30s) for this slot", d)
	}
	if other := slotDelay("spread", task, slot.Add(time.Minute)); other == d {
		t.Errorf("two slots got the same delay %s: the delay does not depend on the slot", d)
	}
	due := slot.Add(d)
	for clk.Now().Before(due) {
		clk.advanceTo(t, due)
	}
	c := untilRenewal(t, f, "the slot is recorded", func(r slotRecord) bool { return r.slot.Equal(slot) })
	if !c.at.Equal(due) {
		t.Errorf("slot recorded at slot+%s, want slot+%s (its random_delay)", c.at.Sub(slot), d)
	}
	if r := parseRecord(c.value).run; r == nil || r.Result != ResultRunning || !r.Slot.Equal(slot) || r.Node != "node-1" {
		t.Errorf("the record while it runs: %+v, want running, slot %s, node-1", r, slot)
	}
	c = untilRenewal(t, f, "the outcome is written", func(r slotRecord) bool { return r.run != nil && r.run.Result != ResultRunning })
	rec := parseRecord(c.value)
	if rec.run.Result != ResultSucceeded || rec.run.ExitCode == nil || *rec.run.ExitCode != 0 || !rec.lastSuccess.Equal(due) {
		t.Errorf("after the run: %+v (last success %s), want succeeded with exit code 0, last success at %s", rec.run, rec.lastSuccess, due)
	}
	st := j.get().Task
	next := slot.Add(time.Minute)
	if st == nil || st.NextRun == nil || !st.NextRun.Equal(next.Add(slotDelay("spread", task, next))) {
		t.Errorf("task status %+v, want next_run at the next slot plus its delay (%s)", st, next.Add(slotDelay("spread", task, next)))
	}
	if st != nil && (st.LastRun == nil || st.LastRun.Result != ResultSucceeded || st.LastSuccessAt == nil) {
		t.Errorf("task status %+v, want the run shown as succeeded", st)
	}
}

// Every agent shows a scheduled run's outcome, whichever ran it: the
// followers read it from the record that travels with the lease.
func TestTaskRecordSeenByFollowers(t *testing.T) {
	db, out := sqliteDB(t), filepath.Join(t.TempDir(), "runs")
	job := fmt.Sprintf(`
job "failing" {
%s
  task {
    schedule     = "@every 1s"
    command      = ["sh", "-c", "echo \"$ELECTD_SLOT $ELECTD_NODE\" >> %s; exit 3"]
    stop_timeout = "1s"
  }
}`, quick, out)
	var agents []*testAgent
	for i := 1; i <= 3; i++ {
		agents = append(agents, startAgent(t, loadConfig(t, agentConfig(fmt.Sprintf("node-%d", i), db, job))))
	}
	var last []string
	eventually(t, 20*time.Second, "every agent shows a failed run with exit code 3, run by the leader", func() bool {
		last = nil
		leader := ""
		for _, a := range agents {
			if s := a.job("failing"); s.state == StateLeader {
				leader = s.leader
			}
		}
		ok := leader != ""
		for _, a := range agents {
			st := taskOf(a, "failing")
			if st == nil || st.LastRun == nil {
				last, ok = append(last, "no run"), false
				continue
			}
			r := st.LastRun
			last = append(last, fmt.Sprintf("%s %s on %s", r.Slot.Format(time.RFC3339), r.Result, r.Node))
			if r.Result != ResultFailed || r.ExitCode == nil || *r.ExitCode != 3 || r.Node != leader || st.LastSuccessAt != nil || st.NextRun == nil {
				ok = false
			}
		}
		return ok
	})
	t.Logf("as the agents show it: %q", last)
	// The runs the followers show are runs that happened.
	ran := map[string]bool{}
	for _, l := range lines(t, out) {
		ran[strings.Fields(l)[0]] = true
	}
	for _, a := range agents {
		if r := taskOf(a, "failing").LastRun; !ran[r.Slot.Format(time.RFC3339)] {
			t.Errorf("%s shows a run of slot %s that did not run", a.fleet.node, r.Slot.Format(time.RFC3339))
		}
	}
	hist, err := agents[1].History("failing")
	if err != nil {
		t.Fatal(err)
	}
	runs := 0
	for _, h := range hist {
		if h.Type == TransitionTaskRun && h.Run != nil && h.Reason == "failed (exit code 3)" {
			runs++
		}
	}
	if runs == 0 {
		t.Errorf("node-2's history shows no failed run: %+v", hist)
	}
}

func taskOf(a *testAgent, job string) *TaskStatus {
	for _, j := range a.Jobs() {
		if j.Job == job {
			return j.Task
		}
	}
	return nil
}

// A lock-mode job has no leader between slots: the node asked runs a
// trigger request, at once, or once the node running a slot releases the
// lease; each request runs at most once, and every node shows the run.
func TestTriggerLockMode(t *testing.T) {
	db, dir := sqliteDB(t), t.TempDir()
	out, hang := filepath.Join(dir, "runs"), filepath.Join(dir, "hang")
	job := fmt.Sprintf(`
job "report" {
  mode = "lock"
%s
  task {
    schedule     = "@yearly"
    command      = ["sh", "-c", "echo \"$ELECTD_TRIGGER $ELECTD_NODE\" >> %s; if [ -e %s ]; then rm %s; sleep 2; fi; exit 4"]
    stop_timeout = "1s"
  }
}`, quick, out, hang, hang)
	a := startAgent(t, loadConfig(t, agentConfig("node-1", db, job)))
	b := startAgent(t, loadConfig(t, agentConfig("node-2", db, job)))
	eventually(t, 10*time.Second, "both agents start", func() bool { return a.Ready() && b.Ready() })
	ctx := context.Background()
	ranOn := func(n uint64) []string {
		var nodes []string
		for _, l := range lines(t, out) {
			if f := strings.Fields(l); f[0] == fmt.Sprint(n) {
				nodes = append(nodes, f[1])
			}
		}
		return nodes
	}
	shown := func(ag *testAgent, n uint64) bool {
		st := taskOf(ag, "report")
		return st != nil && st.LastRun != nil && st.LastRun.Trigger >= n && st.LastRun.Result == ResultFailed
	}

	// Asked of node-2: node-2 runs it, and node-1 shows it.
	n1, err := b.Trigger(ctx, "report")
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "node-2 runs request 1 and both nodes show it", func() bool { return shown(a, n1) && shown(b, n1) })
	if r := taskOf(a, "report").LastRun; r.Trigger != n1 || r.Node != "node-2" || r.ExitCode == nil || *r.ExitCode != 4 {
		t.Errorf("node-1 shows %+v, want request %d failed with exit code 4 on node-2", r, n1)
	}

	// Asked of node-1 while node-2 holds the lease for a run: node-1 runs
	// it once node-2 has released.
	if err := os.WriteFile(hang, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	n2, err := b.Trigger(ctx, "report")
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "node-2 starts request 2", func() bool { return len(ranOn(n2)) == 1 })
	n3, err := a.Trigger(ctx, "report")
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 15*time.Second, "node-1 runs request 3 after request 2", func() bool { return shown(a, n3) && shown(b, n3) })
	if got := ranOn(n3); len(got) != 1 || got[0] != "node-1" {
		t.Errorf("request %d ran on %q, want once on node-1", n3, got)
	}

	// Two requests at once on one node: each runs at most once (the second
	// may cover the first), and the last one runs.
	n4, err := a.Trigger(ctx, "report")
	if err != nil {
		t.Fatal(err)
	}
	n5, err := a.Trigger(ctx, "report")
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "request 5 runs", func() bool { return shown(a, n5) && shown(b, n5) })

	for _, n := range []uint64{n1, n2, n3, n4, n5} {
		if got := ranOn(n); len(got) > 1 || (len(got) == 0 && n != n4) {
			t.Errorf("request %d ran on %q, want once (runs: %q)", n, got, lines(t, out))
		}
	}

	// A node that may not take the lease refuses a request.
	a.Drain(true, false)
	if _, err := a.Trigger(ctx, "report"); !errors.Is(err, ErrCannotLead) {
		t.Errorf("trigger on a draining node: %v, want ErrCannotLead", err)
	}
	a.Drain(false, false)
}

// A slot that comes while the previous run still runs is skipped, and the
// skip, with why, is the last run in the record every node reads; the run in
// progress travels beside it, and its end is the last run then. A new leader
// that finds a skip beside a run left running reports that run killed.
func TestSkippedSlotInTheRecord(t *testing.T) {
	t.Parallel()
	every, err := config.ParseSchedule("@every 1m")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	gate, began := filepath.Join(dir, "gate"), filepath.Join(dir, "began")
	task := &config.Task{ScheduleText: "@every 1m", Schedule: every, StopTimeout: time.Second,
		Command: config.Command{Argv: config.ListOf("sh", "-c", "touch "+began+"; while [ ! -e "+gate+" ]; do sleep 0.02; done; exit 7")}}
	j, f, clk := taskTimingJob(t, task)
	t0 := clk.Now()
	expectCall(t, f, "acquire", t0)
	eventually(t, 10*time.Second, "it leads", func() bool { return j.get().State == StateLeader })
	slot := nextSlot(every, t0)
	// The leader's work begins once the term's first steps are done: its
	// slot is on the loop's timers then.
	eventually(t, 10*time.Second, "the slot is scheduled", func() bool { return timerAt(j, slot) })
	for clk.Now().Before(slot) {
		clk.advanceTo(t, slot)
	}
	untilRenewal(t, f, "the slot is recorded", func(r slotRecord) bool { return r.slot.Equal(slot) })
	eventually(t, 10*time.Second, "the run starts", func() bool { _, err := os.Stat(began); return err == nil })

	next := slot.Add(time.Minute)
	eventually(t, 10*time.Second, "the next slot is scheduled", func() bool { return timerAt(j, next) })
	for clk.Now().Before(next) {
		clk.advanceTo(t, next)
	}
	c := untilRenewal(t, f, "the skip is written", func(r slotRecord) bool { return r.run != nil && r.run.Result == ResultSkipped })
	rec := parseRecord(c.value) // as every other node reads it
	if r := rec.run; !r.Slot.Equal(next) || r.Why != "the previous run was still running" || r.Node != "node-1" {
		t.Errorf("the skip as the record carries it: %+v, want slot %s, why, node-1", r, next)
	}
	if a := rec.active; a == nil || !a.Slot.Equal(slot) || a.Result != ResultRunning || a.StartedAt == nil || a.StartedAt.Before(slot) {
		t.Errorf("the run in progress beside the skip: %+v, want slot %s running since it started", a, slot)
	}
	if !rec.slot.Equal(slot) {
		t.Errorf("the last slot recorded is %s, want %s: a skipped slot is not run later", rec.slot, slot)
	}
	if r := j.get().Task.LastRun; r == nil || r.Result != ResultSkipped {
		t.Errorf("the leader's task.last_run: %+v, want the skip", r)
	}

	// The run ends: its outcome is the last run, the skip is in the history.
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	c = untilRenewal(t, f, "the outcome is written", func(r slotRecord) bool { return r.run != nil && r.run.Result == ResultFailed })
	if rec := parseRecord(c.value); !rec.run.Slot.Equal(slot) || rec.run.ExitCode == nil || *rec.run.ExitCode != 7 || rec.active != nil {
		t.Errorf("after the run: %+v (active %+v), want slot %s failed with exit code 7, nothing in progress", rec.run, rec.active, slot)
	}
	hist := j.History()
	var runs []string
	for _, h := range hist {
		if h.Type == TransitionTaskRun {
			runs = append(runs, h.Run.Slot.Format(time.RFC3339)+" "+h.Reason)
		}
	}
	want := []string{next.UTC().Format(time.RFC3339) + " skipped: the previous run was still running", slot.UTC().Format(time.RFC3339) + " failed (exit code 7)"}
	if !slices.Equal(runs, want) {
		t.Errorf("the history's runs: %q, want %q", runs, want)
	}

	// A new leader finding the record of the skip reports the run in
	// progress killed (last: it shows that on this job).
	w := &leaderWork{j: j}
	done := make(chan slotRecord, 1)
	j.l.post(func() {
		w.inherit(rec)
		done <- w.rec
	})
	if got := <-done; got.run == nil || got.run.Result != ResultKilled || !got.run.Slot.Equal(slot) || got.active != nil {
		t.Errorf("a new leader's record after the skip: %+v, want the run of %s killed", got.run, slot)
	}

}

// timerAt says whether something is due at at on j's loop.
func timerAt(j *job, at time.Time) bool {
	ch := make(chan bool, 1)
	j.l.post(func() {
		found := false
		for _, tm := range j.l.timers {
			found = found || tm.at.Equal(at)
		}
		ch <- found
	})
	return <-ch
}
