package clusterfaults

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	ec "github.com/electd/electd/internal/cluster"
	"github.com/electd/electd/internal/teststore"
)

// natsBucket is the agents' bucket, with one replica per server.
const natsBucket = "electd-clusters"

// natsCluster is one nats-server (teststore.NATSServer's, JetStream) per host, routed to the
// others; the agents' bucket has 3 replicas. The store's leader, for the
// faults, is the leader of the bucket's stream (KV_<bucket>), which orders
// its writes.
type natsCluster struct {
	t   *testing.T
	h   *hosts
	dir string
	bin string
	*members
}

func newNATS(t *testing.T, h *hosts) store {
	bin, err := teststore.NATSServer()
	if err != nil {
		t.Skipf("nats-server is not installed (scripts/services.sh nats): %v", err)
	}
	n := &natsCluster{t: t, h: h, dir: t.TempDir(), bin: bin, members: newMembers(t, h, "nats")}
	for i := 1; i <= h.n; i++ {
		n.start(i)
	}
	if !ec.Until(30*time.Second, 200*time.Millisecond, func() bool { return n.healthy(1) }) {
		t.Fatalf("NATS cluster not healthy within 30s:\n%s", n.logs())
	}
	return n
}

func (n *natsCluster) name() string { return "nats" }

func (n *natsCluster) block() string {
	var addrs []string
	for i := 1; i <= n.h.n; i++ {
		addrs = append(addrs, n.h.addr(i)+":4222")
	}
	return ec.NATSBlock(natsBucket, addrs, "replicas = 3")
}

func (n *natsCluster) start(i int) {
	n.t.Helper()
	var routes []string
	for k := 1; k <= n.h.n; k++ {
		if k != i {
			routes = append(routes, fmt.Sprintf("nats://%s:6222", n.h.addr(k)))
		}
	}
	a := n.h.addr(i)
	argv := n.h.in(i, n.bin, "-a", a, "-p", "4222", "-m", "8222", "--server_name", fmt.Sprintf("h%d", i),
		"-js", "-sd", filepath.Join(n.dir, fmt.Sprintf("h%d", i)),
		"--cluster_name", "electd", "--cluster", fmt.Sprintf("nats://%s:6222", a), "--routes", strings.Join(routes, ","))
	n.run(i, n.dir, argv...)
}

// get fetches path from host i's monitoring port, asked from host from.
func (n *natsCluster) get(from, i int, path string) ([]byte, error) {
	argv := n.h.in(from, "curl", "-sf", "--max-time", "1", fmt.Sprintf("http://%s:8222%s", n.h.addr(i), path))
	return exec.Command(argv[0], argv[1:]...).Output()
}

// healthy says whether every server, asked from host from, has JetStream
// up; once the bucket exists, also a leader for its stream and every
// follower caught up. A follower still catching up after a fault (a host
// isolated, then healed) is no quorum with the leader: isolating the other
// follower then, a bystander, stops every write until it has caught up.
func (n *natsCluster) healthy(from int) bool {
	for i := 1; i <= n.h.n; i++ {
		if _, err := n.get(from, i, "/healthz?js-enabled-only=true"); err != nil {
			return false
		}
	}
	_, current, err := n.stream(from)
	if err != nil {
		return strings.Contains(err.Error(), "no stream")
	}
	return current
}

// leader is the host of the bucket's stream leader, asked from host from.
func (n *natsCluster) leader(from int) (int, error) {
	l, _, err := n.stream(from)
	return l, err
}

// stream is the host of the bucket's stream leader, asked from host from,
// and whether every follower is current, as the leader sees them (false
// when the leader's server does not answer).
func (n *natsCluster) stream(from int) (int, bool, error) {
	leader := 0
	for i := 1; i <= n.h.n; i++ {
		out, err := n.get(from, i, "/jsz?accounts=true&streams=true")
		if err != nil {
			continue
		}
		var jsz struct {
			Accounts []struct {
				Streams []struct {
					Name    string `json:"name"`
					Cluster struct {
						Leader   string `json:"leader"`
						Replicas []struct {
							Current bool `json:"current"`
						} `json:"replicas"`
					} `json:"cluster"`
				} `json:"stream_detail"`
			} `json:"account_details"`
		}
		if err := json.Unmarshal(out, &jsz); err != nil {
			return 0, false, fmt.Errorf("jsz: %w", err)
		}
		for _, a := range jsz.Accounts {
			for _, s := range a.Streams {
				if s.Name == "KV_"+natsBucket {
					var l int
					if _, err := fmt.Sscanf(s.Cluster.Leader, "h%d", &l); err != nil {
						return 0, false, fmt.Errorf("stream KV_%s has no leader", natsBucket)
					}
					if l != i {
						leader = l // its own server says which followers are current
						continue
					}
					current := len(s.Cluster.Replicas) == n.h.n-1
					for _, r := range s.Cluster.Replicas {
						current = current && r.Current
					}
					return l, current, nil
				}
			}
		}
		if leader == 0 {
			return 0, false, fmt.Errorf("no stream KV_%s yet", natsBucket)
		}
	}
	if leader != 0 {
		return leader, false, nil
	}
	return 0, false, fmt.Errorf("no NATS server answers host %d", from)
}

func (n *natsCluster) restart(i int) {
	n.t.Helper()
	n.start(i)
	if !ec.Until(60*time.Second, 200*time.Millisecond, func() bool { return n.healthy(i) }) {
		n.t.Fatalf("NATS not healthy within 60s of restarting h%d:\n%s", i, n.logs())
	}
}

// electionTime is how much later than ttl a lease can end when the
// stream's leader is lost: JetStream's raft waits 4 to 9 s before a
// follower campaigns (nats-server 2.9 and 2.15 alike).
func (n *natsCluster) electionTime() time.Duration { return 9 * time.Second }
