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

// etcdCluster is one etcd 3.4 member per host, with pre-vote on (a member
// back from a partition does not depose the leader) and etcd's default
// heartbeat (100 ms) and election timeout (1 s).
type etcdCluster struct {
	t   *testing.T
	h   *hosts
	dir string
	bin string
	*members
}

func newEtcd(t *testing.T, h *hosts) store {
	bin, err := teststore.Tool("etcd", "")
	if err != nil {
		t.Skipf("etcd is not installed (scripts/services.sh etcd): %v", err)
	}
	e := &etcdCluster{t: t, h: h, dir: t.TempDir(), bin: bin, members: newMembers(t, h, "etcd")}
	for i := 1; i <= h.n; i++ {
		e.start(i, "new")
	}
	if !ec.Until(30*time.Second, 200*time.Millisecond, func() bool { return e.healthy(1) }) {
		t.Fatalf("etcd cluster not healthy within 30s:\n%s", e.logs())
	}
	return e
}

func (e *etcdCluster) name() string { return "etcd" }

func (e *etcdCluster) endpoint(i int) string { return e.h.addr(i) + ":2379" }

func (e *etcdCluster) endpoints() []string {
	var eps []string
	for i := 1; i <= e.h.n; i++ {
		eps = append(eps, e.endpoint(i))
	}
	return eps
}

func (e *etcdCluster) block() string { return ec.EtcdBlock("/electd-clusters/", e.endpoints()) }

// start starts host i's member: state "new" the first time, "existing"
// when it comes back on its own data after a kill.
func (e *etcdCluster) start(i int, state string) {
	e.t.Helper()
	var initial []string
	for k := 1; k <= e.h.n; k++ {
		initial = append(initial, fmt.Sprintf("m%d=http://%s:2380", k, e.h.addr(k)))
	}
	a := e.h.addr(i)
	argv := e.h.in(i, e.bin, "--name", fmt.Sprintf("m%d", i),
		"--data-dir", filepath.Join(e.dir, fmt.Sprintf("m%d", i)),
		"--listen-client-urls", "http://"+a+":2379", "--advertise-client-urls", "http://"+a+":2379",
		"--listen-peer-urls", "http://"+a+":2380", "--initial-advertise-peer-urls", "http://"+a+":2380",
		"--initial-cluster", strings.Join(initial, ","), "--initial-cluster-state", state,
		"--initial-cluster-token", e.h.prefix, "--pre-vote=true",
		"--logger", "zap", "--log-outputs", "stderr")
	e.run(i, e.dir, argv...)
}

// etcdctl runs etcdctl on host from against every member; its stdout.
func (e *etcdCluster) etcdctl(from int, args ...string) (string, error) {
	argv := e.h.in(from, append([]string{"etcdctl", "--endpoints", strings.Join(e.endpoints(), ","),
		"--command-timeout", "1s", "--dial-timeout", "1s"}, args...)...)
	out, err := exec.Command(argv[0], argv[1:]...).Output()
	return string(out), err
}

// healthy says whether every member answers, asked from host from.
func (e *etcdCluster) healthy(from int) bool {
	_, err := e.etcdctl(from, "endpoint", "health")
	return err == nil
}

// leader is the host of etcd's leader, asked from host from ("endpoint
// status" answers for the members it reaches).
func (e *etcdCluster) leader(from int) (int, error) {
	out, _ := e.etcdctl(from, "endpoint", "status", "-w", "json")
	var st []struct {
		Endpoint string
		Status   struct {
			Header struct {
				MemberID uint64 `json:"member_id"`
			} `json:"header"`
			Leader uint64 `json:"leader"`
		}
	}
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		return 0, fmt.Errorf("etcdctl endpoint status: %w: %q", err, out)
	}
	for _, s := range st {
		if s.Status.Leader != 0 && s.Status.Header.MemberID == s.Status.Leader {
			for i := 1; i <= e.h.n; i++ {
				if strings.Contains(s.Endpoint, e.endpoint(i)) {
					return i, nil
				}
			}
		}
	}
	return 0, fmt.Errorf("no member says it leads: %s", out)
}

// restart starts host i's member again on its data, and waits until every
// member answers.
func (e *etcdCluster) restart(i int) {
	e.t.Helper()
	e.start(i, "existing")
	if !ec.Until(30*time.Second, 200*time.Millisecond, func() bool { return e.healthy(i) }) {
		e.t.Fatalf("etcd not healthy within 30s of restarting m%d:\n%s", i, e.logs())
	}
}

// electionTime is how much later than ttl a lease can end when the store
// loses its leader: a follower campaigns after etcd's election timeout (1 s)
// and a randomised wait of up to as much again, and the new leader gives
// every lease its ttl again plus one more election timeout (the lessor's
// Promote).
func (e *etcdCluster) electionTime() time.Duration { return 3 * time.Second }
