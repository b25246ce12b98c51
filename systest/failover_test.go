package systest

import (
	"fmt"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/electd/electd/internal/teststore"
)

// store is one lease store the 3-agent test runs on.
type store struct {
	name  string
	setup func(t *testing.T) (block string, env []string) // starts what the store needs
	tm    timing
	// crashSlack is added to ttl + retry_every*1.2 + 1s for a crash
	// failover: the time the store itself adds before an expiry shows.
	crashSlack time.Duration
	// handover bounds SIGTERM of the leader → next child running.
	handover time.Duration
}

// block is a provider block "TYPE" "s" with one attribute per line.
func block(typ string, attrs ...string) string {
	b := fmt.Sprintf("provider %q \"s\" {\n", typ)
	for _, a := range attrs {
		b += "  " + a + "\n"
	}
	return b + "}"
}

func stores() []store {
	pg := os.Getenv("ELECTD_TEST_POSTGRES_DSN")
	if pg == "" {
		pg = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	}
	my := os.Getenv("ELECTD_TEST_MYSQL_DSN")
	if my == "" {
		my = "root@tcp(127.0.0.1:3306)/test"
	}
	polled := defaultTiming.retry*12/10 + time.Second // no notification: the next retry
	return []store{
		{name: "sqlite", tm: defaultTiming, handover: polled, setup: func(t *testing.T) (string, []string) {
			return block("sql", `driver = "sqlite"`, fmt.Sprintf("dsn = %q", t.TempDir()+"/leases.db")), nil
		}},
		// PostgreSQL and Redis announce a release, and etcd watches: well under a second.
		{name: "postgres", tm: defaultTiming, handover: time.Second, setup: func(t *testing.T) (string, []string) {
			return block("sql", `driver = "postgres"`, fmt.Sprintf("dsn = %q", pg), fmt.Sprintf("table = %q", "electd_sys_"+randomSuffix())), nil
		}},
		{name: "mysql", tm: defaultTiming, handover: polled, setup: func(t *testing.T) (string, []string) {
			return block("sql", `driver = "mysql"`, fmt.Sprintf("dsn = %q", my), fmt.Sprintf("table = %q", "electd_sys_"+randomSuffix())), nil
		}},
		{name: "redis", tm: defaultTiming, handover: time.Second, setup: func(t *testing.T) (string, []string) {
			addr, _ := teststore.StartRedis(t)
			return block("redis", fmt.Sprintf("addresses = [%q]", addr)), nil
		}},
		{name: "redlock", tm: defaultTiming, handover: time.Second, setup: func(t *testing.T) (string, []string) {
			a, _ := teststore.StartRedis(t)
			b, _ := teststore.StartRedis(t)
			c, _ := teststore.StartRedis(t)
			return block("redis", fmt.Sprintf("addresses = [%q, %q, %q]", a, b, c)), nil
		}},
		// etcd rounds a lease up to whole seconds and sweeps expired ones about
		// every 0.5 s.
		{name: "etcd", tm: defaultTiming, handover: time.Second, crashSlack: 1500 * time.Millisecond, setup: func(t *testing.T) (string, []string) {
			ep, _ := teststore.StartEtcd(t)
			return block("etcd", fmt.Sprintf("endpoints = [%q]", ep), fmt.Sprintf("prefix = %q", "/electd-sys/")), nil
		}},
		// Azure blob leases last 15 to 60 s.
		{name: "azure_blob", tm: timing{15 * time.Second, 4 * time.Second, 500 * time.Millisecond, time.Second}, handover: polled,
			crashSlack: time.Second, setup: func(t *testing.T) (string, []string) {
				cs, _ := teststore.StartAzurite(t)
				return block("azure_blob", fmt.Sprintf("connection_string = %q", cs), `container = "electd-sys"`), nil
			}},
		// Datastore judges expiry on the candidates' clocks with a 1 s margin.
		{name: "datastore", tm: defaultTiming, handover: polled, crashSlack: time.Second, setup: func(t *testing.T) (string, []string) {
			host, _ := teststore.StartDatastore(t)
			return block("datastore", `project_id = "electd-sys"`), []string{"DATASTORE_EMULATOR_HOST=" + host}
		}},
	}
}

