package systest

import (
	"fmt"
	"os"
	"syscall"
	"testing"
	"time"
)

// stores the 3-agent tests run on. Each gets a fresh namespace.
func stores(t *testing.T) map[string]struct {
	block    string
	handover time.Duration // SIGTERM of the leader → next child running
} {
	pg := os.Getenv("ELECTD_TEST_POSTGRES_DSN")
	if pg == "" {
		pg = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	}
	table := "electd_sys_" + randomSuffix()
	sqlite := fmt.Sprintf("%s/leases.db", t.TempDir())
	return map[string]struct {
		block    string
		handover time.Duration
	}{
		// SQLite has no notification: a waiting node notices a release on its next retry.
		"sqlite": {fmt.Sprintf("provider \"sql\" \"s\" {\n  driver = \"sqlite\"\n  dsn = %q\n}", sqlite), retryEvery*12/10 + time.Second},
		// PostgreSQL announces a release with NOTIFY: handover well under a second.
		"postgres": {fmt.Sprintf("provider \"sql\" \"s\" {\n  driver = \"postgres\"\n  dsn = %q\n  table = %q\n}", pg, table), time.Second},
	}
}

func TestThreeAgents(t *testing.T) {
	for name, store := range stores(t) {
		t.Run(name, func(t *testing.T) {
			c := newCluster(t, 3, store.block)

			// (a) exactly one child runs, and keeps running alone.
			c.waitStarts(1, 20*time.Second)
			c.exactlyOneFor(2 * ttl)
			if n := len(c.starts()); n != 1 {
				t.Fatalf("%d children started while nothing failed, want 1", n)
			}

			// (b) kill -9 of the leading agent: its child dies with it, and
			// another starts within ttl + retry_every + 1 s.
			ends := map[int]time.Time{}
			first := c.running()[0]
			leader := c.agents[first.node]
			killedAt := time.Now()
			leader.cmd.Process.Signal(syscall.SIGKILL)
			ends[first.pid] = waitGone(t, first.pid, 3*time.Second)
			t.Logf("kill -9: child of %s gone after %s", first.node, ends[first.pid].Sub(killedAt).Round(time.Millisecond))
			<-leader.done
			delete(c.agents, first.node)

			bound := ttl + retryEvery*12/10 + time.Second
			second := c.waitStarts(2, bound+5*time.Second)[1]
			if took := second.at.Sub(killedAt); took > bound {
				t.Errorf("after kill -9 the next child started after %s, want within %s", took, bound)
			} else {
				t.Logf("kill -9 → next child running: %s (bound %s)", took.Round(time.Millisecond), bound)
			}
			c.exactlyOneFor(ttl)

			// (c) SIGTERM of the leading agent: it stops its child, releases,
			// and another node takes over quickly.
			leader = c.leader()
			cur := c.running()[0]
			termAt := time.Now()
			leader.cmd.Process.Signal(syscall.SIGTERM)
			third := c.waitStarts(3, 10*time.Second)[2]
			select {
			case <-leader.done:
			case <-time.After(15 * time.Second):
				t.Fatalf("agent %s did not exit within 15s of SIGTERM", leader.node)
			}
			if leader.err != nil {
				t.Errorf("agent %s exited with %v after SIGTERM, want exit 0", leader.node, leader.err)
			}
			delete(c.agents, leader.node)
			if alive(cur.pid) {
				t.Errorf("child %d of the stopped agent is still running", cur.pid)
			}
			if took := third.at.Sub(termAt); took > store.handover {
				t.Errorf("after SIGTERM the next child started after %s, want within %s", took, store.handover)
			} else {
				t.Logf("SIGTERM → next child running: %s (bound %s)", took.Round(time.Millisecond), store.handover)
			}

			// (d) no overlap, tokens strictly increase.
			c.exactlyOneFor(time.Second)
			c.checkHistory(ends)
		})
	}
}
