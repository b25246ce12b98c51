package systest

import (
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/electd/electd/internal/cluster"
)

// store is one lease store the 3-agent test runs on.
type store struct {
	name string
	tm   cluster.Timing
	// crashSlack is added to ttl + retry_every*1.2 + 1s for a crash
	// failover: the time the store itself adds before an expiry shows.
	crashSlack time.Duration
	// handover bounds SIGTERM of the leader → next child running.
	handover time.Duration
}

func stores() []store {
	polled := defaultTiming.Retry*12/10 + time.Second // no notification: the next retry
	var out []store
	for _, name := range []string{"sqlite", "postgres", "mysql", "redis", "redlock", "etcd", "zookeeper", "nats", "azure_blob", "datastore"} {
		st := store{name: name, tm: defaultTiming, handover: polled}
		if cluster.Notifies(name) {
			// PostgreSQL and Redis announce a release, MySQL rings a named
			// lock; etcd, ZooKeeper, NATS and SQLite (a file watch) watch:
			// well under a second.
			st.handover = time.Second
		}
		switch name {
		case "etcd":
			// etcd rounds a lease up to whole seconds and sweeps expired
			// ones about every 0.5 s.
			st.crashSlack = 1500 * time.Millisecond
		case "zookeeper":
			// ZooKeeper checks session expiry once a tick (100 ms on the
			// test server); the watch then wakes the candidates.
			st.crashSlack = 200 * time.Millisecond
		case "azure_blob":
			// Azure blob leases last 15 to 60 s.
			st.tm = cluster.Timing{TTL: 15 * time.Second, Renew: 4 * time.Second, Retry: 500 * time.Millisecond, Stop: time.Second}
			st.crashSlack = time.Second
		case "datastore":
			// Datastore judges expiry on the candidates' clocks with a 1 s
			// margin.
			st.crashSlack = time.Second
		}
		out = append(out, st)
	}
	return out
}

func TestThreeAgents(t *testing.T) {
	t.Parallel()
	for _, st := range stores() {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel() // two at a time (-parallel defaults to the cores)
			p := cluster.MustProvider(t, st.name)
			threeAgents(t, cluster.Start(t, 3, cluster.Options{Binary: binary, Provider: p, Timing: st.tm}), st)
		})
	}
}

// TestThreeAgentsMongoDB needs a real MongoDB: FerretDB, the stand-in that
// runs here, does not arbitrate concurrent updates of one document (see
// docs/providers/mongodb.md), so three agents on it can both win.
func TestThreeAgentsMongoDB(t *testing.T) {
	t.Parallel()
	uri := os.Getenv("ELECTD_TEST_MONGODB_URI")
	if uri == "" {
		t.Skip("needs a real MongoDB: set ELECTD_TEST_MONGODB_URI (FerretDB is not atomic under concurrent updates)")
	}
	st := store{name: "mongodb", tm: defaultTiming, handover: defaultTiming.Retry*12/10 + time.Second}
	p := cluster.Provider{Name: "mongodb", Block: cluster.Block("mongodb", cluster.Str("uri", uri),
		cluster.Str("database", "electd_sys_"+cluster.RandomSuffix()))}
	threeAgents(t, cluster.Start(t, 3, cluster.Options{Binary: binary, Provider: p, Timing: st.tm}), st)
}

// threeAgents: (a) exactly one child runs; (b) kill -9 of the leading agent
// kills its child at once and another starts within ttl + retry_every + 1 s;
// (c) SIGTERM of the leading agent hands over within the store's bound;
// (d) no two children overlap and tokens strictly increase.
func threeAgents(t *testing.T, c *cluster.Cluster, st store) {
	tm := st.tm
	// (a)
	cluster.MustWaitStarts(t, c, 1, 30*time.Second)
	cluster.MustExactlyOneFor(t, c, 2*tm.TTL)
	if n := len(cluster.MustStarts(t, c)); n != 1 {
		t.Fatalf("%d children started while nothing failed, want 1", n)
	}

	// (b)
	ends := map[int]time.Time{}
	leader, first := cluster.MustLeader(t, c)
	killedAt := time.Now()
	leader.Signal(syscall.SIGKILL)
	ends[first.PID] = cluster.MustWaitGone(t, first.PID, 3*time.Second)
	t.Logf("kill -9: child of %s gone after %s", first.Node, ends[first.PID].Sub(killedAt).Round(time.Millisecond))
	<-leader.Done()
	c.Forget(first.Node)

	bound := tm.TTL + tm.Retry*12/10 + time.Second + st.crashSlack
	second := cluster.MustWaitStarts(t, c, 2, bound+10*time.Second)[1]
	if took := second.At.Sub(killedAt); took > bound {
		t.Errorf("after kill -9 the next child started after %s, want within %s", took, bound)
	} else {
		t.Logf("kill -9 → next child running: %s (bound %s)", took.Round(time.Millisecond), bound)
	}
	cluster.MustExactlyOneFor(t, c, tm.TTL/2)

	// (c)
	leader, cur := cluster.MustLeader(t, c)
	termAt := time.Now()
	leader.Signal(syscall.SIGTERM)
	third := cluster.MustWaitStarts(t, c, 3, 15*time.Second)[2]
	err, ok := leader.Wait(20 * time.Second)
	if !ok {
		t.Fatalf("agent %s did not exit within 20s of SIGTERM", leader.Node)
	}
	if err != nil {
		t.Errorf("agent %s exited with %v after SIGTERM, want exit 0", leader.Node, err)
	}
	c.Forget(leader.Node)
	if alive(cur.PID) {
		t.Errorf("child %d of the stopped agent is still running", cur.PID)
	}
	if took := third.At.Sub(termAt); took > st.handover {
		t.Errorf("after SIGTERM the next child started after %s, want within %s", took, st.handover)
	} else {
		t.Logf("SIGTERM → next child running: %s (bound %s)", took.Round(time.Millisecond), st.handover)
	}

	// (d)
	cluster.MustExactlyOneFor(t, c, time.Second)
	cluster.CheckHistory(t, c, ends)
}