func TestThreeAgents(t *testing.T) {
	for _, st := range stores() {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel() // two at a time (-parallel defaults to the cores)
			block, env := st.setup(t)
			threeAgents(t, newClusterWith(t, 3, block, st.tm, env), st)
		})
	}
}

// TestThreeAgentsMongoDB needs a real MongoDB: FerretDB, the stand-in that
// runs here, does not arbitrate concurrent updates of one document (see
// docs/providers/mongodb.md), so three agents on it can both win.
func TestThreeAgentsMongoDB(t *testing.T) {
	uri := os.Getenv("ELECTD_TEST_MONGODB_URI")
	if uri == "" {
		t.Skip("needs a real MongoDB: set ELECTD_TEST_MONGODB_URI (FerretDB is not atomic under concurrent updates)")
	}
	st := store{name: "mongodb", tm: defaultTiming, handover: defaultTiming.retry*12/10 + time.Second}
	b := block("mongodb", fmt.Sprintf("uri = %q", uri), fmt.Sprintf("database = %q", "electd_sys_"+randomSuffix()))
	threeAgents(t, newClusterWith(t, 3, b, st.tm, nil), st)
}

// threeAgents: (a) exactly one child runs; (b) kill -9 of the leading agent
// kills its child at once and another starts within ttl + retry_every + 1 s;
// (c) SIGTERM of the leading agent hands over within the store's bound;
// (d) no two children overlap and tokens strictly increase.
func threeAgents(t *testing.T, c *cluster, st store) {
	tm := st.tm
	// (a)
	c.waitStarts(1, 30*time.Second)
	c.exactlyOneFor(2 * tm.ttl)
	if n := len(c.starts()); n != 1 {
		t.Fatalf("%d children started while nothing failed, want 1", n)
	}

	// (b)
	ends := map[int]time.Time{}
	first := c.running()[0]
	leader := c.agents[first.node]
	killedAt := time.Now()
	leader.cmd.Process.Signal(syscall.SIGKILL)
	ends[first.pid] = waitGone(t, first.pid, 3*time.Second)
	t.Logf("kill -9: child of %s gone after %s", first.node, ends[first.pid].Sub(killedAt).Round(time.Millisecond))
	<-leader.done
	delete(c.agents, first.node)

	bound := tm.ttl + tm.retry*12/10 + time.Second + st.crashSlack
	second := c.waitStarts(2, bound+10*time.Second)[1]
	if took := second.at.Sub(killedAt); took > bound {
		t.Errorf("after kill -9 the next child started after %s, want within %s", took, bound)
	} else {
		t.Logf("kill -9 → next child running: %s (bound %s)", took.Round(time.Millisecond), bound)
	}
	c.exactlyOneFor(tm.ttl / 2)

	// (c)
	leader = c.leader()
	cur := c.running()[0]
	termAt := time.Now()
	leader.cmd.Process.Signal(syscall.SIGTERM)
	third := c.waitStarts(3, 15*time.Second)[2]
	select {
	case <-leader.done:
	case <-time.After(20 * time.Second):
		t.Fatalf("agent %s did not exit within 20s of SIGTERM", leader.node)
	}
	if leader.err != nil {
		t.Errorf("agent %s exited with %v after SIGTERM, want exit 0", leader.node, leader.err)
	}
	delete(c.agents, leader.node)
	if alive(cur.pid) {
		t.Errorf("child %d of the stopped agent is still running", cur.pid)
	}
	if took := third.at.Sub(termAt); took > st.handover {
		t.Errorf("after SIGTERM the next child started after %s, want within %s", took, st.handover)
	} else {
		t.Logf("SIGTERM → next child running: %s (bound %s)", took.Round(time.Millisecond), st.handover)
	}

	// (d)
	c.exactlyOneFor(time.Second)
	c.checkHistory(ends)
}
